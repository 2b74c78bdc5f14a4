package feed

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the feed's Prometheus metrics; subscribes by transport are
// the adapter's (shardtail_subscribes_by_transport).
type metrics struct {
	streams  *prometheus.GaugeVec
	bytes    *prometheus.CounterVec
	requests *prometheus.CounterVec
	resets   prometheus.Counter
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "shardtail", Name: "feed_streams",
			Help: "Open HTTP feed streams, by transport (sse, ndjson, snapshot)."}, []string{"transport"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardtail", Name: "feed_sent_bytes_total",
			Help: "Bytes the HTTP feed sent, by transport."}, []string{"transport"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardtail", Name: "feed_requests_total",
			Help: "HTTP feed subscribe requests, by transport and HTTP status."}, []string{"transport", "status"}),
		resets: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shardtail", Name: "feed_resets_total",
			Help: "Streams ended with event: reset (the position was no longer in history)."}),
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.streams, m.bytes, m.requests, m.resets} {
			if err := r.Register(c); err != nil {
				return nil, fmt.Errorf("register feed metrics: %w", err)
			}
		}
	}
	return m, nil
}
