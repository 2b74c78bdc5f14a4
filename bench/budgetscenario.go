package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// ScenarioBudget is the memory-budget scenario (g): stalled and reading
// fast-path subscribers over several collections while far more than the
// budget is written, on a server started with --memory-budget; then the
// same without the stalled subscribers, for the readers' latency.
const ScenarioBudget = "g"

// scenarioNames are the scenarios that also go by a name in --scenarios.
var scenarioNames = map[string]string{"budget": ScenarioBudget, "shapes": ScenarioShapes, "feed": ScenarioFeed}

// BudgetCounterNames are the server counters (g) records: what the
// budget's policy did, and what it cost the stalled subscribers.
var BudgetCounterNames = []string{
	"shardtail_tail_budget_window_shrinks_total",
	"shardtail_tail_budget_detaches_total",
	"shardtail_tail_stall_detaches_total",
	"shardtail_tail_resumes_total",
	"shardtail_tail_private_catchups_total",
	"shardtail_tail_catchups_total",
	"shardtail_tail_catchup_chunks_total",
	"shardtail_tail_catchup_evictions_total",
	"shardtail_tail_history_loss_errors_total",
}

// BudgetScenario is (g): the run with stalled subscribers and the baseline
// without them, each on a fresh server with the same budget.
type BudgetScenario struct {
	BudgetBytes int64 `json:"budget_bytes"`
	Collections int   `json:"collections"`
	Readers     int   `json:"readers"`
	Stalled     int   `json:"stalled"`
	WriteBytes  int64 `json:"write_bytes"`
	// RetainHistory is the tables' RETAIN HISTORY, "" for the server's
	// default.
	RetainHistory string `json:"retain_history,omitempty"`
	// With has the stalled subscribers, Baseline not; each with the
	// server's counters' increase over it.
	With             *BudgetResult      `json:"with_stalled,omitempty"`
	WithCounters     map[string]float64 `json:"with_stalled_counters,omitempty"`
	Baseline         *BudgetResult      `json:"baseline,omitempty"`
	BaselineCounters map[string]float64 `json:"baseline_counters,omitempty"`
	Problems         []string           `json:"problems,omitempty"`
}

func (b *BudgetScenario) problem(format string, args ...any) {
	b.Problems = append(b.Problems, fmt.Sprintf(format, args...))
}

// runBudgetScenario runs (g): with the stalled subscribers, then the
// baseline, each on a fresh fast-path server with --memory-budget.
func runBudgetScenario(ctx context.Context, cfg *SuiteConfig) *BudgetScenario {
	bs := &BudgetScenario{BudgetBytes: cfg.BudgetBytes, Collections: cfg.BudgetCollections, Readers: cfg.BudgetReaders,
		Stalled: cfg.BudgetStalled, WriteBytes: cfg.BudgetWriteBytes, RetainHistory: cfg.BudgetRetainHistory}
	for _, stalled := range []int{cfg.BudgetStalled, 0} {
		label := fmt.Sprintf("(g) budget %s, %d readers + %d stalled", mib(float64(cfg.BudgetBytes)), cfg.BudgetReaders, stalled)
		r, counters, err := runBudgetOnce(ctx, cfg, stalled, label)
		if err != nil {
			if ctx.Err() != nil {
				return bs
			}
			bs.problem("%s: %v", label, err)
			cfg.Status.Logf("%s: %v", label, err)
		}
		if stalled > 0 {
			bs.With, bs.WithCounters = r, counters
		} else {
			bs.Baseline, bs.BaselineCounters = r, counters
		}
	}
	return bs
}

// runBudgetOnce runs one budget storm on a server of its own.
func runBudgetOnce(ctx context.Context, cfg *SuiteConfig, stalled int, label string) (*BudgetResult, map[string]float64, error) {
	cfg.Status.Set(label+": starting server", nil)
	srv, err := StartServer(ctx, cfg.ServerBin, ServerOptions{FastPath: true, MemoryBudget: cfg.BudgetBytes})
	if err != nil {
		return nil, nil, err
	}
	defer srv.Stop()
	delta := counterDeltaOf(ctx, srv.MetricsURL, BudgetCounterNames)
	r, err := BudgetStorm(ctx, BudgetConfig{
		URL: srv.URL, Collections: cfg.BudgetCollections, Readers: cfg.BudgetReaders, Stalled: stalled,
		WriteBytes: cfg.BudgetWriteBytes, RetainHistory: cfg.BudgetRetainHistory, Timeout: cfg.Timeout,
		Server: srv.CPU(), MaxServerRSS: cfg.MaxServerRSS, Status: cfg.Status, Label: label,
	})
	counters := delta()
	if dead, exitErr := srv.Exited(); dead {
		err = fmt.Errorf("server (pid %d) exited: %s; last log lines:\n%s", srv.PID, exitText(exitErr, srv), srv.LogTail(10))
	}
	return r, counters, err
}

// The full size of (g) and its targets.
const (
	budgetFullReaders, budgetFullStalled, budgetFullCollections = 1000, 500, 8
	budgetFullWriteBytes                                        = 2e9
	budgetFullBytes                                             = 256 << 20
	// budgetRSSHeadroom is how far over the budget peak RSS may go.
	budgetRSSHeadroom = 150 << 20
	// budgetP99Ratio is how much slower the readers' p99 may be with
	// stalled clients than without.
	budgetP99Ratio = 1.2
)

// full reports whether (g) ran at the size.
func (b *BudgetScenario) full() bool {
	return b.Readers >= budgetFullReaders && b.Stalled >= budgetFullStalled && b.Collections >= budgetFullCollections &&
		b.WriteBytes >= budgetFullWriteBytes && b.BudgetBytes <= budgetFullBytes
}

// fullButWrites reports whether (g) ran at the size except for
// writing less (--budget-write): a run that fits a shorter quiet window.
func (b *BudgetScenario) fullButWrites() bool {
	return !b.full() && b.Readers >= budgetFullReaders && b.Stalled >= budgetFullStalled && b.Collections >= budgetFullCollections &&
		b.BudgetBytes <= budgetFullBytes
}

// peakWithinHeadroom reports whether the server's peak RSS with the
// stalled subscribers stayed within budgetRSSHeadroom of the budget.
func (b *BudgetScenario) peakWithinHeadroom() bool {
	return b.With != nil && b.With.Storm != nil && b.With.Storm.ServerPeakRSS <= b.BudgetBytes+budgetRSSHeadroom
}

// p99Ratio is the readers' write-to-client p99 with the stalled
// subscribers over the baseline's (-1: not measured).
func (b *BudgetScenario) p99Ratio() float64 {
	with, base := b.With, b.Baseline
	if with == nil || with.Storm == nil || base == nil || base.Storm == nil || base.Storm.Latency.P99 <= 0 {
		return -1
	}
	return with.Storm.Latency.P99 / base.Storm.Latency.P99
}

// historyLost counts the stalled clients that got the history-loss error
// on reading again, and the others that did not get every row.
func historyLost(s *StormResult) (lost, other int) {
	for msg, n := range s.StalledFailures {
		if strings.Contains(msg, "53200") && strings.Contains(msg, "fell behind") {
			lost += n
		} else {
			other += n
		}
	}
	return lost, other
}

// writeBudgetSection renders (g).
func writeBudgetSection(w io.Writer, v *reportView) {
	b := v.r.Results.Budget
	if b == nil {
		return
	}
	fmt.Fprintf(w, "## (g) One memory budget\n\n")
	if b.fullButWrites() {
		fmt.Fprintf(w, "**Full size but for the bytes written** (%s of the issue's %s): the subscribers, tables and budget are the issue's, "+
			"so peak RSS and the p99 ratio measure the same steady state over a shorter run, and every stalled subscriber reads back a smaller backlog.\n\n",
			mib(float64(b.WriteBytes)), gb(budgetFullWriteBytes))
	} else if !b.full() {
		fmt.Fprintf(w, "**Scaled down** from the issue's %s readers + %s stalled over %d collections, %s written, budget %s: "+
			"these figures show that the scenario works, not what the full size measures.\n\n",
			commas(budgetFullReaders), commas(budgetFullStalled), budgetFullCollections, gb(budgetFullWriteBytes), mib(budgetFullBytes))
	}
	fmt.Fprintf(w, "A fast-path server started with `--memory-budget %s`; %s reading and %s stalled subscribers (`COPY (SUBSCRIBE t WITH (PROGRESS)) TO STDOUT`) "+
		"spread over %d tables while %s are written to them (INSERTs of %d rows of %s, each payload starting with its write's wall clock; one writer per "+
		"table). The stalled subscribers stop reading once their snapshot is complete, with a %s socket receive buffer so that the server, not the "+
		"kernel, holds their backlog; once the writes are done every subscriber reads until it has every row of its table, and a stalled one must "+
		"get each once and in order (or, only if the shard compacted past it, the history-loss error). The baseline is the same run without the "+
		"stalled subscribers, on a fresh server. Peak RSS is the server's, sampled from /proc every 100 ms; the counters are the server's over each run.\n\n",
		mib(float64(b.BudgetBytes)), commas(b.Readers), commas(b.Stalled), b.Collections, mib(float64(b.WriteBytes)),
		defaultBudgetRowsPerInsert, kibBytes(defaultBudgetRowBytes), kibBytes(defaultStalledRecvBuffer))
	retain := "the server's default RETAIN HISTORY (1 s): a stalled subscriber detached for longer gets the history-loss error"
	if b.RetainHistory != "" {
		retain = fmt.Sprintf("`RETAIN HISTORY FOR '%s'`: a detached stalled subscriber resumes from the shard", b.RetainHistory)
	}
	fmt.Fprintf(w, "The tables keep %s.\n\n", retain)
	fmt.Fprintf(w, "| run | readers | stalled | written | peak RSS | peak RSS − budget | readers' p50 | readers' p99 | readers' rows | "+
		"stalled: every row | stalled: history lost | stalled: other failures | budget detaches | stall detaches | catch-ups | errors |\n"+
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range []struct {
		name     string
		r        *BudgetResult
		counters map[string]float64
	}{{"with stalled", b.With, b.WithCounters}, {"baseline", b.Baseline, b.BaselineCounters}} {
		if run.r == nil || run.r.Storm == nil {
			fmt.Fprintf(w, "| %s | — | — | — | — | — | — | — | — | — | — | — | — | — | — |\n", run.name)
			continue
		}
		s := run.r.Storm
		stalledDone, lost, other := "—", "—", "—"
		if s.Stalled > 0 {
			l, o := historyLost(s)
			stalledDone, lost, other = fmt.Sprintf("%s of %s", commas(s.StalledComplete), commas(s.Stalled)), commas(l), commas(o)
		}
		counter := func(name string) string {
			if c, ok := run.counters[name]; ok {
				return count(c)
			}
			return "—"
		}
		readers := s.Clients - s.Stalled
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s of %s | %s | %s | %s | %s | %s | %s | %s |\n",
			run.name, commas(readers), commas(s.Stalled), mib(float64(run.r.WrittenBytes)), mib(float64(s.ServerPeakRSS)),
			mib(float64(s.ServerPeakRSS-b.BudgetBytes)), ms(s.Latency.P50), ms(s.Latency.P99),
			commas(int(s.LiveRows)), commas(int(run.r.RowsPerCollection)*readers), stalledDone, lost, other,
			counter("shardtail_tail_budget_detaches_total"), counter("shardtail_tail_stall_detaches_total"),
			counter("shardtail_tail_private_catchups_total"), commas(s.Errors))
	}
	fmt.Fprintln(w)
	for _, run := range []struct {
		name string
		r    *BudgetResult
	}{{"with stalled", b.With}, {"baseline", b.Baseline}} {
		if run.r != nil && run.r.WriteSeconds > 0 {
			fmt.Fprintf(w, "- Writes (%s): %s in %.0f s, %.2f MiB/s.\n", run.name, mib(float64(run.r.WrittenBytes)), run.r.WriteSeconds,
				float64(run.r.WrittenBytes)/run.r.WriteSeconds/(1<<20))
		}
	}
	if with, base := b.With, b.Baseline; with != nil && with.Storm != nil {
		fmt.Fprintf(w, "- Peak RSS at most the budget + %s: %s (%s).\n", mib(budgetRSSHeadroom),
			yesNo(b.peakWithinHeadroom()), mib(float64(with.Storm.ServerPeakRSS)))
		if ratio := b.p99Ratio(); ratio >= 0 {
			fmt.Fprintf(w, "- Readers' write-to-client p99 within %.0f %% of the baseline's: %s (%s vs %s, %.2f×).\n", 100*(budgetP99Ratio-1),
				yesNo(ratio <= budgetP99Ratio), ms(with.Storm.Latency.P99), ms(base.Storm.Latency.P99), ratio)
		}
		if with.Storm.Stalled > 0 {
			lost, other := historyLost(with.Storm)
			fmt.Fprintf(w, "- Every stalled subscriber got every row, or the history-loss error: %s (%s every row, %s history lost, %s otherwise).\n",
				yesNo(with.Storm.StalledComplete+lost == with.Storm.Stalled && other == 0), commas(with.Storm.StalledComplete), commas(lost), commas(other))
		}
		fmt.Fprintln(w)
	}
	for _, p := range b.Problems {
		fmt.Fprintf(w, "- Problem: %s\n", strings.ReplaceAll(p, "\n", " "))
	}
	if len(b.Problems) > 0 {
		fmt.Fprintln(w)
	}
}

// gb formats bytes in decimal gigabytes, as the issue states sizes.
func gb(v float64) string { return fmt.Sprintf("%.0f GB", v/1e9) }

// yesNo is "yes" or "no".
func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}
