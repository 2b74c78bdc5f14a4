package consumer

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts what Run lands, for Prometheus and for progress lines. A
// nil *Metrics counts nothing.
type Metrics struct {
	batches  prometheus.Counter
	updates  prometheus.Counter
	bytes    prometheus.Counter
	frontier prometheus.Gauge
	lag      prometheus.Gauge
	errors   *prometheus.CounterVec

	// The same numbers for Stats, which must not scrape the registry.
	nUpdates, nBatches, lastFrontier atomic.Uint64
}

// NewMetrics registers the consumer's metrics (consumer_*) with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "consumer_batches_committed_total", Help: "Batches written and committed."}),
		updates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "consumer_updates_landed_total", Help: "Updates written to the target (partial chunks included)."}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "consumer_bytes_landed_total", Help: "Wire bytes of the updates written to the target."}),
		frontier: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "consumer_frontier", Help: "Committed frontier (mz_timestamp, epoch milliseconds)."}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "consumer_lag_seconds", Help: "Wall clock minus the committed frontier at the last commit."}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "consumer_source_errors_total", Help: "Subscribe failures by class."}, []string{"class"}),
	}
	reg.MustRegister(m.batches, m.updates, m.bytes, m.frontier, m.lag, m.errors)
	return m
}

// Stats is a snapshot of Metrics.
type Stats struct {
	Updates, Batches uint64
	Frontier         Frontier
}

// Lag is how far the frontier is behind now (mz_timestamp is epoch
// milliseconds).
func (s Stats) Lag(now time.Time) time.Duration {
	if s.Frontier == 0 {
		return 0
	}
	return now.Sub(time.UnixMilli(int64(s.Frontier)))
}

// Stats returns the counts so far.
func (m *Metrics) Stats() Stats {
	if m == nil {
		return Stats{}
	}
	return Stats{Updates: m.nUpdates.Load(), Batches: m.nBatches.Load(), Frontier: Frontier(m.lastFrontier.Load())}
}

func (m *Metrics) written(b Batch) {
	if m == nil {
		return
	}
	var size int
	for _, u := range b.Updates {
		size += u.Size
	}
	m.updates.Add(float64(len(b.Updates)))
	m.bytes.Add(float64(size))
	m.nUpdates.Add(uint64(len(b.Updates)))
}

func (m *Metrics) committed(b Batch) {
	if m == nil {
		return
	}
	m.written(b)
	m.batches.Inc()
	m.nBatches.Add(1)
	m.frontier.Set(float64(b.Upper))
	m.lastFrontier.Store(uint64(b.Upper))
	m.lag.Set(time.Since(time.UnixMilli(int64(b.Upper))).Seconds())
}

func (m *Metrics) sourceError(c Class) {
	if m == nil {
		return
	}
	m.errors.WithLabelValues(c.String()).Inc()
}
