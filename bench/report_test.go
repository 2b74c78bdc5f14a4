package bench

import (
	"bytes"
	"slices"
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

// TestReportPerSubscribeCost: the report explains the dataflow path's
// per-subscribe cost from its storm counters.
func TestReportPerSubscribeCost(t *testing.T) {
	cfg := DefaultSuite(true)
	cfg.Clients = []int{64, 256}
	storm := func(n int) []*StormResult {
		return []*StormResult{{Clients: n, Connected: n, Completed: n, StormSeconds: 1, ServerCPU: 1}}
	}
	counters := func(subs, cas, conflicts, parts float64) map[string]float64 {
		return map[string]float64{"shardtail_subscribes_total": subs, "shardtail_persist_cas_attempts_total": cas,
			"shardtail_persist_cas_conflicts_total": conflicts, "shardtail_persist_parts_fetched_total": parts}
	}
	r := &Report{Config: cfg, Results: &Results{Paths: map[string]*PathResults{
		PathFast: {Path: PathFast, Storms: storm(256), StormCounters: map[int]map[string]float64{256: counters(256, 3, 0, 4)}},
		PathDataflow: {Path: PathDataflow, Storms: storm(256), StormCounters: map[int]map[string]float64{
			64: counters(64, 64, 0, 256), 256: counters(256, 640, 128, 1024)}},
	}}}
	md := markdownOf(t, r)
	for _, want := range []string{
		"counters at N=256, per subscribe",
		"2.50 CAS attempts per subscribe, 0.50 of them lost",
		"4.00 part fetches per subscribe",
		"fast path at N=256 shares one reader and one decode per collection: 0.01 CAS attempts and 0.02 part fetches per subscribe",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// TestReportMedianOfRuns: with three runs, (a)'s figures are the medians
// with their min–max, and ratios are of the medians.
func TestReportMedianOfRuns(t *testing.T) {
	cfg := DefaultSuite(true)
	cfg.Runs, cfg.Clients = 3, []int{64}
	storms := func(secs ...float64) []*StormResult {
		var out []*StormResult
		for _, s := range secs {
			out = append(out, &StormResult{Clients: 64, Connected: 64, Completed: 64, StormSeconds: s, ServerCPU: s})
		}
		return out
	}
	fast, flow := storms(0.3, 0.1, 0.2), storms(2.0, 4.0, 3.0)
	r := &Report{Config: cfg, Results: &Results{Paths: map[string]*PathResults{
		PathFast:     {Path: PathFast, StormRuns: map[int][]*StormResult{64: fast}, Storms: []*StormResult{medianRun(fast, func(s *StormResult) float64 { return s.StormSeconds })}},
		PathDataflow: {Path: PathDataflow, StormRuns: map[int][]*StormResult{64: flow}, Storms: []*StormResult{medianRun(flow, func(s *StormResult) float64 { return s.StormSeconds })}},
	}}}
	md := markdownOf(t, r)
	if got, want := tableRow(t, md, "64"), "| 64 | storm time | 200.0 ms (100.0 ms–300.0 ms) | 3.00 s (2.00 s–4.00 s) | 15.0× | — |"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := r.Results.Paths[PathFast].Storms[0].StormSeconds; got != 0.2 {
		t.Errorf("median run has storm time %v, want 0.2", got)
	}
	if !strings.Contains(md, "median of 3 runs") {
		t.Errorf("report does not say its figures are medians:\n%s", md)
	}
}

// TestReportShapes: (g) shows each path's storm CPU per client and the
// shaped ÷ bare ratio, and per routed run the delivery, latency, CPU per
// written row and the fast path's shape counters per row (none for the
// dataflow path, which has no shapes), and says when the dataflow path
// ran fewer routed subscribers (--dataflow-max-clients).
func TestReportShapes(t *testing.T) {
	storm := func(cpu float64) *StormResult {
		return &StormResult{Clients: 100, Connected: 100, Completed: 100, ServerCPU: cpu}
	}
	live := func(users int, cpu float64, counters map[string]float64) *ShapesLive {
		return &ShapesLive{Users: users, ServerCPU: cpu, Counters: counters, Live: &LiveResult{Written: 1000, Delivered: 1,
			Storm: &StormResult{Latency: Dist{P50: 2, P99: 20}}}}
	}
	counters := map[string]float64{"shardtail_tail_shape_rows_evaluated_total": 1000, "shardtail_tail_shape_rows_routed_total": 1000}
	cfg := DefaultSuite(true)
	cfg.ShapesUsers = 10000
	r := &Report{Config: cfg, Results: &Results{Paths: map[string]*PathResults{
		PathFast: {Path: PathFast, Shapes: &ShapesResult{Bare: storm(0.1), Shaped: storm(0.15),
			Routed: live(10000, 2, counters), RoutedSmall: live(100, 1, counters)}},
		PathDataflow: {Path: PathDataflow, Shapes: &ShapesResult{Bare: storm(2), Shaped: storm(3),
			Routed: live(200, 20, counters)}},
	}}}
	md := markdownOf(t, r)
	for _, want := range []string{
		"| fast | 1.00 ms | 1.50 ms | 1.50 | 0 |",
		"| dataflow | 20.00 ms | 30.00 ms | 1.50 | 0 |",
		"| fast | 10,000 | 1,000 | 100.0% | 2.0 ms | 20.0 ms | 2.00 ms | 1.00 | 1.00 |",
		"| fast | 100 | 1,000 | 100.0% | 2.0 ms | 20.0 ms | 1.00 ms | 1.00 | 1.00 |",
		"| dataflow | 200 | 1,000 | 100.0% | 2.0 ms | 20.0 ms | 20.00 ms | — | — |",
		"The dataflow path ran 200 routed subscribers, not 10,000: each is a pipeline of its own, so it stops where (a)'s storms do " +
			"(`--dataflow-max-clients`).",
	} {
		if !strings.Contains(md, want+"\n") {
			t.Errorf("no line %q in:\n%s", want, md)
		}
	}
}

// TestCapClients: a path runs a size over its cap at the cap, others as
// they are, and a cap of 0 runs every size.
func TestCapClients(t *testing.T) {
	cfg := DefaultSuite(false)
	cfg.DataflowMaxClients, cfg.PostgresMaxClients = 2048, 0
	for _, tc := range []struct {
		path string
		n    int
		want int
	}{
		{PathFast, 10000, 10000},
		{PathDataflow, 10000, 2048},
		{PathDataflow, 100, 100},
		{PathPostgres, 10000, 10000},
	} {
		if got := cfg.capClients(tc.path, tc.n); got != tc.want {
			t.Errorf("capClients(%s, %d) = %d, want %d", tc.path, tc.n, got, tc.want)
		}
	}
}

// TestShapesRoutedRuns: (h)'s routed runs are ShapesUsers then
// ShapesSmallUsers subscribers, the dataflow path's capped at
// --dataflow-max-clients, each stored into its own field.
func TestShapesRoutedRuns(t *testing.T) {
	cfg := DefaultSuite(false)
	for path, want := range map[string][]int{PathFast: {10000, 100}, PathDataflow: {2048, 100}} {
		res := &ShapesResult{}
		runs := res.routedRuns(&cfg, path)
		var got []int
		for i, r := range runs {
			got = append(got, r.users)
			*r.into = &ShapesLive{Users: r.users}
			if i == 0 && res.Routed == nil || i == 1 && res.RoutedSmall == nil {
				t.Errorf("%s: run %d is not stored into its field", path, i)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: routed runs of %v subscribers, want %v", path, got, want)
		}
	}
}
