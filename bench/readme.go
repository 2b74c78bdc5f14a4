package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The README's performance table is a summary of one report, written
// between two marker lines of the README by the same rows, spreads and
// formats that render the report (latest.md), so that the README quotes
// the report's figures and cannot drift from them:
//
//	<!-- bench:begin ... -->
//	(generated: replaced by each rewrite)
//	<!-- bench:end -->
//
// The begin line may say more after its prefix (where the block comes
// from); it is kept as it is, and so is every byte outside the block.

// Marker lines of the README's generated block: a line that starts with
// ReadmeBegin and ends with "-->", and a line that is ReadmeEnd (each
// with surrounding white space ignored).
const (
	ReadmeBegin = "<!-- bench:begin"
	ReadmeEnd   = "<!-- bench:end -->"
)

// WriteReadme rewrites the generated block of the file readme with the
// summary of r, whose full report is (or will be) written into reportDir;
// the block links to it relative to the README. Nothing is written when
// the markers are wrong.
func WriteReadme(readme string, r *Report, reportDir string) error {
	doc, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	link, err := relativeLink(readme, filepath.Join(reportDir, ReportMarkdown))
	if err != nil {
		return err
	}
	var block bytes.Buffer
	writeSummary(&block, r, link)
	out, err := replaceBlock(doc, block.Bytes())
	if err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	return writeFileAtomic(readme, out)
}

// CheckReadme returns ErrReadmeMarkers unless the file readme has the
// marker lines of a generated block, so that a run that will rewrite it
// can fail before it runs, not after.
func CheckReadme(readme string) error {
	doc, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	if _, err := replaceBlock(doc, nil); err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	return nil
}

// relativeLink is target as a markdown link from the directory of from.
func relativeLink(from, target string) (string, error) {
	dir, err := filepath.Abs(filepath.Dir(from))
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}

// writeFileAtomic replaces file with b, keeping its mode: a reader (or a
// failed write, or a crash) never sees half a README. A symbolic link is
// followed: the file it names is replaced, and the link stays.
func writeFileAtomic(file string, b []byte) error {
	file, err := filepath.EvalSymlinks(file)
	if err != nil {
		return err
	}
	st, err := os.Stat(file)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: nothing to remove
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// replaceBlock returns doc with what lies between its begin marker line
// and its end marker line replaced by block (a blank line on either side
// of it); the marker lines and everything outside them are kept byte for
// byte.
func replaceBlock(doc, block []byte) ([]byte, error) {
	var begins, ends []int // offsets: just after a begin line, at an end line
	for off := 0; off < len(doc); {
		line, _, _ := bytes.Cut(doc[off:], []byte("\n"))
		next := off + len(line) + 1
		t := string(bytes.TrimSpace(line))
		switch {
		case strings.HasPrefix(t, ReadmeBegin) && strings.HasSuffix(t, "-->"):
			begins = append(begins, min(next, len(doc)))
		case t == ReadmeEnd:
			ends = append(ends, off)
		}
		off = next
	}
	switch {
	case len(begins) == 0:
		return nil, fmt.Errorf("%w: no begin marker line (%s ... -->)", ErrReadmeMarkers, ReadmeBegin)
	case len(ends) == 0:
		return nil, fmt.Errorf("%w: no end marker line (%s)", ErrReadmeMarkers, ReadmeEnd)
	case len(begins) > 1:
		return nil, fmt.Errorf("%w: %d begin marker lines, want one", ErrReadmeMarkers, len(begins))
	case len(ends) > 1:
		return nil, fmt.Errorf("%w: %d end marker lines, want one", ErrReadmeMarkers, len(ends))
	case ends[0] < begins[0]:
		return nil, fmt.Errorf("%w: the end marker line comes before the begin marker line", ErrReadmeMarkers)
	}
	begin, end := begins[0], ends[0]
	return slices.Concat(doc[:begin], []byte("\n"), block, []byte("\n"), doc[end:]), nil
}

// summaryTable writes the rows of the README's table: a group label (the
// scenario and its size) on the first row of each group.
type summaryTable struct {
	w     io.Writer
	label string
}

// group starts a group of rows.
func (t *summaryTable) group(label string) { t.label = label }

// row writes one figure: its cells on the fast path, the dataflow path
// and PostgreSQL ("" where a path does not run the scenario).
func (t *summaryTable) row(name, fast, flow, pg string) {
	fmt.Fprintf(t.w, "| %s | %s | %s | %s | %s |\n", t.label, name, fast, flow, pg)
	t.label = ""
}

// summaryScenario is a scenario of the summary: write writes its rows and
// reports whether the report holds it.
type summaryScenario struct {
	letter string
	write  func(*summaryTable, *reportView) bool
	// once: the scenario runs once, not --runs times.
	once bool
}

// summaryScenarios are the summary's scenarios, in report order.
var summaryScenarios = []summaryScenario{
	{ScenarioStorm, summaryStorm, false},
	{ScenarioBig, summaryBig, false},
	{ScenarioLive, summaryLive, false},
	{ScenarioMemory, summaryMemory, false},
	{ScenarioTail, summaryTail, true},
	{ScenarioBudget, summaryBudget, true},
	{ScenarioShapes, summaryShapes, true},
	{ScenarioFeed, summaryFeed, false},
}

// writeSummary writes the README's summary of r: the run, a table of each
// scenario's headline figures (each the median of the runs with their
// min–max, as the report shows it), the scenarios it lacks, and link, the
// full report.
func writeSummary(w io.Writer, r *Report, link string) {
	paths := r.Results.Paths
	v := &reportView{r: r, fast: paths[PathFast], flow: paths[PathDataflow], pg: paths[PathPostgres]}
	var table bytes.Buffer
	t := &summaryTable{w: &table}
	var missing, once []string
	for _, s := range summaryScenarios {
		switch {
		case !s.write(t, v):
			missing = append(missing, "("+s.letter+")")
		case s.once:
			once = append(once, "("+s.letter+")")
		}
	}

	cfg := r.Config
	of := "shardtail " + r.Versions.Shardtail
	if r.Versions.Commit != "" {
		of = "commit " + r.Versions.Commit
	}
	fmt.Fprintf(w, "Generated by `shardtail bench --readme` from the report of `%s` (%s, %s, %d CPUs): ",
		r.Command, of, r.Started.UTC().Format("2006-01-02"), r.Machine.CPUs)
	// (b) repeats its read cfg.Repeat times in each run.
	reads := !slices.Contains(missing, "("+ScenarioBig+")") && cfg.Repeat > 1
	if cfg.Runs > 1 {
		fmt.Fprintf(w, "each figure is the median of %d runs with their min–max", cfg.Runs)
		if reads {
			fmt.Fprintf(w, " ((b): of %d reads)", cfg.Repeat)
		}
		if len(once) > 0 {
			fmt.Fprintf(w, ", but %s ran once", joinAnd(once))
		}
		fmt.Fprintf(w, "; ratios are of the medians.")
	} else {
		fmt.Fprintf(w, "each figure is of one run")
		if reads {
			fmt.Fprintf(w, " ((b): the median of %d reads with their min–max)", cfg.Repeat)
		}
		fmt.Fprintf(w, ".")
	}
	fmt.Fprintf(w, " The full report, with every N, percentiles, counters and the goals: [%s](%s).\n\n", link, link)
	if table.Len() > 0 {
		fmt.Fprintf(w, "| scenario | figure | fast path | dataflow path | PostgreSQL |\n|---|---|---:|---:|---:|\n")
		w.Write(table.Bytes())
	}
	if len(missing) > 0 {
		fmt.Fprintf(w, "\nNot in this run: %s.\n", joinAnd(missing))
	}
}

// summaryStorm: (a) at the headline N, and server CPU per client over N.
func summaryStorm(t *summaryTable, v *reportView) bool {
	res, cfg := v.r.Results, v.r.Config
	if !anyStorms(res) {
		return false
	}
	n := headlineN(cfg)
	t.group(fmt.Sprintf("(a) storm of %s clients", commas(n)))
	for _, m := range []stormMetric{stormTime, stormServerCPUPerClient, stormClientCPUPerClient} {
		cell := func(pr *PathResults) string { return stormSpread(pr, n, m.f).text(m.fmt) }
		t.row(m.name, cell(v.fast), cell(v.flow), cell(v.pg))
	}
	ns := cfg.Clients
	if len(ns) < 2 {
		return true
	}
	// Each path over the Ns it ran: the least and the most of the
	// medians, and max ÷ min (flat: no O(N) term per subscribe).
	type overN struct{ least, most, ratio string }
	over := func(pr *PathResults) overN {
		each, ratio := perClientOverN(pr, ns, stormServerCPUPerClient.f)
		lo, hi := -1, -1
		for i, sp := range each {
			if sp.n == 0 || sp.med <= 0 {
				continue
			}
			if lo < 0 || sp.med < each[lo].med {
				lo = i
			}
			if hi < 0 || sp.med > each[hi].med {
				hi = i
			}
		}
		if lo < 0 {
			return overN{"—", "—", "—"}
		}
		at := func(i int) string { return fmt.Sprintf("%s at N=%s", each[i].text(ms), commas(ns[i])) }
		return overN{at(lo), at(hi), fmtOr(decimal, ratio)}
	}
	f, d, p := over(v.fast), over(v.flow), over(v.pg)
	t.group(fmt.Sprintf("(a) N = %s … %s", commas(slices.Min(ns)), commas(slices.Max(ns))))
	t.row("server CPU per client, min over N (of the medians)", f.least, d.least, p.least)
	t.row("server CPU per client, max over N (of the medians)", f.most, d.most, p.most)
	t.row(fmt.Sprintf("max ÷ min (flat: ≤ %.2f)", flatWithin), f.ratio, d.ratio, p.ratio)
	return true
}

// summaryBig: (b), one client on the large view.
func summaryBig(t *summaryTable, v *reportView) bool {
	if !(v.fast != nil && v.fast.Big != nil || v.flow != nil && v.flow.Big != nil) {
		return false
	}
	t.group(fmt.Sprintf("(b) one client, %s rows", commas(v.r.Config.BigRows)))
	for _, m := range []bigRow{bigFetch10, bigFirstRow, bigLastRow, bigServerCPU} {
		t.row(m.name, m.cell(v.fast), m.cell(v.flow), m.cell(v.pg))
	}
	return true
}

// summaryLive: (c) at each of its sizes.
func summaryLive(t *summaryTable, v *reportView) bool {
	ran := false
	for _, ls := range v.r.Config.liveSizes() {
		f, d := v.fast.liveRunsAt(ls), v.flow.liveRunsAt(ls)
		if len(f) == 0 && len(d) == 0 {
			continue
		}
		ran = true
		t.group(fmt.Sprintf("(c) %s subscribers, %s rows/s", commas(ls.Clients), commas(ls.Rate)))
		for _, row := range []liveRow{liveRowP50, liveRowP99, liveRowDeliveriesPerSecond, liveRowServerCPUPerDelivery, liveRowWritesPerDelivery} {
			t.row(row.name, row.spread(f).text(row.fmt), row.spread(d).text(row.fmt), "")
		}
	}
	return ran
}

// summaryMemory: (e), RSS per idle subscriber.
func summaryMemory(t *summaryTable, v *reportView) bool {
	if !(v.fast != nil && v.fast.Memory != nil || v.flow != nil && v.flow.Memory != nil) {
		return false
	}
	t.group(fmt.Sprintf("(e) %s idle subscribers", commas(v.r.Config.IdleClients)))
	t.row("server RSS per idle subscriber", v.fast.memorySpread(perIdleSubscriberKB).text(kib), v.flow.memorySpread(perIdleSubscriberKB).text(kib), "")
	return true
}

// summaryTail: (f), the headline storm (or (f)'s largest) through a tail
// process and against role all directly.
func summaryTail(t *summaryTable, v *reportView) bool {
	tr := v.r.Results.Tail
	if tr == nil || len(tr.Storms) == 0 {
		return false
	}
	n := headlineN(v.r.Config)
	if !slices.ContainsFunc(tr.Storms, func(ts *TailStorm) bool { return ts.Storm.Clients == n }) {
		n = slices.MaxFunc(tr.Storms, func(a, b *TailStorm) int { return a.Storm.Clients - b.Storm.Clients }).Storm.Clients
	}
	storm := func(path, via string) *TailStorm {
		for _, ts := range tr.Storms {
			if ts.Path == path && ts.Via == via && ts.Storm.Clients == n {
				return ts
			}
		}
		return nil
	}
	cell := func(path, via string, f func(*TailStorm) float64, format func(float64) string) string {
		ts := storm(path, via)
		if ts == nil {
			return "—"
		}
		return fmtOr(format, f(ts))
	}
	stormTime := func(ts *TailStorm) float64 { return ts.Storm.StormSeconds }
	tailCPU := func(ts *TailStorm) float64 { return ts.PerClientMS(ts.TailCPU) }
	label := fmt.Sprintf("(f) storm of %s clients, tail process", commas(n))
	if tr.Run != nil && tr.Run.Commit != "" {
		label += fmt.Sprintf(" (a run of its own, commit %s)", tr.Run.Commit)
	}
	t.group(label)
	t.row("storm time through the tail process", cell(PathFast, TargetTail, stormTime, secs), cell(PathDataflow, TargetTail, stormTime, secs), "")
	t.row("storm time against role all directly", cell(PathFast, TargetAll, stormTime, secs), cell(PathDataflow, TargetAll, stormTime, secs), "")
	t.row("tail process CPU per client", cell(PathFast, TargetTail, tailCPU, ms), cell(PathDataflow, TargetTail, tailCPU, ms), "")
	return true
}

// summaryBudget: (g), peak RSS against the budget and the readers' p99
// with the stalled subscribers against without.
func summaryBudget(t *summaryTable, v *reportView) bool {
	b := v.r.Results.Budget
	if b == nil {
		return false
	}
	t.group(fmt.Sprintf("(g) budget %s, %s readers + %s stalled", mib(float64(b.BudgetBytes)), commas(b.Readers), commas(b.Stalled)))
	peak := "—"
	if b.With != nil && b.With.Storm != nil {
		peak = fmt.Sprintf("%s (%s)", mib(float64(b.With.Storm.ServerPeakRSS)), yesNo(b.peakWithinHeadroom()))
	}
	t.row(fmt.Sprintf("server peak RSS (≤ budget + %s)", mib(budgetRSSHeadroom)), peak, "", "")
	ratio := "—"
	if x := b.p99Ratio(); x >= 0 {
		ratio = fmt.Sprintf("%s (%s)", timesText(x), yesNo(x <= budgetP99Ratio))
	}
	t.row(fmt.Sprintf("readers' p99 with ÷ without stalled (≤ %s)", timesText(budgetP99Ratio)), ratio, "", "")
	return true
}

// summaryShapes: (h)'s routed runs, each subscriber on its own user_id.
func summaryShapes(t *summaryTable, v *reportView) bool {
	cfg := v.r.Config
	shapes := func(pr *PathResults) *ShapesResult {
		if pr == nil {
			return nil
		}
		return pr.Shapes
	}
	f, d := shapes(v.fast), shapes(v.flow)
	if f == nil && d == nil {
		return false
	}
	t.group(fmt.Sprintf("(h) each subscriber its own `user_id`, %s rows/s", commas(cfg.ShapesRate)))
	for _, size := range []struct {
		users int
		live  func(*ShapesResult) *ShapesLive
	}{
		{cfg.ShapesUsers, func(s *ShapesResult) *ShapesLive { return s.Routed }},
		{cfg.ShapesSmallUsers, func(s *ShapesResult) *ShapesLive { return s.RoutedSmall }},
	} {
		// cell is f of the path's run, with its size when the path ran
		// fewer (--dataflow-max-clients).
		cell := func(s *ShapesResult, f func(*ShapesLive) float64, format func(float64) string) string {
			if s == nil || size.live(s) == nil || size.live(s).Live == nil {
				return "—"
			}
			l := size.live(s)
			text := fmtOr(format, f(l))
			if l.Users != size.users {
				text += fmt.Sprintf(" (%s subscribers)", commas(l.Users))
			}
			return text
		}
		p99 := func(l *ShapesLive) float64 { return l.Live.Storm.Latency.P99 }
		at := commas(size.users) + " subscribers"
		t.row("write to client p99, "+at, cell(f, p99, msRaw), cell(d, p99, msRaw), "")
		t.row("server CPU per written row, "+at, cell(f, (*ShapesLive).CPUPerRowMS, ms), cell(d, (*ShapesLive).CPUPerRowMS, ms), "")
	}
	return true
}

// summaryFeed: (i), SSE ÷ pgwire server CPU per client of each storm.
func summaryFeed(t *summaryTable, v *reportView) bool {
	feed := func(pr *PathResults) *FeedResult {
		if pr == nil {
			return nil
		}
		return pr.Feed
	}
	f, d := feed(v.fast), feed(v.flow)
	if f == nil && d == nil {
		return false
	}
	has := func(fr *FeedResult, name string) bool { return fr != nil && len(fr.runs(name)) > 0 }
	// Reports from before compression have no identity storms: their SSE
	// clients asked for none.
	compressed := has(f, FeedStorms[2]) || has(d, FeedStorms[2])
	t.group(fmt.Sprintf("(i) %s SSE clients, SSE ÷ pgwire server CPU per client", commas(v.r.Config.FeedClients)))
	for _, name := range FeedStorms {
		kind, client, _ := strings.Cut(name, "/")
		if client == "pgwire" || !has(f, name) && !has(d, name) {
			continue
		}
		what := kind
		switch {
		case "/"+client == sseIdentity:
			what += ", no compression"
		case compressed:
			what += ", gzip"
		}
		cell := func(fr *FeedResult) string {
			if fr == nil {
				return "—"
			}
			return fr.ratioSpread(name).text(timesText)
		}
		t.row(what, cell(f), cell(d), "")
	}
	return true
}

// joinAnd joins xs as a list in prose: "a", "a and b", "a, b and c".
func joinAnd(xs []string) string {
	if len(xs) <= 1 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}
