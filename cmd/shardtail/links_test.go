package main

import (
	"go/parser"
	"go/token"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/shardtail/shardtail/"

// servingHelpers are the internal packages the serving path may link:
// production helpers only.
var servingHelpers = []string{module + "internal/coalesce", module + "internal/sockopt"}

// TestLinks keeps the layout rule of internal/: the binary links no test
// harness (internal/testsupport/...), and the serving path (the packages
// serve.go imports) links no internal package but the production helpers
// it needs. The benchmark's helpers (childproc, localpg, fakes3, loopback)
// are linked through `shardtail bench` only.
func TestLinks(t *testing.T) {
	for _, dep := range goListDeps(t, ".") {
		if strings.HasPrefix(dep, module+"internal/testsupport/") {
			t.Errorf("the binary links the test harness %s", dep)
		}
	}
	f, err := parser.ParseFile(token.NewFileSet(), "serve.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var serving []string
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(path, module) {
			serving = append(serving, path)
		}
	}
	if len(serving) == 0 {
		t.Fatal("serve.go imports none of our packages; the check would check nothing")
	}
	for _, dep := range goListDeps(t, serving...) {
		if strings.HasPrefix(dep, module+"internal/") && !slices.Contains(servingHelpers, dep) {
			t.Errorf("the serving path (%s) links %s", strings.Join(serving, " "), dep)
		}
	}
}

// goListDeps returns the packages that pkgs link, theirs included.
func goListDeps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", strings.Join(pkgs, " "), err)
	}
	return strings.Fields(string(out))
}
