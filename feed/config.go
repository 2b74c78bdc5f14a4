package feed

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/pgwire"
)

// Defaults of Config's zero fields.
const (
	// DefaultListen is `shardtail serve`'s --feed-listen.
	DefaultListen = "127.0.0.1:6877"
	// DefaultHeartbeat is how often an idle stream sends a comment, so
	// that proxies and load balancers do not time it out.
	DefaultHeartbeat = 15 * time.Second
	// DefaultRetry is the reconnect delay SSE's retry: hint asks browsers
	// for.
	DefaultRetry = time.Second
	// DefaultWriteTimeout is how long a client may take to accept one
	// batch before its connection is closed.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultMaxConnections is the most streams at once.
	DefaultMaxConnections = 10000
	// DefaultMaxSnapshotBytes bounds a ?live=false answer, which is held
	// whole until its frontier is known: subscribe_max_buffered_bytes's
	// default, what a subscriber may have queued.
	DefaultMaxSnapshotBytes = 128 << 20
	// DefaultMaxHeldBytes bounds the rows a stream of several collections
	// holds for a collection ahead of a lagging one: as
	// subscribe_max_buffered_bytes's default bounds a subscriber's queue.
	DefaultMaxHeldBytes = 128 << 20
)

// Config configures the feed. The zero value serves with the defaults
// above, checking passwords.
type Config struct {
	// Trust accepts every existing role without a password, as pgwire's
	// AuthTrust does. Otherwise a role with a password must give it with
	// HTTP Basic; one without (the embedded default) needs none.
	Trust bool
	// CORSOrigins are the origins whose pages may read the feed, with the
	// browser's credentials; "*" lets any page read it without them. nil
	// allows none but the feed's own.
	CORSOrigins []string
	// MaxConnections is the most streams at once; past it a request gets
	// 503 with SQLSTATE 53300.
	MaxConnections int
	// MaxSnapshotBytes bounds the JSON of a ?live=false answer, held
	// whole until its frontier (a header) is known: past it, or when the
	// memory budget is over its limit while it grows, the request gets
	// 503 with SQLSTATE 53200, and the client streams instead.
	MaxSnapshotBytes int64
	// MaxHeldBytes bounds the rows a stream of several collections holds
	// until every collection's frontier passes them: past it, the stream
	// ends with event: reset (53200), as a subscriber past its budget on
	// the dataflow path does (a ?live=false answer gets 503).
	MaxHeldBytes int64
	// Heartbeat, Retry and WriteTimeout: see the defaults.
	Heartbeat    time.Duration
	Retry        time.Duration
	WriteTimeout time.Duration
	// Compression is CompressionGzip (the default, "") or CompressionNone:
	// with gzip, a stream whose request accepts it (Accept-Encoding:
	// gzip) is compressed, each shared run of rows once for every stream
	// of its shape (gzip.go).
	Compression string
	// NotSentLowWater, when positive, bounds the bytes each connection's
	// socket holds that the kernel has not sent yet (TCP_NOTSENT_LOWAT;
	// Linux only), as pgwire.Config's does: a stream whose client stops
	// reading pins that much kernel memory rather than up to
	// net.ipv4.tcp_wmem's maximum. 0 leaves the kernel's setting.
	NotSentLowWater int
	// TLSConfig, when set, serves HTTPS, and HTTP/2 with it.
	TLSConfig *tls.Config
	// Budget is the process's memory budget; the feed's buffers are its
	// holder membudget.HolderFeed.
	Budget *membudget.Budget
	// Registerer receives the feed's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Log receives the feed's log lines; nil means slog.Default().
	Log *slog.Logger
	// Throttle slows password guessing from one address, as pgwire's
	// AuthThrottle does; the server passes pgwire's own, so that an
	// address guesses no faster over both. nil: a throttle of the feed's
	// own, with pgwire's defaults.
	Throttle *pgwire.Throttle
}

// Validate reports the first field that is wrong, and why.
func (c *Config) Validate() error {
	switch {
	case c.MaxConnections < 0, c.MaxSnapshotBytes < 0, c.MaxHeldBytes < 0:
		return errors.New("feed config: MaxConnections, MaxSnapshotBytes and MaxHeldBytes must not be negative (0 is the default)")
	case c.NotSentLowWater < 0:
		return fmt.Errorf("feed config: NotSentLowWater: %d is negative", c.NotSentLowWater)
	case c.Heartbeat < 0, c.Retry < 0, c.WriteTimeout < 0:
		return errors.New("feed config: Heartbeat, Retry and WriteTimeout must not be negative (0 is the default)")
	case c.Compression != "" && c.Compression != CompressionGzip && c.Compression != CompressionNone:
		return fmt.Errorf("feed config: Compression %q must be %q or %q", c.Compression, CompressionGzip, CompressionNone)
	}
	return nil
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxSnapshotBytes == 0 {
		c.MaxSnapshotBytes = DefaultMaxSnapshotBytes
	}
	if c.MaxHeldBytes == 0 {
		c.MaxHeldBytes = DefaultMaxHeldBytes
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.Retry == 0 {
		c.Retry = DefaultRetry
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Throttle == nil {
		c.Throttle = pgwire.NewThrottle(pgwire.AuthThrottle{}, c.Log)
	}
	return c
}
