package persist

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a Client's Prometheus metrics. Register them with
// Client.Metrics().Register.
type Metrics struct {
	casAttempts  prometheus.Counter
	casConflicts prometheus.Counter
	casErrors    prometheus.Counter
	casBytes     prometheus.Counter
	partsWritten prometheus.Counter
	partBytes    prometheus.Counter
	partsFetched prometheus.Counter
	compactions  prometheus.Counter
	blobsDeleted prometheus.Counter
	blobsSwept   prometheus.Counter
	refreshes    prometheus.Counter
	// snapshots counts snapshot cursors by how they read: merged, or
	// passed through as columns (Cursor.NextChunk).
	snapshots *prometheus.CounterVec
	// partCache counts lookups of the part cache (partcache.go) by
	// result: whole, head or miss.
	partCache *prometheus.CounterVec
}

func newMetrics() *Metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shardtail", Subsystem: "persist", Name: name, Help: help})
	}
	return &Metrics{
		casAttempts:  c("cas_attempts_total", "Compare-and-set attempts on shard state."),
		casConflicts: c("cas_conflicts_total", "Compare-and-set attempts that lost to a concurrent change."),
		casErrors:    c("cas_errors_total", "Compare-and-set attempts that failed with an error."),
		casBytes:     c("cas_bytes_total", "Bytes of state diffs written by committed compare-and-sets."),
		partsWritten: c("parts_written_total", "Parts uploaded to blob."),
		partBytes:    c("part_bytes_written_total", "Bytes of parts uploaded to blob."),
		partsFetched: c("parts_fetched_total", "Parts fetched from blob."),
		compactions:  c("compactions_total", "Compactions committed."),
		blobsDeleted: c("blobs_deleted_total", "Blobs deleted by garbage collection."),
		blobsSwept:   c("blobs_swept_total", "Orphaned blobs (uploaded by a write that never committed) deleted by the sweep."),
		refreshes:    c("state_refreshes_total", "Linearizable reads of shard state from consensus (batched across callers)."),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardtail", Subsystem: "persist", Name: "snapshots_total",
			Help: "Snapshot cursors opened, by read: merge (a k-way merge of runs) or columns (a single run at one time, passed through)."}, []string{"read"}),
		partCache: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardtail", Subsystem: "persist", Name: "part_cache_total",
			Help: "Lookups of a part in the cache of decoded parts by a snapshot cursor, by result: whole (the part was not fetched), head (not fetched for its first rows) or miss."}, []string{"result"}),
	}
}

// Register adds the metrics to r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.casAttempts, m.casConflicts, m.casErrors, m.casBytes,
		m.partsWritten, m.partBytes, m.partsFetched, m.compactions, m.blobsDeleted, m.blobsSwept, m.refreshes, m.snapshots, m.partCache} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) casAttempt(bytes int, ok bool, err error) {
	m.casAttempts.Inc()
	switch {
	case err != nil:
		m.casErrors.Inc()
	case !ok:
		m.casConflicts.Inc()
	default:
		m.casBytes.Add(float64(bytes))
	}
}
