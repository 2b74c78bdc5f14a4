package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardtail/shardtail/bench"
)

const benchUsage = `Usage: shardtail bench [flags]

Runs the A/B benchmark suite end to end. For each SUBSCRIBE path (fast,
dataflow) it starts fresh "shardtail serve" child processes on temporary data
directories and loopback ports, loads the same rows, and runs:
  (a) storms of N clients subscribing at once to a 10,000-row view
  (b) one client on a 1,000,000-row view: FETCH 10, first row and whole COPY
  (c) live fan-out under a steady writer: every row to every subscriber,
      latency, deliveries/s, CPU and write syscalls per delivery
  (d) slow-client isolation: 10% of the clients stop reading
  (e) server memory per idle subscriber (10,000 subscribers)
  (h) shapes: 2,048 clients on 64 filters of the view next to the bare
      storm; 10,000 subscribers each of its own user_id (and 100) under a
      writer of 1,000 rows/s
and, when PostgreSQL is installed, the same storms (SELECT *) and the same
large read (COPY ... TO STDOUT) on a throwaway PostgreSQL. Then
  (f) the storms of (a) through a tail process ("serve --upstream"), next to
      its upstream (role all) serving them directly, both on shared storage
      (S3 over loopback HTTP and a throwaway PostgreSQL consensus)
and, on each path,
  (i) the HTTP change feed: 2,048 SSE clients resuming at once with
      Last-Event-ID after 1,000 changes, and 2,048 taking the snapshot,
      each next to the same storm over pgwire; 10,000 idle SSE streams
It writes latest.md, latest.json and PNG plots into --out, and with --readme
the README's performance table (between its bench:begin and bench:end
marker lines) from the same report. Ctrl-C stops it cleanly.

Example:
  shardtail bench                 # the full run (several minutes), into bench/results
  shardtail bench --quick         # a small smoke run, into a temporary directory
  shardtail bench --scenarios f --tail-clients 2048 --merge bench/results/latest.json
                                  # (f) alone, added to the committed report
  shardtail bench --render bench/results/latest.json --readme README.md
                                  # the report and the README's table again from the
                                  # JSON, running nothing

Flags:
`

func (m *Main) bench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() { fmt.Fprint(m.Stderr, benchUsage); fs.PrintDefaults() }
	quick := fs.Bool("quick", false, "a small run (N=64, 100,000 rows) for smoke checks")
	out := fs.String("out", "", "directory for the report (default bench/results; with --quick a temporary directory)")
	serverBin := fs.String("server-bin", "", "shardtail binary to run as the server (default: this one)")
	scenarios := fs.String("scenarios", "", "scenarios to run: letters a-i, or comma-separated letters and names (budget: g, shapes: h, feed: i) (default all)")
	clients := fs.String("clients", "", "storm sizes for (a), comma-separated (default 256,1024,2048,4096,10000; quick 64)")
	dataflowMax := fs.Int("dataflow-max-clients", -1, fmt.Sprintf("largest N of (a) and (c) run on the dataflow path, and the most subscribers of (h) and (i) there; 0: all (default %d; quick all)", bench.DefaultDataflowMaxClients))
	postgresMax := fs.Int("postgres-max-clients", -1, fmt.Sprintf("largest N of (a) run on PostgreSQL; 0: all (default %d; quick all)", bench.DefaultPostgresMaxClients))
	live := fs.String("live", "", "sizes of (c): comma-separated CLIENTSxRATE (subscribers x rows/s) (default 10000x100,1000x1000; quick 32x50)")
	liveDuration := fs.Duration("live-duration", 0, "how long (c)'s writer writes (default 30s; quick 3s)")
	tailClients := fs.String("tail-clients", "", "storm sizes for (f), comma-separated (default 256,1024,2048; quick 64)")
	tailDataflow := fs.Int("tail-dataflow-clients", -1, "size of (f)'s dataflow-path storms; 0: none (default 256; quick 32)")
	tailStorage := fs.String("tail-storage", bench.StorageS3, "what (f)'s processes share: s3 (S3 over HTTP + PostgreSQL consensus) or file (a blob directory + one SQLite file)")
	merge := fs.String("merge", "", "put this run's (f) into the report of this latest.json, keeping its other sections, and write it there (or to --out); needs --scenarios f")
	mode := fs.String("mode", "copy", "how storm clients subscribe: copy, fetch or bare")
	noPostgres := fs.Bool("no-postgres", false, "skip the PostgreSQL peer")
	timeout := fs.Duration("timeout", 0, "per-client timeout (default 3m; quick 1m)")
	feedClients := fs.Int("feed-clients", 0, "size of (i)'s storms (default 2,048; quick 64)")
	feedIdle := fs.Int("feed-idle-clients", 0, "idle SSE streams of (i) (default 10,000; quick 200)")
	idle := fs.Int("idle-clients", 0, "idle subscribers for (e) (default 10,000; quick 200)")
	shapesClients := fs.Int("shapes-clients", 0, "storm size of (h) (default 2,048; quick 64)")
	shapesUsers := fs.Int("shapes-users", 0, "routed subscribers of (h)'s large live run (default 10,000; quick 200)")
	bigRows := fs.Int("big-rows", 0, "rows of the large view for (b) (default 1,000,000; quick 100,000)")
	runs := fs.Int("runs", 0, fmt.Sprintf("runs of each measurement; the report shows the median and min–max (default %d; quick %d)", bench.DefaultRuns, bench.DefaultQuickRuns))
	budgetReaders := fs.Int("budget-readers", 0, "reading subscribers of (g) (default 1,000; quick 64)")
	budgetStalled := fs.Int("budget-stalled", -1, "stalled subscribers of (g) (default 500; quick 32)")
	budgetCollections := fs.Int("budget-collections", 0, "tables (g) spreads its subscribers and writes over (default 8)")
	var budgetWrite, budgetBytes sizeFlag
	fs.Var(&budgetWrite, "budget-write", "bytes (g) writes, e.g. 2GB or 256MiB (default 2GB; quick 64MiB)")
	fs.Var(&budgetBytes, "budget", "(g)'s server's --memory-budget (default 256MiB; quick 32MiB)")
	budgetRetain := fs.String("budget-retain-history", "", "RETAIN HISTORY of (g)'s tables, e.g. '1 hour', so that detached stalled subscribers resume from the shard (default: the server's, 1 s)")
	render := fs.String("render", "", "run nothing: re-render the report (markdown, plots) from this latest.json into its directory (or --out)")
	readme := fs.String("readme", "", "once the report is written (a run or --render), rewrite the generated block of this README, between its <!-- bench:begin ... --> and <!-- bench:end --> lines, with the report's summary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected argument %q", fs.Arg(0))
	}
	if *readme != "" {
		if *quick && *out == "" {
			// Its report goes to a temporary directory, which the README
			// would link to.
			return errors.New("bench: --readme with --quick needs --out: a quick run's report is temporary")
		}
		if err := bench.CheckReadme(*readme); err != nil {
			return fmt.Errorf("bench: --readme: %w", err)
		}
	}
	if *render != "" {
		return m.renderReport(*render, *out, *readme)
	}
	var into *bench.Report
	if *merge != "" {
		if *scenarios != bench.ScenarioTail {
			return errors.New("bench: --merge needs --scenarios f")
		}
		var err error
		if into, err = readReport(*merge); err != nil {
			return err
		}
	}
	cfg := bench.DefaultSuite(*quick)
	var err error
	if cfg.Scenarios, err = bench.ParseScenarios(*scenarios); err != nil {
		return err
	}
	cfg.Postgres = !*noPostgres
	if *budgetReaders > 0 {
		cfg.BudgetReaders = *budgetReaders
	}
	if *budgetStalled >= 0 {
		cfg.BudgetStalled = *budgetStalled
	}
	if *budgetCollections > 0 {
		cfg.BudgetCollections = *budgetCollections
	}
	if budgetWrite > 0 {
		cfg.BudgetWriteBytes = int64(budgetWrite)
	}
	if budgetBytes > 0 {
		cfg.BudgetBytes = int64(budgetBytes)
	}
	cfg.BudgetRetainHistory = *budgetRetain
	if cfg.StormMode, err = bench.ParseMode(*mode); err != nil {
		return err
	}
	if *clients != "" {
		if cfg.Clients, err = parseInts(*clients); err != nil {
			return fmt.Errorf("bench: --clients: %w", err)
		}
	}
	if *dataflowMax >= 0 {
		cfg.DataflowMaxClients = *dataflowMax
	}
	if *postgresMax >= 0 {
		cfg.PostgresMaxClients = *postgresMax
	}
	if *live != "" {
		if cfg.LiveSizes, err = bench.ParseLiveSizes(*live); err != nil {
			return fmt.Errorf("bench: --live: %w", err)
		}
	}
	if *liveDuration > 0 {
		cfg.FanoutDuration = *liveDuration
	}
	if *tailClients != "" {
		if cfg.TailClients, err = parseInts(*tailClients); err != nil {
			return fmt.Errorf("bench: --tail-clients: %w", err)
		}
	}
	if *tailDataflow >= 0 {
		cfg.TailDataflowClients = *tailDataflow
	}
	cfg.TailStorage = *tailStorage
	if *timeout > 0 {
		cfg.Timeout = *timeout
	}
	if *idle > 0 {
		cfg.IdleClients = *idle
	}
	if *feedClients > 0 {
		cfg.FeedClients = *feedClients
	}
	if *feedIdle > 0 {
		cfg.FeedIdleClients = *feedIdle
	}
	if *bigRows > 0 {
		cfg.BigRows = *bigRows
	}
	if *shapesClients > 0 {
		cfg.ShapesClients = *shapesClients
	}
	if *shapesUsers > 0 {
		cfg.ShapesUsers = *shapesUsers
	}
	if *runs > 0 {
		cfg.Runs, cfg.Repeat = *runs, *runs
	}
	cfg.ServerBin = *serverBin
	if cfg.ServerBin == "" {
		if cfg.ServerBin, err = os.Executable(); err != nil {
			return fmt.Errorf("bench: find this binary: %w", err)
		}
	}
	dir := *out
	switch {
	case dir != "":
	case *merge != "":
		dir = filepath.Dir(*merge)
	case *quick:
		dir = filepath.Join(os.TempDir(), "shardtail-bench-quick")
	default:
		dir = filepath.Join("bench", "results")
	}
	// The clients of the largest scenario, and the servers (children
	// inherit the limit), need a descriptor each.
	fileLimit, err := bench.RaiseFileLimit(1 << 20)
	if err != nil {
		return err
	}

	st := bench.NewStatus(m.Stderr)
	cfg.Status = st
	rep := &bench.Report{
		Started:  time.Now(),
		Command:  commandLine(),
		Machine:  bench.DescribeMachine(),
		Versions: bench.DescribeVersions(ctx, Version),
	}
	rep.Machine.FileLimit = fileLimit
	res, err := bench.Run(ctx, cfg)
	st.Close()
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(m.Stderr, "bench: interrupted; servers stopped, temporary directories removed, no report written")
		return err
	}
	if res == nil {
		return err
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	rep.Machine.LoadEnd = bench.LoadAverage()
	rep.Config, rep.Results = cfg, res
	if p := res.Paths[bench.PathPostgres]; p != nil {
		rep.Versions.Postgres = p.Version
	}
	if into != nil {
		if merr := bench.MergeTail(into, rep); merr != nil {
			return fmt.Errorf("bench: %w", merr)
		}
		rep = into
	}
	if werr := bench.WriteReport(dir, rep); werr != nil {
		return fmt.Errorf("bench: write report: %w", werr)
	}
	fmt.Fprintf(m.Stdout, "report: %s\n", filepath.Join(dir, bench.ReportMarkdown))
	if *readme != "" {
		if err != nil {
			// The report shows what failed; the README's summary is
			// for runs that did not.
			fmt.Fprintf(m.Stderr, "bench: %s not updated: the run failed\n", *readme)
			return err
		}
		return m.writeReadme(*readme, rep, dir)
	}
	return err
}

// writeReadme rewrites readme's generated block with rep's summary, its
// report in dir.
func (m *Main) writeReadme(readme string, rep *bench.Report, dir string) error {
	if err := bench.WriteReadme(readme, rep, dir); err != nil {
		return fmt.Errorf("bench: --readme: %w", err)
	}
	fmt.Fprintf(m.Stdout, "readme: %s\n", readme)
	return nil
}

// readReport reads a report's JSON.
func readReport(file string) (*bench.Report, error) {
	rep, err := bench.ReadReport(file)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return rep, nil
}

// parseInts parses a comma-separated list of integers.
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// renderReport rewrites a report from its JSON, and readme's generated
// block ("" for none) from it.
func (m *Main) renderReport(file, dir, readme string) error {
	rep, err := readReport(file)
	if err != nil {
		return err
	}
	if dir == "" {
		dir = filepath.Dir(file)
	}
	if err := bench.WriteReport(dir, rep); err != nil {
		return fmt.Errorf("bench: write report: %w", err)
	}
	fmt.Fprintf(m.Stdout, "report: %s\n", filepath.Join(dir, bench.ReportMarkdown))
	if readme != "" {
		return m.writeReadme(readme, rep, dir)
	}
	return nil
}

// commandLine is how this process was invoked, for the report.
func commandLine() string {
	args := slices.Clone(os.Args)
	for i, a := range args {
		if strings.ContainsAny(a, " '\"$") {
			args[i] = strconv.Quote(a)
		}
	}
	return strings.Join(args, " ")
}
