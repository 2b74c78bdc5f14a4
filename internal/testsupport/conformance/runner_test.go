package conformance_test

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardtail/shardtail/internal/testsupport/conformance"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the scripts' expectations from the fast path's output")

// scriptDir holds the conformance scripts, at the repository root.
const scriptDir = "../../../testdata/conformance"

// TestConformance runs every script on both paths.
func TestConformance(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(scriptDir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no scripts in %s", scriptDir)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conformance.Test(t, path, *rewrite)
		})
	}
}
