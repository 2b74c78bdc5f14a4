package bench

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// tailCounterNames are the counters (f) shows for each process: where the
// subscribes ran, and what they cost in snapshot cursors, part fetches and
// consensus writes.
var tailCounterNames = []string{
	"shardtail_subscribes_total",
	"shardtail_tail_snapshot_cursors_total",
	"shardtail_persist_parts_fetched_total",
	"shardtail_persist_cas_attempts_total",
}

// writeProxySection renders (f).
func writeProxySection(w io.Writer, tr *TailResults, mode Mode) {
	fmt.Fprintf(w, "## (f) Storm through a tail process\n\n")
	if r := tr.Run; r != nil {
		fmt.Fprintf(w, "Measured in a run of its own, %s, %s in all (load average at start / end: %s / %s; shardtail %s",
			r.Started.UTC().Format("2006-01-02 15:04 MST"), time.Duration(r.Seconds*float64(time.Second)).Round(time.Second), r.LoadStart, r.LoadEnd, r.Shardtail)
		if r.Commit != "" {
			fmt.Fprintf(w, ", commit %s", r.Commit)
		}
		fmt.Fprintf(w, "), and merged into this report with:\n\n```sh\n%s\n```\n\n", r.Command)
	}
	fmt.Fprintf(w, "One role-all server and one tail process (`shardtail serve --upstream`) on shared storage: %s. "+
		"The table `src` (%s rows × %d bytes) and the materialized view `mv` over it were created and loaded through the tail's proxy port "+
		"(the DDL and the COPY FROM STDIN pass through to role all). Each N runs the storm of (a), `%s`, first against role all directly, "+
		"then against the tail process: the same processes, storage and rows. The dataflow-path storms set `enable_subscribe_persist_fast_path = off` "+
		"on each connection first; a tail applies that SET to the client's upstream session too, so it passes the SUBSCRIBE through and role all runs "+
		"one dataflow per client. CPU is each process's from before the first connect to after the last close; per client is that ÷ N.",
		tr.Storage, commas(tr.Rows), tr.PayloadBytes, stormStatement(mode))
	if tr.StorageKind == StorageS3 {
		fmt.Fprintf(w, " Consensus CPU is PostgreSQL's (postmaster and backends); the S3 server's is in the bench process's client CPU.")
	}
	fmt.Fprintf(w, "\n\n| N | path | clients connect to | storm time | snapshot p50 | snapshot p95 | CPU per client: tail process | CPU per client: role all | "+
		"CPU: tail / role all / consensus | client CPU | snapshots complete | errors |\n|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, ts := range tr.Storms {
		s := ts.Storm
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s / %s | %s | %s | %s |\n",
			commas(s.Clients), ts.Path, ts.Via, secs(s.StormSeconds), secs(s.Snapshot.P50), secs(s.Snapshot.P95),
			fmtOr(ms, ts.PerClientMS(ts.TailCPU)), fmtOr(ms, ts.PerClientMS(ts.UpstreamCPU)),
			fmtOr(cpuSecs, ts.TailCPU), fmtOr(cpuSecs, ts.UpstreamCPU), fmtOr(cpuSecs, ts.ConsensusCPU),
			cpuSecs(s.ClientCPU), commas(s.Completed), commas(s.Errors))
	}
	fmt.Fprintln(w)

	var errs []string
	for _, ts := range tr.Storms {
		for _, e := range SortedErrors(ts.Storm.ErrorSamples) {
			errs = append(errs, fmt.Sprintf("- %s path via %s, N=%d: %s", ts.Path, ts.Via, ts.Storm.Clients, e))
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "Storm errors:\n\n%s\n\n", strings.Join(errs, "\n"))
	}

	fmt.Fprintf(w, "Counters of each process, increase during each storm (from its /metrics):\n\n| N | path | clients connect to |%s%s\n|---:|---|---|%s\n",
		counterHeaders("tail: ", tailCounterNames), counterHeaders("role all: ", tailCounterNames), strings.Repeat("---:|", 2*len(tailCounterNames)))
	for _, ts := range tr.Storms {
		fmt.Fprintf(w, "| %s | %s | %s |%s%s\n", commas(ts.Storm.Clients), ts.Path, ts.Via,
			counterCells(ts.TailCounters, tailCounterNames), counterCells(ts.UpstreamCounters, tailCounterNames))
	}
	fmt.Fprintf(w, "\n*tail_snapshot_cursors* counts the snapshot reads a fast-path storm took on the process serving it. Above 1, subscribers "+
		"at the same AS OF did not all share one read, and each extra cursor is one more fetch and decode of the view: where it is high, "+
		"that storm's time and CPU are too, and they vary from run to run.\n\n")
}

// MergeTail puts the (f) of report from into report into, keeping into's
// other sections: (f) measured in a run of its own
// (`shardtail bench --scenarios f --merge FILE`). The section then says
// when and how it ran.
func MergeTail(into, from *Report) error {
	if from.Results == nil || from.Results.Tail == nil {
		return errors.New("merge: this run measured no (f)")
	}
	if into.Results == nil {
		return errors.New("merge: the report to merge into holds no results")
	}
	t := *from.Results.Tail
	t.Run = &RunInfo{
		Started: from.Started, Seconds: from.Seconds, Command: from.Command,
		LoadStart: from.Machine.LoadStart, LoadEnd: from.Machine.LoadEnd,
		Shardtail: from.Versions.Shardtail, Commit: from.Versions.Commit,
	}
	into.Results.Tail = &t
	into.Config.TailClients = from.Config.TailClients
	into.Config.TailDataflowClients = from.Config.TailDataflowClients
	into.Config.TailStorage = from.Config.TailStorage
	return nil
}
