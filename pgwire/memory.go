package pgwire

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// memAccount counts the bytes one connection holds in message buffers (its
// input: header buffer, large bodies, read buffers; its send buffer) and adds
// them to the server's total. The connection's goroutine charges it, and its
// input pipe's where it has one.
type memAccount struct {
	total *atomic.Int64 // the server's
	held  atomic.Int64  // this connection's
}

func (a *memAccount) add(n int) {
	if n == 0 {
		return
	}
	a.held.Add(int64(n))
	a.total.Add(int64(n))
}

// releaseAll uncounts whatever the connection still holds: buffers that end
// with it rather than being given back one by one (a body half read, read
// buffers queued but never consumed). Call it once the input is closed.
func (a *memAccount) releaseAll() {
	a.total.Add(-a.held.Swap(0))
}

// MemoryBytes returns the bytes the server's connections hold in message
// buffers: what clients have sent and pgwire has not yet consumed (a message
// being received is charged for what has arrived, never for the length its
// header claims), the buffer of the last large message until the next one
// starts, and send buffers. It is the figure a process-wide memory budget
// reads for the holder "pgwire".
func (s *Server) MemoryBytes() int64 {
	return s.mem.Load()
}

// memoryBytesHelp is the help of shardtail_memory_bytes; every holder that
// exports the metric must use the same text, or the registry refuses it.
const memoryBytesHelp = "Bytes of memory held, by holder."

// registerMetrics registers shardtail_memory_bytes{holder="pgwire"} and,
// when large writes are paced, their counters.
func (s *Server) registerMetrics(r prometheus.Registerer) error {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace:   "shardtail",
		Name:        "memory_bytes",
		Help:        memoryBytesHelp,
		ConstLabels: prometheus.Labels{"holder": "pgwire"},
	}, func() float64 { return float64(s.MemoryBytes()) })
	cs := []prometheus.Collector{g}
	if p := s.pacer; p != nil {
		cs = append(cs,
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Namespace: "shardtail", Subsystem: "pgwire", Name: "large_write_waits_total",
				Help: "Large writes that waited for their turn (--large-writers).",
			}, func() float64 { return float64(p.waits.Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Namespace: "shardtail", Subsystem: "pgwire", Name: "large_write_turns_expired_total",
				Help: "Turns of large writes ended after --large-write-turn (a client not reading, or a huge result).",
			}, func() float64 { return float64(p.expired.Load()) }))
	}
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("pgwire: register metrics: %w", err)
		}
	}
	return nil
}
