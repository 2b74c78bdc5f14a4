package bench

import (
	"bytes"
	"strings"
	"testing"
)

// markdownOf renders r's markdown (no plots) for tests.
func markdownOf(t *testing.T, r *Report) string {
	t.Helper()
	r.Goals = checkGoals(r)
	var b bytes.Buffer
	writeMarkdown(&b, r, false)
	return b.String()
}

// tableRow returns the markdown table row whose first cell is name.
func tableRow(t *testing.T, md, name string) string {
	t.Helper()
	for line := range strings.Lines(md) {
		if strings.HasPrefix(line, "| "+name+" |") {
			return strings.TrimSpace(line)
		}
	}
	t.Fatalf("no row %q in:\n%s", name, md)
	return ""
}

// TestReportAbortedMemory: a dataflow run of (e) cut short by the memory
// guard shows its peak as a peak during the subscribe storm, never as RSS
// per idle subscriber, and no ratio for it.
func TestReportAbortedMemory(t *testing.T) {
	const mb = 1 << 20
	idle := &StormResult{Clients: 1000, Connected: 1000, Completed: 1000, StormSeconds: 1, ServerCPU: 1}
	aborted := &StormResult{Clients: 1000, Connected: 1000, Completed: 400, Errors: 600, StormSeconds: 9, ServerCPU: 9,
		ServerPeakRSS: 10240 * mb, Aborted: "aborted: server RSS 10 GiB over the guard"}
	cfg := DefaultSuite(true)
	cfg.IdleClients = 1000
	r := &Report{Config: cfg, Results: &Results{Paths: map[string]*PathResults{
		PathFast: {Path: PathFast, Memory: &MemoryResult{Storm: idle, RSSBefore: 100 * mb, RSSIdle: 127 * mb, PerClientKB: 27.6}},
		// As a run before PeakRSS recorded it: the peak in RSSIdle and
		// divided by the subscribers that got in.
		PathDataflow: {Path: PathDataflow, Memory: &MemoryResult{Storm: aborted, RSSBefore: 100 * mb, RSSIdle: 10240 * mb, PerClientKB: 25958}},
	}}}
	md := markdownOf(t, r)
	if got, want := tableRow(t, md, "RSS per idle subscriber"), "| RSS per idle subscriber | 27.6 KiB | — |  |"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got, want := tableRow(t, md, "server RSS with the idle subscribers"), "| server RSS with the idle subscribers | 127 MiB | — |  |"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got, want := tableRow(t, md, "server peak RSS during the subscribe storm (aborted run)"),
		"| server peak RSS during the subscribe storm (aborted run) | — | 10240 MiB |  |"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if strings.Contains(md, "25958") || strings.Contains(md, "25,958") {
		t.Errorf("the aborted run's peak ÷ subscribers is still reported:\n%s", md)
	}
}
