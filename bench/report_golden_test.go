package bench

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rewriteReports rewrites the expected markdown of TestReportGolden and
// TestReadmeGolden.
var rewriteReports = flag.Bool("rewrite-reports", false, "rewrite testdata/report/*.md from the current renderer")

// TestReportGolden renders each report JSON under testdata/report and
// compares the markdown with the .md next to it, so that a change to the
// renderer that changes the text, for the same data, shows up here:
// latest.json is a real run (before runs were repeated), rich.json the same
// with every optional part filled in (runs and their spread, errors, an
// aborted storm, stalled-client failures, counters, a merged (f) on S3,
// problems).
func TestReportGolden(t *testing.T) {
	for in, r := range reportInputs(t) {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			writeMarkdown(&out, r, true)
			checkGolden(t, in, strings.TrimSuffix(in, ".json")+".md", out.String())
		})
	}
}

// reportInputs are the report JSONs under testdata/report, each read.
func reportInputs(t *testing.T) map[string]*Report {
	t.Helper()
	inputs, err := filepath.Glob("testdata/report/*.json")
	must(t, err)
	if len(inputs) == 0 {
		t.Fatal("no report JSON under testdata/report")
	}
	reports := make(map[string]*Report)
	for _, in := range inputs {
		r, err := ReadReport(in)
		must(t, err)
		reports[in] = r
	}
	return reports
}

// checkGolden compares got, rendered from in, with the file golden, or
// rewrites golden with it under -rewrite-reports.
func checkGolden(t *testing.T, in, golden, got string) {
	t.Helper()
	if *rewriteReports {
		must(t, os.WriteFile(golden, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(golden)
	must(t, err)
	if got != string(want) {
		t.Errorf("%s: the rendered text differs from %s (go test -rewrite-reports to accept):\n%s", in, golden, lineDiff(got, string(want)))
	}
}

// lineDiff shows the first lines where got and want differ.
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(g), len(w)) && shown < 5; i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			fmt.Fprintf(&b, "line %d:\n  got  %s\n  want %s\n", i+1, gl, wl)
			shown++
		}
	}
	return b.String()
}
