package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardtail/shardtail/bench"
	"github.com/shardtail/shardtail/internal/testsupport/testbin"
)

// TestBenchTailMerge runs scenario (f) of `shardtail bench` small, with a
// role-all server and a tail process of the real binary on a shared blob
// directory and SQLite file, and merges it into an earlier report: the
// tail must serve the fast-path storm itself and pass the dataflow-path
// storm to role all, and the earlier report's sections must stay. It
// checks counts, never timing.
func TestBenchTailMerge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a role-all server and a tail process")
	}
	bin := testbin.Build(t)
	dir := t.TempDir()
	earlier := &bench.Report{Command: "shardtail bench --scenarios a", Config: bench.DefaultSuite(true),
		Results: &bench.Results{Paths: map[string]*bench.PathResults{
			bench.PathFast: {Path: bench.PathFast, Storms: []*bench.StormResult{{Clients: 64, Connected: 64, Completed: 64,
				StormSeconds: 0.1, Snapshot: bench.Dist{N: 64, P50: 0.05, P95: 0.09, Max: 0.1}, ServerCPU: 0.05}}},
		}}}
	b, err := json.Marshal(earlier)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, bench.ReportJSON)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}

	const n, dataflowN = 8, 4
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err = NewMain(&stdout, &stderr).Run(ctx, []string{"bench", "--quick", "--scenarios", "f", "--tail-storage", "file",
		"--tail-clients", "8", "--tail-dataflow-clients", "4", "--server-bin", bin, "--merge", file})
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}

	b, err = os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Command != earlier.Command || len(rep.Results.Paths[bench.PathFast].Storms) != 1 {
		t.Errorf("the earlier run's command and (a) did not stay: %q, %+v", rep.Command, rep.Results.Paths)
	}
	tr := rep.Results.Tail
	if tr == nil || tr.Run == nil || tr.Run.Started.IsZero() {
		t.Fatalf("(f) missing or not marked as merged: %+v", tr)
	}
	if len(tr.Problems) > 0 {
		t.Errorf("problems: %q", tr.Problems)
	}
	if got, want := len(tr.Storms), 4; got != want {
		t.Fatalf("%d storms; want %d", got, want)
	}
	const subscribes = "shardtail_subscribes_total"
	for _, ts := range tr.Storms {
		s := ts.Storm
		want := n
		if ts.Path == bench.PathDataflow {
			want = dataflowN
		}
		if s.Clients != want || s.Completed != want || s.Errors != 0 {
			t.Errorf("%s via %s: %d clients, %d complete, %d errors %v; want %d, %d, 0",
				ts.Path, ts.Via, s.Clients, s.Completed, s.Errors, s.ErrorSamples, want, want)
		}
		// Where the subscribes ran: on the tail only for the fast path
		// through it; a dataflow-path subscribe through the tail runs on
		// role all.
		wantTail, wantUp := 0.0, float64(want)
		if ts.Via == bench.TargetTail && ts.Path == bench.PathFast {
			wantTail, wantUp = float64(want), 0
		}
		if ts.TailCounters[subscribes] != wantTail || ts.UpstreamCounters[subscribes] != wantUp {
			t.Errorf("%s via %s: subscribes on the tail %v, on role all %v; want %v, %v",
				ts.Path, ts.Via, ts.TailCounters[subscribes], ts.UpstreamCounters[subscribes], wantTail, wantUp)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, bench.ReportMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## (a) Reconnect storm", "## (f) Storm through a tail process", "merged into this report"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("%s lacks %q", bench.ReportMarkdown, want)
		}
	}
}

// TestBenchRenderReadme: `shardtail bench --render FILE --readme README`
// re-renders the report and rewrites the README's generated block from it,
// linking to the report; with a README that has no markers it fails
// before writing anything.
func TestBenchRenderReadme(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "bench", "results")
	if err := os.MkdirAll(results, 0o755); err != nil {
		t.Fatal(err)
	}
	rep := &bench.Report{Command: "shardtail bench --scenarios a", Config: bench.DefaultSuite(true),
		Versions: bench.Versions{Commit: "abc1234"},
		Results: &bench.Results{Paths: map[string]*bench.PathResults{
			bench.PathFast: {Path: bench.PathFast, Storms: []*bench.StormResult{{Clients: 64, Connected: 64, Completed: 64,
				StormSeconds: 0.1, Snapshot: bench.Dist{N: 64, P50: 0.05, P95: 0.09, Max: 0.1}, ServerCPU: 0.05}}},
		}}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(results, bench.ReportJSON)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(dir, "README.md")
	const before, after = "# Title\n\n<!-- bench:begin -->\n", "<!-- bench:end -->\n\nThe end.\n"
	if err := os.WriteFile(readme, []byte(before+"stale\n"+after), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) error {
		var stdout, stderr bytes.Buffer
		err := NewMain(&stdout, &stderr).Run(context.Background(), append([]string{"bench"}, args...))
		if err != nil {
			t.Logf("stderr: %s", stderr.String())
		}
		return err
	}
	if err := run("--render", file, "--readme", readme); err != nil {
		t.Fatalf("bench --render --readme: %v", err)
	}
	got, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"commit abc1234", "[bench/results/latest.md](bench/results/latest.md)", "| (a) storm of 64 clients | storm time | 100.0 ms |"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("README lacks %q:\n%s", want, got)
		}
	}
	if s := string(got); !strings.HasPrefix(s, before) || !strings.HasSuffix(s, after) || strings.Contains(s, "stale") {
		t.Errorf("README outside the block changed, or the block was not replaced:\n%s", s)
	}

	md := filepath.Join(results, bench.ReportMarkdown)
	if err := os.Remove(md); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(readme, []byte("# No markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run("--render", file, "--readme", readme); !errors.Is(err, bench.ErrReadmeMarkers) {
		t.Errorf("bench --render --readme on a README without markers: %v; want ErrReadmeMarkers", err)
	}
	if _, err := os.Stat(md); !os.IsNotExist(err) {
		t.Errorf("the report was rendered although the README's markers were wrong: %v", err)
	}
}
