package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteStormTable prints one storm's result as an aligned text table.
func WriteStormTable(w io.Writer, r *StormResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "clients\t%d (connected %d in %.2fs, mode %s, relation %s, fast path %s)\n",
		r.Clients, r.Connected, r.ConnectSeconds, r.Mode, r.Relation, r.FastPath)
	fmt.Fprintf(tw, "snapshots complete\t%d (%d rows in all)\n", r.Completed, r.SnapshotRows)
	fmt.Fprintf(tw, "errors\t%d\n", r.Errors)
	for _, e := range SortedErrors(r.ErrorSamples) {
		fmt.Fprintf(tw, "\t%s\n", e)
	}
	fmt.Fprintf(tw, "storm time\t%s\n", secs(r.StormSeconds))
	fmt.Fprintf(tw, "statement to snapshot\tp50 %s  p95 %s  max %s\n", secs(r.Snapshot.P50), secs(r.Snapshot.P95), secs(r.Snapshot.Max))
	fmt.Fprintf(tw, "statement to last row\tp50 %s  p95 %s  max %s\n", secs(r.LastRow.P50), secs(r.LastRow.P95), secs(r.LastRow.Max))
	if r.ServerCPU >= 0 {
		fmt.Fprintf(tw, "server CPU\t%.2fs (%.2f ms per client)\n", r.ServerCPU, r.ServerCPUPerClientMS())
	} else {
		fmt.Fprintf(tw, "server CPU\tnot measured (give --server-pid or --metrics)\n")
	}
	fmt.Fprintf(tw, "client CPU\t%.2fs\n", r.ClientCPU)
	if r.LiveSeconds > 0 {
		fmt.Fprintf(tw, "live\t%d rows in %.1fs", r.LiveRows, r.LiveSeconds)
		if r.Latency.N > 0 {
			fmt.Fprintf(tw, "; write-to-client p50 %.1f ms  p99 %.1f ms  max %.1f ms", r.Latency.P50, r.Latency.P99, r.Latency.Max)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// secs formats seconds for tables: ms below one second.
func secs(s float64) string {
	switch {
	case s < 0:
		return "n/a"
	case s < 1:
		return fmt.Sprintf("%.1f ms", s*1000)
	default:
		return fmt.Sprintf("%.2f s", s)
	}
}
