package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/shardtail/shardtail/bench"
)

const stormUsage = `Usage: shardtail storm [flags]

Opens --clients connections, then (a start barrier) has every client
subscribe at once and read until its snapshot is complete: the first
progress row after its AS OF. Reports statement-to-snapshot p50/p95/max, the
storm time (first statement to last snapshot), errors, and the server's and
this process's CPU seconds.

Example:
  shardtail storm --url postgres://materialize@127.0.0.1:6875/materialize \
      --clients 2048 --relation mv --mode copy --fast-path on \
      --metrics http://127.0.0.1:6876/metrics

Flags:
`

func (m *Main) storm(ctx context.Context, args []string) error {
	var (
		cfg      bench.StormConfig
		mode     string
		asJSON   bool
		fileLim  uint64
		fastPath string
	)
	fs := flag.NewFlagSet("storm", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() { fmt.Fprint(m.Stderr, stormUsage); fs.PrintDefaults() }
	fs.StringVar(&cfg.URL, "url", "postgres://materialize@127.0.0.1:6875/materialize?sslmode=disable", "server connection URL")
	fs.IntVar(&cfg.Clients, "clients", 256, "number of clients")
	fs.StringVar(&mode, "mode", "copy", "copy: COPY (SUBSCRIBE ...) TO STDOUT; fetch: DECLARE/FETCH ALL; bare: SUBSCRIBE; select: SELECT * (for a PostgreSQL peer)")
	fs.StringVar(&cfg.Relation, "relation", "mv", "collection to subscribe to")
	fs.StringVar(&fastPath, "fast-path", "default", "on, off or default: SET enable_subscribe_persist_fast_path on each connection first")
	fs.DurationVar(&cfg.Spread, "spread", 0, "stagger the statements evenly over this duration (0: all at once)")
	fs.DurationVar(&cfg.Stay, "stay", 0, "after every snapshot is complete, keep reading live updates this long")
	fs.DurationVar(&cfg.Timeout, "timeout", bench.DefaultStormTimeout, "per client: connect, and statement to snapshot complete")
	fs.IntVar(&cfg.ExpectRows, "expect-rows", 0, "snapshot rows each client must get (0: do not check)")
	fs.IntVar(&cfg.LatencyColumn, "latency-column", 0, "0-based column starting with the write's Unix nanoseconds: report live write-to-client latency")
	fs.IntVar(&cfg.Stalled, "stalled", 0, "clients that stop reading once their snapshot is complete")
	fs.IntVar(&cfg.ConnectConcurrency, "connect-concurrency", bench.DefaultConnectConcurrency, "dials in flight before the barrier")
	fs.IntVar(&cfg.Server.PID, "server-pid", 0, "server pid: read its CPU from /proc/<pid>/stat")
	fs.StringVar(&cfg.Server.MetricsURL, "metrics", "", "server /metrics URL: read process_cpu_seconds_total (when --server-pid is not given)")
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	fs.Uint64Var(&fileLim, "nofile", 1<<20, "raise RLIMIT_NOFILE to this (as far as allowed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("storm: unexpected argument %q", fs.Arg(0))
	}
	var err error
	if cfg.Mode, err = bench.ParseMode(mode); err != nil {
		return err
	}
	cfg.FastPath = fastPath
	if lim, err := bench.RaiseFileLimit(fileLim); err != nil {
		return err
	} else if lim < uint64(cfg.Clients)+64 {
		fmt.Fprintf(m.Stderr, "storm: warning: RLIMIT_NOFILE is %d, below --clients %d\n", lim, cfg.Clients)
	}
	st := bench.NewStatus(m.Stderr)
	cfg.Status = st
	start := time.Now()
	res, err := bench.Storm(ctx, cfg)
	st.Close()
	if res == nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		if e := enc.Encode(res); e != nil {
			return e
		}
	} else {
		bench.WriteStormTable(m.Stdout, res)
		fmt.Fprintf(m.Stdout, "(%.1fs in all)\n", time.Since(start).Seconds())
	}
	return err
}
