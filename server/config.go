package server

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/feed"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/pgwire"
)

// DefaultListen is the pgwire address when Config.Listen is empty: a free
// loopback port (the command's --listen default is 127.0.0.1:6875).
const DefaultListen = "127.0.0.1:0"

// Config is what one server process is made of. The zero value is not
// valid: it needs storage, given either opened (Blob, Consensus) or as
// URLs.
type Config struct {
	// Blob and Consensus are the shared storage. When nil, New opens
	// BlobURL and ConsensusURL (blob.Open, consensus.Open) and closes them
	// on Close; storage given opened is left open, so a test can start a
	// new server on a stopped one's storage.
	Blob         persist.Blob
	Consensus    persist.Consensus
	BlobURL      string
	ConsensusURL string
	// Persist configures the persist client.
	Persist persist.Config
	// Adapter configures the coordinator. New fills in its Persist,
	// Consensus and Registerer.
	Adapter adapter.Config
	// PGWire configures the protocol server. New fills in its Registerer.
	PGWire pgwire.Config
	// MemoryBudget is the process's memory budget in bytes
	// (--memory-budget), covering the fast path's windows, snapshot
	// shares, queues and ordered timestamps, the dataflow path's queues
	// and pgwire's buffers (package membudget). 0 means unlimited: the
	// holders are still accounted and exported. Adapter.Tail.Budget, when
	// set, is used instead.
	MemoryBudget int64
	// Listen is the pgwire address; "" means DefaultListen.
	Listen string
	// HTTPListen is the address of /metrics, /healthz and /debug/pprof;
	// "" means no HTTP server.
	HTTPListen string
	// FeedListen is the address of the HTTP change feed (package feed);
	// "" means none (the command's --feed-listen default is
	// feed.DefaultListen).
	FeedListen string
	// Feed configures the feed. New fills in its Budget, Registerer, Log,
	// its TLSConfig from PGWire's and Trust from PGWire.Auth.
	Feed feed.Config
	// Registry receives the metrics of persist, the adapter and pgwire,
	// and is what /metrics serves; nil means a new, empty one.
	Registry *prometheus.Registry
	// Log receives the server's own log lines; nil means slog.Default().
	Log *slog.Logger
}

// Validate reports the first field that is wrong, and why.
func (c *Config) Validate() error {
	if c.Blob == nil && c.BlobURL == "" {
		return errors.New("server config: Blob or BlobURL is required")
	}
	if c.Consensus == nil && c.ConsensusURL == "" {
		return errors.New("server config: Consensus or ConsensusURL is required")
	}
	if c.MemoryBudget < 0 {
		return errors.New("server config: MemoryBudget must not be negative (0 is unlimited)")
	}
	return nil
}
