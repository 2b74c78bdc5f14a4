package bench

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeGolden renders the README's summary of each report JSON under
// testdata/report and compares it with the .readme.md next to it (go test
// -rewrite-reports to accept a change): latest.json is a report of one
// run without (g), (h) or (i), rich.json one of three runs with (f)
// merged from a run of its own, (g) and (i).
func TestReadmeGolden(t *testing.T) {
	for in, r := range reportInputs(t) {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			writeSummary(&out, r, "bench/results/latest.md")
			checkGolden(t, in, strings.TrimSuffix(in, ".json")+".readme.md", out.String())
		})
	}
}

// readmeBefore and readmeAfter are a README around a generated block: prose on either side,
// a begin line with more after its prefix, markers quoted in prose
// (not lines of their own, so not markers), CRLF line ends outside the
// block, no newline at the end.
const (
	readmeBefore = "# Title\r\n\nProse that quotes `<!-- bench:begin -->` and `<!-- bench:end -->` inline.\n\n  <!-- bench:begin from bench/results/latest.json -->\n"
	readmeAfter  = "<!-- bench:end -->\r\n\n## Next\n\nMore prose, then the end without a newline"
)

// TestReadmeReplaceBlock: a rewrite replaces what lies between the marker
// lines and leaves every byte outside them, the marker lines included,
// as it was; rewriting again with the same block changes nothing.
func TestReadmeReplaceBlock(t *testing.T) {
	for _, old := range []string{"", "\n", "| stale | table |\n\nMore stale text.\n"} {
		doc := []byte(readmeBefore + old + readmeAfter)
		block := []byte("| a | b |\n|---|---|\n| 1 | 2 |\n")
		out, err := replaceBlock(doc, block)
		must(t, err)
		got := string(out)
		if !strings.HasPrefix(got, readmeBefore) || !strings.HasSuffix(got, readmeAfter) {
			t.Fatalf("old block %q: the text outside the markers changed:\n%q", old, got)
		}
		if mid := got[len(readmeBefore) : len(got)-len(readmeAfter)]; mid != "\n"+string(block)+"\n" {
			t.Errorf("old block %q: between the markers %q, want the block between blank lines", old, mid)
		}
		again, err := replaceBlock(out, block)
		must(t, err)
		if !bytes.Equal(again, out) {
			t.Errorf("old block %q: a second rewrite with the same block changed the text:\n%q\n%q", old, out, again)
		}
	}
}

// TestReadmeMarkersWrong: without exactly one begin and one end marker
// line, in that order, there is no block to rewrite: ErrReadmeMarkers,
// saying what is wrong.
func TestReadmeMarkersWrong(t *testing.T) {
	const begin, end = "<!-- bench:begin -->\n", "<!-- bench:end -->\n"
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"no markers", "# Title\n\nProse.\n", "no begin marker"},
		{"no end", "# Title\n" + begin + "table\n", "no end marker"},
		{"no begin", "# Title\ntable\n" + end, "no begin marker"},
		{"two begins", begin + "a\n" + begin + "b\n" + end, "2 begin marker lines"},
		{"two ends", begin + "a\n" + end + "b\n" + end, "2 end marker lines"},
		{"two blocks", begin + "a\n" + end + begin + "b\n" + end, "2 begin marker lines"},
		{"end first", end + "a\n" + begin, "end marker line comes before"},
		{"begin unclosed", "<!-- bench:begin\n" + end, "no begin marker"},
	} {
		out, err := replaceBlock([]byte(tc.doc), []byte("block\n"))
		if !errors.Is(err, ErrReadmeMarkers) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (%q); want ErrReadmeMarkers: %s", tc.name, err, out, tc.want)
		}
	}
}

// TestWriteReadme rewrites a README file: the block links to the report
// relative to the README, the file keeps its mode, and a README with wrong
// markers is left as it was.
func TestWriteReadme(t *testing.T) {
	r := reportInputs(t)[filepath.Join("testdata", "report", "rich.json")]
	if r == nil {
		t.Fatal("no testdata/report/rich.json")
	}
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	must(t, os.WriteFile(readme, []byte(readmeBefore+"stale\n"+readmeAfter), 0o640))
	must(t, WriteReadme(readme, r, filepath.Join(dir, "bench", "results")))
	b, err := os.ReadFile(readme)
	must(t, err)
	if got := string(b); !strings.HasPrefix(got, readmeBefore) || !strings.HasSuffix(got, readmeAfter) || strings.Contains(got, "stale") {
		t.Errorf("rewritten README:\n%s", got)
	}
	if want := "[bench/results/latest.md](bench/results/latest.md)"; !bytes.Contains(b, []byte(want)) {
		t.Errorf("the block does not link to the report as %s:\n%s", want, b)
	}
	if st, err := os.Stat(readme); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("mode after the rewrite: %v, %v; want 0640", st.Mode(), err)
	}

	bad := []byte("# Title\n\n<!-- bench:begin -->\nno end\n")
	must(t, os.WriteFile(readme, bad, 0o644))
	if err := WriteReadme(readme, r, dir); !errors.Is(err, ErrReadmeMarkers) {
		t.Errorf("WriteReadme without an end marker: %v; want ErrReadmeMarkers", err)
	}
	if b, _ := os.ReadFile(readme); !bytes.Equal(b, bad) {
		t.Errorf("a README with wrong markers was changed:\n%s", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".README.md.*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestReadmeUpToDate: the repository's README holds the summary of the
// committed report (bench/results/latest.json), so that a report
// committed without regenerating the README is caught here. To fix it:
// shardtail bench --render bench/results/latest.json --readme README.md.
func TestReadmeUpToDate(t *testing.T) {
	const readme, report = "../README.md", "results/" + ReportJSON
	doc, err := os.ReadFile(readme)
	must(t, err)
	r, err := ReadReport(report)
	must(t, err)
	link, err := relativeLink(readme, filepath.Join(filepath.Dir(report), ReportMarkdown))
	must(t, err)
	var block bytes.Buffer
	writeSummary(&block, r, link)
	want, err := replaceBlock(doc, block.Bytes())
	must(t, err)
	if !bytes.Equal(doc, want) {
		t.Errorf("README.md's generated block is not the summary of %s (run shardtail bench --render bench/results/latest.json --readme README.md):\n%s",
			report, lineDiff(string(doc), string(want)))
	}
}
