package persist

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// LiveKeys exposes, for tests, the blobs the sweep keeps: those some state
// version still in consensus references.
func LiveKeys(ctx context.Context, c *Client, shard string) (map[string]bool, error) {
	m, err := c.machine(ctx, shard)
	if err != nil {
		return nil, err
	}
	return c.liveKeys(ctx, m)
}

// PartsFetched and BlobsSwept expose, for tests, m's counters of part
// fetches and swept orphans; tests read them with prometheus/testutil.
func PartsFetched(m *Metrics) prometheus.Counter { return m.partsFetched }

// BlobsSwept: see PartsFetched.
func BlobsSwept(m *Metrics) prometheus.Counter { return m.blobsSwept }

// CASCounters exposes, for tests, m's counters of compare-and-set attempts,
// the attempts that lost or failed, and the bytes committed.
func CASCounters(m *Metrics) (attempts, conflicts, errs, bytes prometheus.Counter) {
	return m.casAttempts, m.casConflicts, m.casErrors, m.casBytes
}

// HoldCompactionSlot takes one of c's compaction slots until release is
// called, as a compaction of another shard would.
func HoldCompactionSlot(c *Client) (release func()) {
	if err := c.compactions.Acquire(context.Background(), 1); err != nil {
		panic(err)
	}
	return func() { c.compactions.Release(1) }
}

// NotEOF exposes notEOF for tests.
var NotEOF = notEOF

// Snapshots: see PartsFetched; read is "merge" or "columns".
func Snapshots(m *Metrics, read string) prometheus.Counter {
	return m.snapshots.WithLabelValues(read)
}

// ListenPeakBytes exposes, for tests, the most bytes one read of a batch
// by l held.
func ListenPeakBytes(l *Listen) int64 { return l.peak }

// PartCache: see PartsFetched; result is "whole", "head" or "miss".
func PartCache(m *Metrics, result string) prometheus.Counter {
	return m.partCache.WithLabelValues(result)
}

// Refreshes: see PartsFetched; reads of consensus by refreshes.
func Refreshes(m *Metrics) prometheus.Counter { return m.refreshes }
