// Package bench measures shardtail's two SUBSCRIBE paths against each other
// and against PostgreSQL: the storm load generator behind `shardtail storm`,
// the scenario suite behind `shardtail bench`, and the report (markdown,
// JSON and PNG plots) that the suite writes.
//
// # The storm
//
// Storm opens N connections with pgconn, then (a start barrier) has every
// client send its statement at once and read until its snapshot is complete:
// the first progress row whose mz_timestamp is above the client's AS OF (the
// first row of a subscribe is a progress row at AS OF; the snapshot rows,
// stamped AS OF, follow). Clients hijack their connection and read raw
// CopyData or DataRow messages with pgproto3's Frontend, which reuses its
// message structs, and parse only mz_timestamp and mz_progressed (and, for
// live latency, one payload column), so that a client costs the server's
// bytes and little else: the clients share the machine with the server.
//
//	res, err := bench.Storm(ctx, bench.StormConfig{
//		URL: url, Clients: 2048, Mode: bench.ModeCopy, Relation: "mv",
//		Server: bench.CPUProbe{PID: pid},
//	})
//	// res.Snapshot.P95, res.StormSeconds, res.Errors, res.ServerCPU ...
//
// A failed client (an error, a wrong row count, its Timeout) is counted and
// the storm goes on; Storm returns an error only when it cannot run at all.
// After the snapshots, Live (or Stay) keeps the clients reading: a writer
// whose rows carry their write time yields write-to-client latencies, and
// Stalled clients stop reading to test slow-client isolation.
//
// # The suite
//
// Run starts, for each path, fresh `shardtail serve` children (Server) on
// temporary data directories and free loopback ports, with
// --subscribe-persist-fast-path on or off, loads the same deterministic rows
// (COPY FROM STDIN, then a materialized view it waits for), and runs the
// scenarios a-e. A server that dies is noted in the report and replaced
// for the next scenario. When PostgreSQL's binaries are installed,
// Postgres starts a throwaway cluster with the same rows for the peer
// columns. Scenario f, below, comes last.
// Everything takes a context: cancelling it (Ctrl-C) closes the clients,
// stops the children and removes their directories.
//
// # The tail process (f)
//
// Scenario f runs the storms of (a) through a tail process. SharedStorage
// starts what the processes share: by default an S3 server over loopback
// HTTP (gofakes3, in memory, in this process) and a throwaway PostgreSQL
// as consensus, the production shape; or one blob directory and one SQLite
// file. On it run a role-all Server and a tail process in front of it
// (ServerOptions.Upstream). The tables and the view are created and loaded
// through the tail's proxy port, and each storm size runs against role all
// directly, then against the tail, reading every process's CPU over each
// storm (cpuSince; PostgreSQL's with its live backends, ProcTreeCPU) and
// their counters: the fast path should cost role all nothing. The
// dataflow-path storms SET enable_subscribe_persist_fast_path off, which
// the tail applies to the client's upstream session too, so it proxies
// the SUBSCRIBE and role all runs the dataflow.
//
//	shardtail bench --scenarios f --merge bench/results/latest.json
//
// measures (f) alone and merges it into an existing report (MergeTail),
// whose other sections keep their numbers; the section then names the
// run it came from.
//
// # The memory budget (g)
//
// Scenario g (--scenarios g or budget; sized by the --budget-* flags)
// runs BudgetStorm on a fast-path server started with --memory-budget:
// reading and stalled subscribers over several tables while far more than
// the budget is written, then the same without the stalled ones on a fresh
// server. The report gives peak RSS against the budget, the readers' p99
// against the baseline's, and whether every stalled subscriber got every
// row (or the history-loss error); TestBudgetStorm runs it scaled down in
// process, sampling the budget's accounted total.
//
// # The HTTP change feed (i)
//
// Scenario i (--scenarios i or feed; sized by --feed-clients and
// --feed-idle-clients) runs on each path's fresh server started with the
// feed (ServerOptions.Feed): after 1,000 rows of the storms' view change,
// FeedClients SSE clients (net/http, a Transport each) resume at once
// with Last-Event-ID from before the changes, then as many take the
// snapshot, each storm next to the same one over pgwire (COPY (SUBSCRIBE
// ...)), all ending at UP TO; then FeedIdleClients idle SSE streams for
// RSS per subscriber. The report gives p50/p95/storm time and the server's
// CPU per client, SSE next to pgwire.
//
// WriteReport renders a Report as latest.md, latest.json and two plots
// (statement-to-snapshot p95 and server CPU against N).
//
// # The README's table
//
// WriteReadme writes a summary of a report into the README, between a
// line starting `<!-- bench:begin` and a line `<!-- bench:end -->`: per
// scenario in the report, its headline figures (each the median of the
// runs with their min–max), the run's command, commit and date, and a
// link to latest.md. It is rendered by the same rows, spreads and formats
// as latest.md, so the README quotes the report and nothing else; the rest
// of the README is left byte for byte, and a README without exactly one
// pair of markers is an error (ErrReadmeMarkers) and left as it was.
//
//	shardtail bench --render bench/results/latest.json --readme README.md
//
// regenerates it (and latest.md) from a report's JSON, running nothing; a
// run given --readme does so once its report is written. TestReadmeUpToDate
// fails while the README's table is not that of bench/results/latest.json.
package bench
