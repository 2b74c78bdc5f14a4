package pgwire

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults for Config fields left zero.
const (
	// DefaultMaxMessageSize bounds one large frontend message (Query, Parse,
	// Bind, CopyData, FunctionCall), and so the memory one message can take.
	// A message's buffer grows as its bytes arrive, so the limit is not what
	// a client can make the server allocate by merely claiming it.
	DefaultMaxMessageSize = 64 << 20

	// DefaultAuthTimeout bounds the time from accept to the end of
	// authentication, like Postgres's authentication_timeout.
	DefaultAuthTimeout = 60 * time.Second

	// DefaultLargeWriteTurn is Config.LargeWriteTurn's default: a second,
	// several times what a client takes to read a 10,000-row snapshot.
	DefaultLargeWriteTurn = time.Second

	// MaxStartupMessageSize is the limit of a startup packet, as in Postgres
	// (MAX_STARTUP_PACKET_LENGTH).
	MaxStartupMessageSize = 10000

	// maxSmallMessageSize bounds the messages that carry no data (Sync,
	// Describe, Execute, Close, ...), as Postgres's PQ_SMALL_MESSAGE_LIMIT.
	maxSmallMessageSize = 10000

	// maxAuthMessageSize bounds password and SASL messages, as Postgres's
	// PG_MAX_AUTH_TOKEN_LENGTH.
	maxAuthMessageSize = 65535

	// minMaxMessageSize keeps MaxMessageSize above the small-message limit so
	// that every message type fits.
	minMaxMessageSize = maxSmallMessageSize
)

// AuthMethod is how roles that require a password authenticate.
type AuthMethod int

// Authentication methods.
const (
	// AuthSCRAM asks for SCRAM-SHA-256 (RFC 5802/7677); the password never
	// crosses the wire. The default.
	AuthSCRAM AuthMethod = iota
	// AuthCleartext asks for the password in clear text
	// (AuthenticationCleartextPassword); use it only over TLS.
	AuthCleartext
	// AuthTrust never asks for a password, whatever the role says: the
	// embedded loopback default.
	AuthTrust
)

// String returns the pg_hba.conf name of the method.
func (m AuthMethod) String() string {
	switch m {
	case AuthSCRAM:
		return "scram-sha-256"
	case AuthCleartext:
		return "password"
	case AuthTrust:
		return "trust"
	default:
		return fmt.Sprintf("AuthMethod(%d)", int(m))
	}
}

// Config configures a Server. The zero value is valid: SCRAM for roles with a
// password, no TLS, default limits.
type Config struct {
	// TLSConfig enables TLS: an SSLRequest is answered 'S' and the handshake
	// runs with this config. Nil answers 'N' and the client goes on in clear
	// text (or gives up, with sslmode=require).
	TLSConfig *tls.Config

	// Auth is how roles with Role.PasswordRequired authenticate.
	Auth AuthMethod

	// MaxMessageSize bounds the body of one Query, Parse, Bind, CopyData or
	// FunctionCall message, in bytes; a larger message gets 08P01 and the
	// connection is closed. 0 means DefaultMaxMessageSize.
	MaxMessageSize int

	// AuthTimeout bounds the time from accept to the end of authentication,
	// TLS handshake included. 0 means DefaultAuthTimeout.
	AuthTimeout time.Duration

	// MaxConnections bounds the connections the server holds at once,
	// counting those still in startup or authentication, as Postgres's
	// max_connections does. Past it a new connection is read up to its
	// startup message (for at most a second) and refused with FATAL 53300
	// "sorry, too many clients already", instead of waiting in the accept
	// queue; a CancelRequest is still served. Refusals in progress are
	// bounded too (maxRefusing): beyond them a connection is closed at once,
	// so that a flood of clients cannot take the descriptors the rest of the
	// process needs. 0 means no limit.
	MaxConnections int

	// NotSentLowWater, when positive, bounds the bytes each client
	// connection's socket holds that the kernel has not sent yet
	// (TCP_NOTSENT_LOWAT; Linux only): a write past it waits until the
	// client has taken some, and the rest of a large result stays in the
	// process, where a snapshot's encoding is shared by all its
	// subscribers. Without it the kernel grows each socket's send buffer up
	// to net.ipv4.tcp_wmem's maximum (4 MiB by default) and a storm of
	// clients taking a snapshot at once copies up to that much per client
	// into kernel memory at once; past net.ipv4.tcp_mem's pressure
	// threshold the host's TCP shrinks every socket's buffers and drops
	// and retransmits segments, for every connection of the host. The cost
	// is more, smaller writes (a wakeup per NotSentLowWater/2 or so bytes),
	// and in a storm every client progresses at once instead of the first
	// ones finishing early. Bytes sent but not yet acknowledged are not
	// counted: the congestion window bounds those. 0 leaves the kernel's
	// setting (net.ipv4.tcp_notsent_lowat, unlimited by default).
	NotSentLowWater int

	// LargeWriters, when positive, is how many connections may write a
	// large result at once (64 KiB or more per write): the others wait
	// their turn, in order, so that a storm of clients taking a snapshot
	// holds the kernel's queues of that many only (pacing.go). 0: every
	// connection writes when it has something.
	LargeWriters int
	// LargeWriteTurn is how long a connection may keep its turn before it
	// goes to the back of the line (a client that does not read, or a huge
	// result); 0 is DefaultLargeWriteTurn.
	LargeWriteTurn time.Duration

	// AuthThrottle slows password guessing from one address; see its doc.
	AuthThrottle AuthThrottle
	// MockSecret seeds the fake password verifiers that names that are no
	// role are answered with (their salt is stable per name, as a real
	// role's is). Servers that share their roles should share it, and keep
	// it across restarts, or comparing salts tells which roles exist. Nil:
	// a random one of the server's own.
	MockSecret []byte

	// Throttle, when set, is the process's throttle of password logins,
	// shared with its other transports (the HTTP feed); AuthThrottle is
	// then ignored. Nil: a throttle of AuthThrottle of the server's own.
	Throttle *Throttle

	// Logger receives connection errors, internal errors behind XX000 and
	// recovered panics. Nil means slog.Default().
	Logger *slog.Logger

	// PeerID and Peers let servers behind one TCP load balancer cancel each
	// other's statements, as PgBouncer's peering does: a CancelRequest may
	// reach a different server than the client's connection. A server with
	// PeerID p (1 to MaxPeerID) gives its connections process ids carrying
	// p, and forwards a CancelRequest whose process id carries another peer's
	// id to that peer's address in Peers. 0 means no peering.
	PeerID uint8
	Peers  map[uint8]string

	// Registerer, when set, gets the server's metrics:
	// shardtail_memory_bytes{holder="pgwire"}, the bytes held in message
	// buffers (Server.MemoryBytes). Nil registers none.
	Registerer prometheus.Registerer
}

// MaxPeerID is the largest Config.PeerID.
const MaxPeerID = 255

// Validate reports the first field that is wrong, and why.
func (c Config) Validate() error {
	switch c.Auth {
	case AuthSCRAM, AuthCleartext, AuthTrust:
	default:
		return fmt.Errorf("pgwire config: Auth: unknown method %d", int(c.Auth))
	}
	if c.MaxMessageSize != 0 && c.MaxMessageSize < minMaxMessageSize {
		return fmt.Errorf("pgwire config: MaxMessageSize: %d is below the minimum of %d bytes", c.MaxMessageSize, minMaxMessageSize)
	}
	if c.MaxConnections < 0 {
		return fmt.Errorf("pgwire config: MaxConnections: %d is negative", c.MaxConnections)
	}
	if c.LargeWriters < 0 || c.LargeWriteTurn < 0 {
		return fmt.Errorf("pgwire config: LargeWriters (%d) and LargeWriteTurn (%v) must not be negative", c.LargeWriters, c.LargeWriteTurn)
	}
	if c.NotSentLowWater < 0 {
		return fmt.Errorf("pgwire config: NotSentLowWater: %d is negative", c.NotSentLowWater)
	}
	if c.AuthTimeout < 0 {
		return fmt.Errorf("pgwire config: AuthTimeout: %v is negative", c.AuthTimeout)
	}
	if t := c.AuthThrottle; t.Free < 0 || t.Delay < 0 || t.MaxDelay < 0 || t.Forget < 0 {
		return fmt.Errorf("pgwire config: AuthThrottle: negative field in %+v", t)
	}
	for id, addr := range c.Peers {
		if id == 0 {
			return fmt.Errorf("pgwire config: Peers: peer id 0 is not valid (ids are 1 to %d)", MaxPeerID)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("pgwire config: Peers: peer %d: %v", id, err)
		}
	}
	if len(c.Peers) > 0 && c.PeerID == 0 {
		return fmt.Errorf("pgwire config: Peers needs a PeerID")
	}
	return nil
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.AuthTimeout == 0 {
		c.AuthTimeout = DefaultAuthTimeout
	}
	if c.LargeWriteTurn == 0 {
		c.LargeWriteTurn = DefaultLargeWriteTurn
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
