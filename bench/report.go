package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Report is one `shardtail bench` run: where, what, and what it measured.
// WriteReport renders it as markdown, JSON and PNG plots.
type Report struct {
	Started  time.Time   `json:"started"`
	Seconds  float64     `json:"seconds"`
	Command  string      `json:"command"`
	Machine  Machine     `json:"machine"`
	Versions Versions    `json:"versions"`
	Config   SuiteConfig `json:"config"`
	Results  *Results    `json:"results"`
	Goals    []Goal      `json:"goals"`
}

// Goal is one target of the issue that asked for this benchmark, checked
// against the run.
type Goal struct {
	What     string `json:"what"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	// Met is "yes", "no" or "n/a" (not measured in this run).
	Met string `json:"met"`
}

// Files written by WriteReport.
const (
	ReportMarkdown = "latest.md"
	ReportJSON     = "latest.json"
	PlotP95        = "storm_p95.png"
	PlotCPU        = "storm_cpu.png"
)

// WriteReport writes the markdown report, the JSON and the plots into dir.
func WriteReport(dir string, r *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r.Goals = checkGoals(r)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ReportJSON), append(b, '\n'), 0o644); err != nil {
		return err
	}
	plots := anyStorms(r.Results) && writePlots(dir, r.Results)
	f, err := os.Create(filepath.Join(dir, ReportMarkdown))
	if err != nil {
		return err
	}
	writeMarkdown(f, r, plots)
	return f.Close()
}

// ReadReport reads a report's JSON (latest.json), which must hold
// results.
func ReadReport(file string) (*Report, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if r.Results == nil {
		return nil, fmt.Errorf("%s holds no results", file)
	}
	return &r, nil
}

// writePlots draws the storm plots; a failure costs the plots, not the
// report.
func writePlots(dir string, res *Results) bool {
	err := errors.Join(
		plotStorms(filepath.Join(dir, PlotP95), res, "Statement-to-snapshot p95", "p95 (s)",
			func(s *StormResult) float64 { return s.Snapshot.P95 }),
		plotStorms(filepath.Join(dir, PlotCPU), res, "Server CPU per storm", "server CPU (s)",
			func(s *StormResult) float64 { return s.ServerCPU }))
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: plots: %v\n", err)
		return false
	}
	return true
}

// paths in report order.
var reportPaths = []string{PathFast, PathDataflow, PathPostgres}

// reportView is what the sections of the markdown report read: the
// report and its paths' results (nil for a path that did not run).
type reportView struct {
	r              *Report
	fast, flow, pg *PathResults
	plots          bool
}

// reportSections are the markdown report's sections, in order; a section
// with nothing measured writes nothing.
var reportSections = []func(io.Writer, *reportView){
	writeIntro, writeMachine, writeGoals,
	writeStormSection, writeBigSection, writeLiveSection, writeSlowSection, writeMemorySection, writeFeedSection, writeProxyStormSection, writeBudgetSection, writeShapesSection,
	writeProblems, writeSetupTimes,
}

// writeMarkdown renders r as the markdown report; plots says whether the
// storm plots were drawn (and are linked).
func writeMarkdown(w io.Writer, r *Report, plots bool) {
	paths := r.Results.Paths
	v := &reportView{r: r, fast: paths[PathFast], flow: paths[PathDataflow], pg: paths[PathPostgres], plots: plots}
	for _, section := range reportSections {
		section(w, v)
	}
}

// writeIntro writes the title, the command that ran and how.
func writeIntro(w io.Writer, v *reportView) {
	r, cfg := v.r, v.r.Config
	title := "shardtail benchmark: fast path, dataflow path and PostgreSQL"
	if cfg.Quick {
		title += " (quick run)"
	}
	fmt.Fprintf(w, "# %s\n\n", title)
	fmt.Fprintf(w, "Run %s, %s in all, with:\n\n```sh\n%s\n```\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"), time.Duration(r.Seconds*float64(time.Second)).Round(time.Second), r.Command)
	if cfg.Runs > 1 {
		fmt.Fprintf(w, "Every figure of (a) and (c)–(e) is the median of %d runs, with the runs' min–max after it; (b) is the median of %d reads with "+
			"their min–max. Ratios are of the medians.\n\n", cfg.Runs, cfg.Repeat)
	}
	fmt.Fprintf(w, "Each shardtail path ran on fresh `shardtail serve` processes (temporary data directory: file blobs and SQLite consensus; "+
		"`--subscribe-persist-fast-path=true` or `false`; default 1 s tick) over the same rows; PostgreSQL is a throwaway local cluster "+
		"(fsync off) holding the same rows. Clients, server and PostgreSQL share the machine's cores. "+
		"Ratios are dataflow ÷ fast: above 1 the fast path is better.\n\n")
}

// writeMachine writes the table of the machine and the versions.
func writeMachine(w io.Writer, v *reportView) {
	r, pg := v.r, v.pg
	fmt.Fprintf(w, "| machine | |\n|---|---|\n")
	fmt.Fprintf(w, "| CPUs (nproc) | %d |\n| CPU model | %s |\n| memory | %.1f GiB |\n| kernel | %s (%s) |\n",
		r.Machine.CPUs, r.Machine.CPUModel, r.Machine.MemoryGiB, r.Machine.Kernel, r.Machine.OS)
	fmt.Fprintf(w, "| load average (1, 5, 15 min) at start / end | %s / %s |\n", r.Machine.LoadStart, r.Machine.LoadEnd)
	if r.Machine.FileLimit > 0 {
		fmt.Fprintf(w, "| RLIMIT_NOFILE (the bench, and the servers it starts) | %s |\n", commas(int(r.Machine.FileLimit)))
	}
	if r.Machine.TCPMemPressure > 0 {
		fmt.Fprintf(w, "| TCP memory pressure threshold (net.ipv4.tcp_mem, all sockets of the host) | %s |\n", mib(float64(r.Machine.TCPMemPressure)))
	}
	fmt.Fprintf(w, "| Go | %s |\n| shardtail | %s", r.Versions.Go, r.Versions.Shardtail)
	if r.Versions.Commit != "" {
		fmt.Fprintf(w, " (commit %s)", r.Versions.Commit)
	}
	pgv := "not installed: peer skipped"
	if pg != nil && pg.Version != "" {
		pgv = pg.Version
	}
	fmt.Fprintf(w, " |\n| PostgreSQL | %s |\n\n", pgv)
}

// writeGoals writes the table of the targets, met or not.
func writeGoals(w io.Writer, v *reportView) {
	r := v.r
	if !(len(r.Goals) > 0) {
		return
	}
	fmt.Fprintf(w, "## Goals\n\n| goal | target | measured | met |\n|---|---|---|---|\n")
	for _, g := range r.Goals {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", g.What, g.Target, g.Measured, g.Met)
	}
	fmt.Fprintln(w)
}

// stormMetric is a row of (a)'s table: a figure of one storm.
type stormMetric struct {
	name string
	f    func(*StormResult) float64
	fmt  func(float64) string
	// ratio: the row has a dataflow ÷ fast column.
	ratio bool
}

// The rows of (a) that the README's summary shows too.
var (
	stormTime               = stormMetric{"storm time", func(s *StormResult) float64 { return s.StormSeconds }, secs, true}
	stormServerCPUPerClient = stormMetric{"server CPU per client", (*StormResult).ServerCPUPerClientMS, ms, true}
	stormClientCPUPerClient = stormMetric{"client CPU per client", clientCPUPerClientMS, ms, false}
)

// stormMetrics are (a)'s rows for each N, in order.
var stormMetrics = []stormMetric{
	stormTime,
	{"statement to snapshot p50", func(s *StormResult) float64 { return s.Snapshot.P50 }, secs, true},
	{"statement to snapshot p95", func(s *StormResult) float64 { return s.Snapshot.P95 }, secs, true},
	{"statement to snapshot max", func(s *StormResult) float64 { return s.Snapshot.Max }, secs, true},
	{"statement to last row p95", func(s *StormResult) float64 { return s.LastRow.P95 }, secs, true},
	{"server CPU", func(s *StormResult) float64 { return s.ServerCPU }, cpuSecs, true},
	stormServerCPUPerClient,
	{"client CPU (all clients)", func(s *StormResult) float64 { return s.ClientCPU }, cpuSecs, false},
	stormClientCPUPerClient,
	{"server peak RSS", func(s *StormResult) float64 { return float64(s.ServerPeakRSS) - boolf(s.ServerPeakRSS == 0) }, mib, false},
	{"snapshots complete", func(s *StormResult) float64 { return float64(s.Completed) }, count, false},
	{"errors", func(s *StormResult) float64 { return float64(s.Errors) }, count, false},
}

// writeStormSection writes (a), the reconnect storms.
func writeStormSection(w io.Writer, v *reportView) {
	res, cfg, fast, flow, pg := v.r.Results, v.r.Config, v.fast, v.flow, v.pg
	if !(anyStorms(res)) {
		return
	}
	fmt.Fprintf(w, "## (a) Reconnect storm\n\nN clients connect, then all at once run `%s` on a materialized view of %s rows × %d bytes "+
		"(PostgreSQL: `SELECT * FROM src` from fresh connections). *Statement to snapshot* is from sending the statement to the first progress row "+
		"after the client's AS OF (PostgreSQL: ReadyForQuery); *last row* is to the last snapshot row. *Storm* is the first statement to the last "+
		"snapshot complete. Server CPU is from before the first connect to after the last close.\n\n",
		stormStatement(cfg.StormMode), commas(cfg.SmallRows), cfg.PayloadBytes)
	fmt.Fprintf(w, "| N | metric | fast path | dataflow path | dataflow ÷ fast | PostgreSQL |\n|---:|---|---:|---:|---:|---:|\n")
	for _, n := range cfg.Clients {
		for i, m := range stormMetrics {
			label := ""
			if i == 0 {
				label = commas(n)
			}
			vf, vd, vp := stormSpread(fast, n, m.f), stormSpread(flow, n, m.f), stormSpread(pg, n, m.f)
			ratio := ""
			if m.ratio {
				ratio = ratioText(vd.med, vf.med)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", label, m.name, vf.text(m.fmt), vd.text(m.fmt), ratio, vp.text(m.fmt))
		}
	}
	fmt.Fprintln(w)
	writeAborted(w, res)
	if v.plots {
		fmt.Fprintf(w, "![statement-to-snapshot p95 against N](%s)\n![server CPU against N](%s)\n\n", PlotP95, PlotCPU)
	}
	writeStormErrors(w, res)
	writeStormScaling(w, res, cfg)
	writeHostTCP(w, res, cfg.Clients, v.r.Machine.TCPMemPressure)
	writeConnCost(w, res, cfg.Clients)
	writeStormCounters(w, res, cfg.Clients)
	writePerSubscribeCost(w, res, cfg.Clients)
}

// bigRow is a row of (b)'s table: a figure of one path's reads.
type bigRow struct {
	name string
	key  string // in BigResult.Spread, "" for a figure without one
	f    func(*BigResult) float64
	fmt  func(float64) string
	// ratio: the row has a dataflow ÷ fast column.
	ratio bool
}

// The rows of (b) that the README's summary shows too.
var (
	bigFetch10   = bigRow{"FETCH 10 from a new cursor", "fetch10_seconds", func(b *BigResult) float64 { return b.Fetch10 }, secs, true}
	bigFirstRow  = bigRow{"first row over COPY", "copy_first_row_seconds", func(b *BigResult) float64 { return b.CopyFirstRow }, secs, true}
	bigLastRow   = bigRow{"whole snapshot delivered (last row)", "copy_last_row_seconds", func(b *BigResult) float64 { return b.CopyLastRow }, secs, true}
	bigServerCPU = bigRow{"server CPU per COPY read", "server_cpu_seconds", func(b *BigResult) float64 { return b.ServerCPU }, cpuSecs, true}
)

// bigRows are (b)'s rows, in order.
var bigRows = []bigRow{
	bigFetch10, bigFirstRow, bigLastRow,
	{"snapshot complete (progress row after AS OF)", "copy_complete_seconds", func(b *BigResult) float64 { return b.CopyComplete }, secs, true},
	bigServerCPU,
	{"rows returned by the first FETCH 10", "", func(b *BigResult) float64 { return float64(b.Fetch10Rows) }, count, false},
}

// value is the row's figure on pr (its median read), -1 when pr did not
// run (b).
func (m bigRow) value(pr *PathResults) float64 {
	if pr == nil || pr.Big == nil {
		return -1
	}
	return m.f(pr.Big)
}

// cell is the row's figure on pr with the reads' min–max, or a dash.
func (m bigRow) cell(pr *PathResults) string {
	v := m.value(pr)
	if v < 0 {
		return "—"
	}
	if mm, ok := pr.Big.Spread[m.key]; ok && mm[0] != mm[1] {
		return fmt.Sprintf("%s (%s–%s)", m.fmt(v), m.fmt(mm[0]), m.fmt(mm[1]))
	}
	return m.fmt(v)
}

// writeBigSection writes (b), one client reading a large view.
func writeBigSection(w io.Writer, v *reportView) {
	cfg, fast, flow, pg := v.r.Config, v.fast, v.flow, v.pg
	if !(fast != nil && fast.Big != nil || flow != nil && flow.Big != nil) {
		return
	}
	fmt.Fprintf(w, "## (b) One client, %s rows\n\nA materialized view of %s rows × %d bytes (loaded with COPY FROM STDIN); PostgreSQL reads the table. "+
		"Median of %d runs, each on a new connection (connecting not timed). *FETCH 10*: `BEGIN; DECLARE c CURSOR FOR SUBSCRIBE bigmv; FETCH 10 c` "+
		"(PostgreSQL: `... FOR SELECT * FROM big`) until ten rows are in. COPY: `COPY (SUBSCRIBE bigmv WITH (PROGRESS)) TO STDOUT` (PostgreSQL: `COPY big TO STDOUT`).\n\n",
		commas(cfg.BigRows), commas(cfg.BigRows), cfg.PayloadBytes, cfg.Repeat)
	fmt.Fprintf(w, "| metric | fast path | dataflow path | dataflow ÷ fast | PostgreSQL |\n|---|---:|---:|---:|---:|\n")
	for _, m := range bigRows {
		ratio := ""
		if m.ratio {
			ratio = ratioText(m.value(flow), m.value(fast))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", m.name, m.cell(fast), m.cell(flow), ratio, m.cell(pg))
	}
	fmt.Fprintln(w)
}

// writeSlowSection writes (d), slow-client isolation.
func writeSlowSection(w io.Writer, v *reportView) {
	cfg, fast, flow := v.r.Config, v.fast, v.flow
	if !(fast != nil && fast.Slow != nil || flow != nil && flow.Slow != nil) {
		return
	}
	fmt.Fprintf(w, "## (d) Slow-client isolation\n\n%s subscribers while a writer inserts %d rows/s of %d bytes for %v; in the second run %d of them "+
		"(every %dth) stop reading once their snapshot is complete, with `SET subscribe_max_buffered_bytes = %s` (%s written in the run, "+
		"well over the kernel's buffers), "+
		"so that their backlog passes the budget: the fast path detaches them, the dataflow path ends their subscribe (53200). Once the writer "+
		"is done they read again, and each must receive every row written (no gap, no duplicate) within the client timeout. Latencies are of "+
		"the clients that keep reading; detaches and resumes are the server's counters (/metrics) over the run.\n\n",
		commas(cfg.SlowClients), cfg.SlowRate, cfg.SlowPayloadBytes, cfg.LiveDuration, cfg.SlowStalled, max(1, cfg.SlowClients/max(1, cfg.SlowStalled)),
		kibBytes(cfg.SlowBudgetBytes), mib(float64(cfg.SlowRate)*float64(cfg.SlowPayloadBytes)*cfg.LiveDuration.Seconds()))
	fmt.Fprintf(w, "| metric | fast path | dataflow path |\n|---|---:|---:|\n")
	slow := func(pr *PathResults, stalled bool, f func(*LiveResult) float64, format func(float64) string) string {
		if pr == nil {
			return "—"
		}
		runs := orRuns(pr.SlowBaselineRuns, pr.SlowBaseline)
		if stalled {
			runs = orRuns(pr.SlowRuns, pr.Slow)
		}
		return spreadOf(runs, func(l *LiveResult) float64 {
			if l.Storm == nil {
				return -1
			}
			return f(l)
		}).text(format)
	}
	lat := func(q func(Dist) float64) func(*LiveResult) float64 {
		return func(l *LiveResult) float64 { return q(l.Storm.Latency) }
	}
	p50 := func(d Dist) float64 { return d.P50 }
	p99 := func(d Dist) float64 { return d.P99 }
	delivered := func(l *LiveResult) float64 { return 100 * l.Delivered }
	errs := func(l *LiveResult) float64 { return float64(l.Storm.Errors) }
	counter := func(name string) func(*LiveResult) float64 {
		return func(l *LiveResult) float64 {
			v, ok := l.Counters[name]
			if !ok {
				return -1
			}
			return v
		}
	}
	everyRow := func(l *LiveResult) float64 {
		if l.Storm.Stalled == 0 || l.Storm.StalledComplete == 0 && len(l.Storm.StalledFailures) == 0 {
			return -1 // not checked (a run from before the check)
		}
		return float64(l.Storm.StalledComplete)
	}
	for _, row := range []struct {
		name    string
		stalled bool
		f       func(*LiveResult) float64
		fmt     func(float64) string
	}{
		{"write to client p50, no stalled clients", false, lat(p50), msRaw},
		{fmt.Sprintf("write to client p50, %d stalled", cfg.SlowStalled), true, lat(p50), msRaw},
		{"write to client p99, no stalled clients", false, lat(p99), msRaw},
		{fmt.Sprintf("write to client p99, %d stalled", cfg.SlowStalled), true, lat(p99), msRaw},
		{"rows delivered to readers, no stalled clients", false, delivered, pct},
		{fmt.Sprintf("rows delivered to readers, %d stalled", cfg.SlowStalled), true, delivered, pct},
		{fmt.Sprintf("errors, %d stalled", cfg.SlowStalled), true, errs, count},
		{fmt.Sprintf("stalled clients that, reading again, received every row (of %d)", cfg.SlowStalled), true, everyRow, count},
		{"detaches (/metrics)", true, counter("shardtail_tail_detaches_total"), count},
		{"resumes (/metrics)", true, counter("shardtail_tail_resumes_total"), count},
		{"private catch-ups (/metrics)", true, counter("shardtail_tail_private_catchups_total"), count},
	} {
		fmt.Fprintf(w, "| %s | %s | %s |\n", row.name, slow(fast, row.stalled, row.f, row.fmt), slow(flow, row.stalled, row.f, row.fmt))
	}
	for _, pr := range []*PathResults{fast, flow} {
		if pr == nil || pr.SlowBaseline == nil || pr.Slow == nil {
			continue
		}
		a, b := pr.SlowBaseline.Storm.Latency, pr.Slow.Storm.Latency
		if a.P99 > 0 {
			fmt.Fprintf(w, "| %s path: p99 with ÷ without stalled clients | %.2f× | |\n", pr.Path, b.P99/a.P99)
		}
	}
	fmt.Fprintln(w)
	writeStalledFailures(w, fast, flow)
}

// writeStalledFailures lists why the stalled clients of (d) that did not
// receive every row on reading again did not, by path and run.
func writeStalledFailures(w io.Writer, paths ...*PathResults) {
	var why []string
	for _, pr := range paths {
		if pr == nil {
			continue
		}
		for i, l := range orRuns(pr.SlowRuns, pr.Slow) {
			for _, e := range SortedErrors(l.Storm.StalledFailures) {
				why = append(why, fmt.Sprintf("- %s path, run %d: %s", pr.Path, i+1, e))
			}
		}
	}
	if len(why) > 0 {
		fmt.Fprintf(w, "Stalled clients that did not receive every row on reading again:\n\n%s\n\n", strings.Join(why, "\n"))
	}
}

// writeMemorySection writes (e), memory per idle subscriber.
func writeMemorySection(w io.Writer, v *reportView) {
	cfg, fast, flow := v.r.Config, v.fast, v.flow
	if !(fast != nil && fast.Memory != nil || flow != nil && flow.Memory != nil) {
		return
	}
	fmt.Fprintf(w, "## (e) Memory per idle subscriber\n\n%s clients each hold `COPY (SUBSCRIBE idle WITH (PROGRESS)) TO STDOUT` on a 10-row table, on a fresh server, "+
		"connecting as psql does (`application_name` and `client_encoding` in the startup message); "+
		"server RSS (VmRSS) is read after one warm-up subscribe and again once all are idle and it has settled: every %v after the storm "+
		"until a garbage collection has completed since the storm and two readings in a row agree within 1 MiB or 1%% (at most %v), "+
		"so that what the storm's garbage held until the runtime gave it back is not counted; "+
		"runs before the settling (rss_first_bytes absent) read it once, %v after the storm.\n\n",
		commas(cfg.IdleClients), memorySettle, memorySettleMax, memorySettle)
	for _, pr := range []*PathResults{fast, flow} {
		if pr == nil {
			continue
		}
		for _, m := range orRuns(pr.MemoryRuns, pr.Memory) {
			if m.Storm == nil || m.Storm.Aborted == "" {
				continue
			}
			m.upgradeAborted()
			fmt.Fprintf(w, "**%s path: %s** (the bench's memory guard) while subscribing, with %s of %s snapshots complete: its subscribers "+
				"never got to idle, so it has no idle RSS and no RSS per idle subscriber; its peak RSS during the subscribe storm is shown "+
				"instead, with no ratio.\n\n", pr.Path, m.Storm.Aborted, commas(m.Storm.Completed), commas(m.Storm.Clients))
		}
	}
	fmt.Fprintf(w, "| metric | fast path | dataflow path | dataflow ÷ fast |\n|---|---:|---:|---:|\n")
	for _, row := range []struct {
		name  string
		f     func(*MemoryResult) float64
		fmt   func(float64) string
		ratio bool
		// optional rows are left out when no run has them (the settling
		// of runs before it, an aborted run's peak).
		optional bool
	}{
		{"subscribers with a complete snapshot", func(m *MemoryResult) float64 { return float64(m.Storm.Completed) }, count, false, false},
		{"errors", func(m *MemoryResult) float64 { return float64(m.Storm.Errors) }, count, false, false},
		{"time to subscribe them all (storm)", func(m *MemoryResult) float64 { return m.Storm.StormSeconds }, secs, true, false},
		{"server RSS before", func(m *MemoryResult) float64 { return float64(m.RSSBefore) }, mib, false, false},
		{fmt.Sprintf("server RSS %v after the storm", memorySettle), idleOnly(func(m *MemoryResult) float64 {
			if m.RSSFirst == 0 {
				return -1
			}
			return float64(m.RSSFirst)
		}), mib, true, true},
		{"server RSS with the idle subscribers", idleOnly(func(m *MemoryResult) float64 { return float64(m.RSSIdle) }), mib, true, false},
		{"time for RSS to settle", idleOnly(func(m *MemoryResult) float64 {
			if m.RSSFirst == 0 {
				return -1
			}
			return m.SettleSeconds
		}), secs, false, true},
		{"RSS per idle subscriber", perIdleSubscriberKB, kib, true, false},
		{abortedRow, func(m *MemoryResult) float64 {
			if m.Idle() || m.PeakRSS == 0 {
				return -1
			}
			return float64(m.PeakRSS)
		}, mib, false, true},
		{"server CPU (connect, subscribe, idle, close)", func(m *MemoryResult) float64 { return m.Storm.ServerCPU }, cpuSecs, true, false},
	} {
		vf, vd := fast.memorySpread(row.f), flow.memorySpread(row.f)
		if row.optional && vf.n == 0 && vd.n == 0 {
			continue
		}
		writeTwoPathRow(w, row.name, vf, vd, row.fmt, row.ratio)
	}
	fmt.Fprintln(w)
}

// writeProxyStormSection writes (f), the storm through a tail process,
// when it ran.
func writeProxyStormSection(w io.Writer, v *reportView) {
	res, r := v.r.Results, v.r
	if !(res.Tail != nil) {
		return
	}
	writeProxySection(w, res.Tail, r.Config.StormMode)
}

// writeProblems lists what each path (and (f)) observed going wrong.
func writeProblems(w io.Writer, v *reportView) {
	res := v.r.Results
	var probs []string
	problems := func(who string, list []string) {
		for _, pb := range list {
			probs = append(probs, fmt.Sprintf("- **%s**: %s", who, strings.ReplaceAll(pb, "\n", "\n  ")))
		}
	}
	for _, name := range reportPaths {
		if pr := res.Paths[name]; pr != nil {
			problems(name, pr.Problems)
		}
	}
	if res.Tail != nil {
		problems("(f) tail process", res.Tail.Problems)
	}
	if len(probs) > 0 {
		fmt.Fprintf(w, "## Problems observed\n\n%s\n\n", strings.Join(probs, "\n"))
	}
	var replaced []string
	for _, name := range reportPaths {
		if pr := res.Paths[name]; pr != nil {
			for _, r := range pr.Replaced {
				replaced = append(replaced, fmt.Sprintf("- **%s**: %s", name, r))
			}
		}
	}
	if len(replaced) > 0 {
		fmt.Fprintf(w, "## Servers replaced\n\nA measurement that left its server holding more than half of the memory guard was followed by a new server, so that the next measurement started as the first did (a Go process returns freed memory to the system slowly):\n\n%s\n\n", strings.Join(replaced, "\n"))
	}
}

// writeSetupTimes writes the table of set-up steps' times and the link
// to the raw numbers.
func writeSetupTimes(w io.Writer, v *reportView) {
	res := v.r.Results
	fmt.Fprintf(w, "## Set-up times\n\n| path | step | seconds |\n|---|---|---:|\n")
	loads := func(who string, times map[string]float64) {
		for _, k := range slices.Sorted(maps.Keys(times)) {
			fmt.Fprintf(w, "| %s | %s | %.2f |\n", who, k, times[k])
		}
	}
	for _, name := range reportPaths {
		if pr := res.Paths[name]; pr != nil {
			loads(name, pr.Load)
		}
	}
	if res.Tail != nil {
		loads("(f) through the tail", res.Tail.Load)
	}
	fmt.Fprintf(w, "\nThe raw numbers are in [%s](%s).\n", ReportJSON, ReportJSON)
}

// perIdleSubscriberKB is (e)'s headline: server RSS per idle subscriber
// in KiB, of a run whose subscribers got to idle.
var perIdleSubscriberKB = idleOnly(func(m *MemoryResult) float64 { return m.PerClientKB })

// memorySpread is f over p's runs of (e) (none for a nil p).
func (p *PathResults) memorySpread(f func(*MemoryResult) float64) spread {
	if p == nil {
		return spreadOf[MemoryResult](nil, f)
	}
	return spreadOf(orRuns(p.MemoryRuns, p.Memory), f)
}

// abortedRow is (e)'s row for runs cut short by the memory guard, shown
// only when one was.
const abortedRow = "server peak RSS during the subscribe storm (aborted run)"

// idleOnly is f for a memory result whose subscribers got to idle, and
// "not measured" for an aborted one (the ratio then has nothing to divide).
func idleOnly(f func(*MemoryResult) float64) func(*MemoryResult) float64 {
	return func(m *MemoryResult) float64 {
		if !m.Idle() {
			return -1
		}
		return f(m)
	}
}

// upgradeAborted moves an aborted run's peak, which reports before PeakRSS
// (rendered again from their JSON) kept in RSSIdle, to PeakRSS.
func (m *MemoryResult) upgradeAborted() {
	if m.PeakRSS == 0 {
		m.PeakRSS = max(m.RSSIdle, m.Storm.ServerPeakRSS)
	}
	m.RSSIdle, m.PerClientKB = 0, -1
}

// orRuns returns runs, or the one result of a report from before runs
// (nil for none).
func orRuns[T any](runs []*T, one *T) []*T {
	if len(runs) > 0 || one == nil {
		return runs
	}
	return []*T{one}
}

func (p *PathResults) liveRuns() []*LiveResult {
	if p == nil {
		return nil
	}
	return orRuns(p.LiveRuns, p.Live)
}

// liveRunsAt returns p's live runs of size ls (nil for a nil p).
func (p *PathResults) liveRunsAt(ls LiveSize) []*LiveResult {
	var out []*LiveResult
	for _, l := range p.liveRuns() {
		if l.Storm != nil && l.Storm.Clients == ls.Clients && l.Rate == ls.Rate {
			out = append(out, l)
		}
	}
	return out
}

func writeLiveTable(w io.Writer, fast, flow []*LiveResult) {
	fmt.Fprintf(w, "| metric | fast path | dataflow path | dataflow ÷ fast |\n|---|---:|---:|---:|\n")
	for _, row := range liveTableRows {
		writeTwoPathRow(w, row.name, row.spread(fast), row.spread(flow), row.fmt, row.ratio)
	}
	fmt.Fprintln(w)
}

// writeTwoPathRow writes a row of a fast path / dataflow path table, with
// the ratio of the medians when ratio is set.
func writeTwoPathRow(w io.Writer, name string, fast, flow spread, format func(float64) string, ratio bool) {
	r := ""
	if ratio {
		r = ratioText(flow.med, fast.med)
	}
	fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, fast.text(format), flow.text(format), r)
}

func writeStormErrors(w io.Writer, res *Results) {
	var lines []string
	for _, name := range reportPaths {
		pr := res.Paths[name]
		if pr == nil {
			continue
		}
		for _, s := range pr.Storms {
			for _, e := range SortedErrors(s.ErrorSamples) {
				lines = append(lines, fmt.Sprintf("- %s, N=%d: %s", name, s.Clients, e))
			}
		}
	}
	if len(lines) > 0 {
		fmt.Fprintf(w, "Storm errors:\n\n%s\n\n", strings.Join(lines, "\n"))
	}
}

// writeAborted explains storms cut short by the memory guard: their times
// are of the clients that finished before it, so ratios are lower bounds.
func writeAborted(w io.Writer, res *Results) {
	for _, name := range reportPaths {
		pr := res.Paths[name]
		if pr == nil {
			continue
		}
		for _, s := range pr.Storms {
			if s.Aborted != "" {
				fmt.Fprintf(w, "**%s path, N=%s: %s** (the bench's memory guard) after %s of the %s snapshots were complete; its times are "+
					"those of the clients that finished before, so its ratios are lower bounds, and its errors are the clients cut off.\n\n",
					name, commas(s.Clients), s.Aborted, commas(s.Completed), commas(s.Clients))
			}
		}
	}
}

// writeStormCounters shows how much work each storm cost the server, by
// its own counters.
func writeStormCounters(w io.Writer, res *Results, ns []int) {
	var rows []string
	for _, name := range []string{PathFast, PathDataflow} {
		pr := res.Paths[name]
		if pr == nil {
			continue
		}
		for _, n := range ns {
			c := pr.StormCounters[n]
			if c == nil {
				continue
			}
			rows = append(rows, fmt.Sprintf("| %s | %s |%s", name, commas(n), counterCells(c, StormCounterNames)))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "Server counters, increase during each storm (from its /metrics):\n\n| path | N |%s\n", counterHeaders("", StormCounterNames))
	fmt.Fprintf(w, "|---|---:|%s\n%s\n\n", strings.Repeat("---:|", len(StormCounterNames)), strings.Join(rows, "\n"))
	writeStatementLogCost(w, res, ns)
}

// writeStatementLogCost says, from the storm counters at the largest N,
// what logging the storm's statements cost each path: the log batches its
// records into an append (one consensus write) about once a second, so a
// storm adds a few consensus writes however many statements it ran.
func writeStatementLogCost(w io.Writer, res *Results, ns []int) {
	var parts []string
	for _, name := range []string{PathFast, PathDataflow} {
		pr := res.Paths[name]
		if pr == nil {
			continue
		}
		for _, n := range slices.Backward(slices.Sorted(slices.Values(ns))) {
			c := pr.StormCounters[n]
			appends, ok := c["shardtail_statement_log_appends_total"]
			if !ok {
				continue
			}
			recs := "its statements"
			if r, ok := c["shardtail_statement_log_records_total"]; ok {
				recs = count(r) + " statements"
			}
			parts = append(parts, fmt.Sprintf("the %s path's storm of %s subscribes logged %s in %s appends to the log shard, of %s consensus "+
				"writes (CAS attempts) by the whole server", name, commas(n), recs, count(appends), count(c["shardtail_persist_cas_attempts_total"])))
			break
		}
	}
	if len(parts) == 0 {
		return
	}
	fmt.Fprintf(w, "Statement log (`mz_internal.mz_statement_execution_history`, statement_logging_sample_rate 1, the default, so every statement is logged): %s. The log appends its "+
		"buffered records about once a second, off the statement path, one consensus write per append; the counters are read once the "+
		"storm's sessions have closed and the log has appended their records.\n\n", strings.Join(parts, "; "))
}

// writePerSubscribeCost explains, from the storm counters, what one
// subscribe cost each path at the largest N: the dataflow path registers a
// reader per subscribe (a CAS on the shard state that every subscriber
// shares, and another to expire it) and fetches and decodes the snapshot's
// parts itself; the fast path shares one reader and one decode.
func writePerSubscribeCost(w io.Writer, res *Results, ns []int) {
	per := func(name string) (n int, c map[string]float64, subs float64) {
		pr := res.Paths[name]
		if pr == nil {
			return 0, nil, 0
		}
		for _, n := range slices.Backward(slices.Sorted(slices.Values(ns))) {
			if c := pr.StormCounters[n]; c != nil && c["shardtail_subscribes_total"] > 0 {
				return n, c, c["shardtail_subscribes_total"]
			}
		}
		return 0, nil, 0
	}
	nd, cd, subsD := per(PathDataflow)
	if cd == nil {
		return
	}
	each := func(c map[string]float64, k string, subs float64) string {
		return fmt.Sprintf("%.2f", c[k]/subs)
	}
	fmt.Fprintf(w, "Why a dataflow subscribe costs more (its counters at N=%s, per subscribe): each registers its own persist reader, a "+
		"compare-and-set on the shard's state that all of them share (%s CAS attempts per subscribe, %s of them lost to a concurrent "+
		"change and retried; closing expires the reader with another), and reads and decodes the snapshot's parts itself "+
		"(%s part fetches per subscribe).",
		commas(nd), each(cd, "shardtail_persist_cas_attempts_total", subsD), each(cd, "shardtail_persist_cas_conflicts_total", subsD),
		each(cd, "shardtail_persist_parts_fetched_total", subsD))
	if nf, cf, subsF := per(PathFast); cf != nil {
		fmt.Fprintf(w, " The fast path at N=%s shares one reader and one decode per collection: %s CAS attempts and %s part fetches per subscribe.",
			commas(nf), each(cf, "shardtail_persist_cas_attempts_total", subsF), each(cf, "shardtail_persist_parts_fetched_total", subsF))
	}
	fmt.Fprint(w, "\n\n")
}

// counterName is a metric's name in a table header.
func counterName(k string) string {
	return strings.TrimPrefix(strings.TrimSuffix(k, "_total"), "shardtail_")
}

// counterHeaders are the header cells of counter columns, each name after
// prefix.
func counterHeaders(prefix string, names []string) string {
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, " %s%s |", prefix, counterName(k))
	}
	return b.String()
}

// counterCells are the table cells of the named counters in c: bytes in
// MiB, a dash for a counter not scraped.
func counterCells(c map[string]float64, names []string) string {
	var b strings.Builder
	for _, k := range names {
		v, ok := c[k]
		switch {
		case !ok:
			b.WriteString(" — |")
		case strings.HasSuffix(k, "_bytes_total"):
			b.WriteString(" " + mib(v) + " |")
		default:
			b.WriteString(" " + count(v) + " |")
		}
	}
	return b.String()
}

func anyStorms(res *Results) bool {
	for _, pr := range res.Paths {
		if len(pr.Storms) > 0 {
			return true
		}
	}
	return false
}

func stormStatement(m Mode) string {
	switch m {
	case ModeFetch:
		return "BEGIN; DECLARE c CURSOR FOR SUBSCRIBE mv WITH (PROGRESS); FETCH ALL c"
	case ModeBare:
		return "SUBSCRIBE mv WITH (PROGRESS)"
	}
	return "COPY (SUBSCRIBE mv WITH (PROGRESS)) TO STDOUT"
}

// stormOf returns pr's storm at n clients, or nil.
func stormOf(pr *PathResults, n int) *StormResult {
	if pr == nil {
		return nil
	}
	for _, s := range pr.Storms {
		if s.Clients == n {
			return s
		}
	}
	return nil
}

// stormRuns returns pr's runs at n clients: StormRuns, or the one storm of
// a report from before it.
func stormRuns(pr *PathResults, n int) []*StormResult {
	if pr == nil {
		return nil
	}
	if runs := pr.StormRuns[n]; len(runs) > 0 {
		return runs
	}
	if s := stormOf(pr, n); s != nil {
		return []*StormResult{s}
	}
	return nil
}

// stormSpread is f over pr's runs at n clients, skipping runs that
// measured nothing.
func stormSpread(pr *PathResults, n int, f func(*StormResult) float64) spread {
	return spreadOf(stormRuns(pr, n), func(s *StormResult) float64 {
		if s.Completed == 0 && s.Errors == 0 {
			return -1
		}
		return f(s)
	})
}

// fmtOr formats v, or a dash when it was not measured (negative).
func fmtOr(f func(float64) string, v float64) string {
	if v < 0 {
		return "—"
	}
	return f(v)
}

func ratioText(slow, fast float64) string {
	if slow <= 0 || fast <= 0 {
		return ""
	}
	return fmt.Sprintf("%.1f×", slow/fast)
}

// boolf is 1 for true: subtracting it turns an unmeasured 0 into -1.
func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func cpuSecs(v float64) string { return fmt.Sprintf("%.2f s", v) }
func ms(v float64) string      { return fmt.Sprintf("%.2f ms", v) }
func msRaw(v float64) string   { return fmt.Sprintf("%.1f ms", v) }
func count(v float64) string   { return commas(int(v + 0.5)) }
func pct(v float64) string     { return fmt.Sprintf("%.1f%%", v) }
func mib(v float64) string     { return fmt.Sprintf("%.0f MiB", v/(1<<20)) }
func kib(v float64) string     { return fmt.Sprintf("%.1f KiB", v) }

// kibBytes formats a byte count in KiB.
func kibBytes(n int) string { return fmt.Sprintf("%d KiB", n>>10) }

// commas formats n with thousands separators.
func commas(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + commas(-n)
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// headlineN is the N of (a) that the goals and the README's summary
// quote: the largest that the dataflow path ran too (its ratios need
// both), or the smallest N (0 for none).
func headlineN(cfg SuiteConfig) int {
	if len(cfg.Clients) == 0 {
		return 0
	}
	n := slices.Min(cfg.Clients)
	for _, c := range cfg.Clients {
		if cfg.onPath(PathDataflow, c) {
			n = max(n, c)
		}
	}
	return n
}

// checkGoals compares the run with the targets of the issues that asked
// for this benchmark: the storm's at the run's largest storm that the
// dataflow path ran too (its ratios need both), issue 19's scale.
func checkGoals(r *Report) []Goal {
	res := r.Results
	fast, flow := res.Paths[PathFast], res.Paths[PathDataflow]
	n := headlineN(r.Config)
	sf, sd := stormOf(fast, n), stormOf(flow, n)
	var goals []Goal
	add := func(what, target string, measured float64, format func(float64) string, ok func(float64) bool) {
		g := Goal{What: what, Target: target, Met: "n/a", Measured: "not measured"}
		if measured >= 0 {
			g.Measured = format(measured)
			g.Met = "no"
			if ok(measured) {
				g.Met = "yes"
			}
		}
		goals = append(goals, g)
	}
	at := fmt.Sprintf(" (N=%s)", commas(n))
	clean := func(s *StormResult) bool { return s != nil && s.Errors == 0 && s.Completed == s.Clients }
	v := func(s *StormResult, f func(*StormResult) float64) float64 {
		if !clean(s) {
			return -1
		}
		return f(s)
	}
	add("fast-path storm time"+at, "< 2.5 s", v(sf, func(s *StormResult) float64 { return s.StormSeconds }), secs, func(x float64) bool { return x < 2.5 })
	add("fast-path server CPU per client"+at, "< 1 ms", v(sf, func(s *StormResult) float64 { return s.ServerCPUPerClientMS() }), ms, func(x float64) bool { return x < 1 })
	ratio := func(f func(*StormResult) float64) float64 {
		if !clean(sf) || sd == nil || sd.Completed == 0 || f(sf) <= 0 {
			return -1
		}
		return f(sd) / f(sf)
	}
	times := func(x float64) string {
		s := fmt.Sprintf("%.1f×", x)
		switch {
		case sd != nil && sd.Aborted != "":
			s = "≥ " + s + fmt.Sprintf(" (the dataflow storm was aborted at the memory guard after %s of %s snapshots)", commas(sd.Completed), commas(sd.Clients))
		case sd != nil && sd.Errors > 0:
			s += fmt.Sprintf(" (%d dataflow clients failed and are not in its p95)", sd.Errors)
		}
		return s
	}
	add("statement-to-snapshot p95, dataflow ÷ fast"+at, "≥ 10×", ratio(func(s *StormResult) float64 { return s.Snapshot.P95 }), times, func(x float64) bool { return x >= 10 })
	add("storm server CPU, dataflow ÷ fast"+at, "≥ 4×", func() float64 {
		if !clean(sf) || sd == nil || sd.ServerCPU < 0 || sf.ServerCPU <= 0 {
			return -1
		}
		return sd.ServerCPU / sf.ServerCPU
	}(), func(x float64) string { return fmt.Sprintf("%.1f×", x) }, func(x float64) bool { return x >= 4 })
	big := func(f func(*BigResult) float64) float64 {
		if fast == nil || fast.Big == nil {
			return -1
		}
		return f(fast.Big)
	}
	rows := commas(r.Config.BigRows)
	add("fast path, "+rows+" rows: FETCH 10 from a new cursor", "< 10 ms", big(func(b *BigResult) float64 { return b.Fetch10 }), secs, func(x float64) bool { return x < 0.010 })
	add("fast path, "+rows+" rows: first row over COPY", "< 10 ms", big(func(b *BigResult) float64 { return b.CopyFirstRow }), secs, func(x float64) bool { return x < 0.010 })
	add("fast path, "+rows+" rows: whole snapshot delivered (last row)", "< 0.5 s", big(func(b *BigResult) float64 { return b.CopyLastRow }), secs, func(x float64) bool { return x < 0.5 })
	add("fast path, "+rows+" rows: snapshot complete (progress row)", "< 0.5 s", big(func(b *BigResult) float64 { return b.CopyComplete }), secs, func(x float64) bool { return x < 0.5 })
	memv := -1.0
	if fast != nil && fast.Memory != nil && fast.Memory.Idle() {
		memv = fast.Memory.PerClientKB
	}
	add(fmt.Sprintf("fast path, RSS per idle subscriber (%s)", commas(r.Config.IdleClients)), "≤ 16 KiB", memv, kib, func(x float64) bool { return x <= 16 })
	feedGoals(r, add)
	scaleGoals(r, add)
	return goals
}
