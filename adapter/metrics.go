package adapter

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the adapter's Prometheus metrics.
type metrics struct {
	sessions   prometheus.Gauge
	statements *prometheus.CounterVec
	subscribes *prometheus.GaugeVec
	subsTotal  *prometheus.CounterVec
	// byTransport and byTransportTotal count subscribes by client protocol
	// (pgwire, sse, ndjson).
	byTransport      *prometheus.GaugeVec
	byTransportTotal *prometheus.CounterVec
	writes           prometheus.Counter
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "shardtail", Name: "sessions", Help: "Open client sessions."}),
		statements: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardtail", Name: "statements_total",
			Help: "Statements executed, by kind and outcome."}, []string{"kind", "outcome"}),
		subscribes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "shardtail", Name: "subscribes",
			Help: "Running SUBSCRIBEs by path (fast, dataflow)."}, []string{"path"}),
		subsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardtail", Name: "subscribes_total",
			Help: "SUBSCRIBEs started, by path."}, []string{"path"}),
		byTransport: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "shardtail", Name: "subscribes_by_transport",
			Help: "Running SUBSCRIBEs by client protocol (pgwire, sse, ndjson)."}, []string{"transport"}),
		byTransportTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardtail", Name: "subscribes_by_transport_total",
			Help: "SUBSCRIBEs started, by client protocol (pgwire, sse, ndjson)."}, []string{"transport"}),
		writes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shardtail", Name: "table_writes_total", Help: "Committed table writes."}),
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.sessions, m.statements, m.subscribes, m.subsTotal, m.byTransport, m.byTransportTotal, m.writes} {
			if err := r.Register(c); err != nil {
				return nil, fmt.Errorf("register adapter metrics: %w", err)
			}
		}
	}
	return m, nil
}
