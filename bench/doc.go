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
// scenarios a-e. A server that dies is noted in the report and replaced for
// the next scenario. When PostgreSQL's binaries are installed, Postgres
// starts a throwaway cluster with the same rows for the peer columns.
// Everything takes a context: cancelling it (Ctrl-C) closes the clients,
// stops the children and removes their directories.
//
// WriteReport renders a Report as latest.md, latest.json and two plots
// (statement-to-snapshot p95 and server CPU against N).
package bench
