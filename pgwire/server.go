package pgwire

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Server serves the Postgres wire protocol for a Backend. It owns one
// goroutine per connection, except for a connection parked while its
// result waits for its next batch, which has none until it is woken
// (park.go), and one that watches their sockets for hangups (on Linux;
// elsewhere each connection has a second goroutine reading its socket).
// Close cancels and waits for all of them.
type Server struct {
	backend Backend
	cfg     Config
	log     *slog.Logger

	// mockSalt seeds the salts of the fake verifiers used for unknown roles,
	// so that the same unknown user always sees the same salt, as a real one
	// would (Config.MockSecret).
	mockSalt []byte

	throttle *Throttle // of password logins, by address

	// refuseTimeout is refuseTimeout; tests lengthen it.
	refuseTimeout time.Duration

	mu        sync.Mutex
	closed    bool                      // mu
	listeners map[net.Listener]struct{} // mu: listeners of running Serve calls
	conns     map[*conn]struct{}        // mu: every live connection
	admitted  int                       // mu: connections in conns counted against MaxConnections
	refusing  int                       // mu: connections in conns being refused (conn.refused)
	refusals  refusalLog                // mu
	byPID     map[uint32]*conn          // mu: connections that have sent BackendKeyData

	wg sync.WaitGroup // connections (parked ones too) and resumer goroutines

	// resumers continue parked connections once woken (park.go).
	resumers resumers
	// pacer bounds the connections writing large results at once; nil:
	// unbounded (pacing.go).
	pacer *pacer

	// hangups watches authenticated connections' sockets; started by the
	// first one (hangupWatcher), stopped by Close after the connections.
	hangups      *hangupWatcher // mu
	hangupsTried bool           // mu: hangups was started, or could not be
	// pipeInput makes connections read their socket on an input pipe, as
	// where there is no hangup watcher (tests of that fallback).
	pipeInput bool

	// panics counts panics recovered in connections; tests assert it stays 0.
	panics atomic.Int64

	// mem is the bytes held in message buffers by all connections
	// (MemoryBytes).
	mem atomic.Int64
}

// NewServer returns a server for backend. It validates cfg.
func NewServer(backend Backend, cfg Config) (*Server, error) {
	if backend == nil {
		return nil, errors.New("pgwire: nil backend")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	salt := cfg.MockSecret
	if salt == nil {
		salt = make([]byte, 32)
		rand.Read(salt)
	}
	s := &Server{
		backend:       backend,
		cfg:           cfg,
		log:           cfg.Logger,
		mockSalt:      salt,
		refuseTimeout: refuseTimeout,
		throttle:      cfg.Throttle,
		listeners:     make(map[net.Listener]struct{}),
		conns:         make(map[*conn]struct{}),
		byPID:         make(map[uint32]*conn),
	}
	if s.throttle == nil {
		s.throttle = NewThrottle(cfg.AuthThrottle, cfg.Logger)
	}
	s.resumers = resumers{srv: s, run: s.resume, maxRunning: runtime.GOMAXPROCS(0), stallAfter: defaultStallAfter}
	s.pacer = newPacer(cfg.LargeWriters, cfg.LargeWriteTurn)
	if cfg.Registerer != nil {
		if err := s.registerMetrics(cfg.Registerer); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Serve accepts connections on ln and serves each on its own goroutine, until
// ctx is done, ln fails or Close is called. It closes ln before returning.
// Connections it accepted live on until they end or Close is called; values of
// ctx are visible to the Backend. After Close, Serve returns ErrServerClosed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !temporaryAcceptError(err) {
				return fmt.Errorf("pgwire: accept: %w", err)
			}
			// Out of file descriptors or a connection reset before accept:
			// wait a little instead of spinning, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("pgwire: accept failed; retrying", "err", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			continue
		}
		backoff = 0
		s.startConn(ctx, nc)
	}
}

func temporaryAcceptError(err error) bool {
	var ne net.Error
	return (errors.As(err, &ne) && ne.Timeout()) ||
		errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ECONNRESET)
}

// startConn registers and starts the goroutine of a new connection, or
// closes it at once when the server is closed or already refusing as many
// connections as it may (see admit).
func (s *Server) startConn(ctx context.Context, nc net.Conn) {
	s.mu.Lock()
	verdict := s.admit()
	if s.closed || verdict == admitDrop {
		s.mu.Unlock()
		nc.Close()
		return
	}
	c := newConn(s, ctx, nc)
	c.refused = verdict == admitRefuse
	if c.refused {
		s.refusing++
	} else {
		s.admitted++
	}
	// Add under mu, before Close can see closed, so Close's Wait covers it.
	s.wg.Add(1)
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	go s.serveConn(c)
}

// Close stops every Serve call, cancels every connection (clients see FATAL
// 57P01) and waits for their goroutines to end, which includes closing their
// sessions. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.listeners {
		ln.Close()
	}
	for c := range s.conns {
		c.abort(ErrServerClosed)
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.resumers.close()
	s.mu.Lock()
	w := s.hangups
	s.hangups = nil
	s.mu.Unlock()
	w.close()
	return nil
}

// hangupWatcher returns the server's hangup watcher, starting it for the
// first connection; nil when there is none (not Linux, or pipeInput). A
// connection still running keeps the server from closing it meanwhile.
func (s *Server) hangupWatcher() *hangupWatcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.hangupsTried && !s.closed && !s.pipeInput {
		s.hangupsTried = true
		s.hangups = newHangupWatcher()
	}
	return s.hangups
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// register assigns c a process id and secret key for BackendKeyData and makes
// it reachable by CancelRequest.
func (s *Server) register(c *conn) {
	var b [8]byte
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		rand.Read(b[:])
		// Keep the pid positive: clients print it as a signed int32.
		pid := binary.BigEndian.Uint32(b[:4]) & 0x7fffffff
		if s.cfg.PeerID != 0 {
			pid = uint32(s.cfg.PeerID)<<peerShift | pid&(1<<peerShift-1)
		}
		if pid == 0 || s.byPID[pid] != nil {
			continue
		}
		c.pid, c.secret = pid, binary.BigEndian.Uint32(b[4:])
		s.byPID[pid] = c
		return
	}
}

// forget removes a finished connection.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if c.refused {
		s.refusing--
	} else {
		s.admitted--
	}
	if c.pid != 0 && s.byPID[c.pid] == c {
		delete(s.byPID, c.pid)
	}
}

// cancelRequest handles a CancelRequest: it cancels the running statement of
// the connection with that process id, if the secret key matches. Like
// Postgres, it tells the requester nothing either way.
func (s *Server) cancelRequest(pid, secret uint32) {
	if peer := uint8(pid >> peerShift); s.cfg.PeerID != 0 && peer != s.cfg.PeerID {
		s.forwardCancel(peer, pid, secret)
		return
	}
	s.mu.Lock()
	c := s.byPID[pid]
	s.mu.Unlock()
	if c == nil {
		s.log.Debug("pgwire: cancel request for unknown process", "pid", pid)
		return
	}
	var want, got [4]byte
	binary.BigEndian.PutUint32(want[:], c.secret)
	binary.BigEndian.PutUint32(got[:], secret)
	if subtle.ConstantTimeCompare(want[:], got[:]) != 1 {
		s.log.Warn("pgwire: cancel request with a wrong secret key", "pid", pid)
		return
	}
	c.cancelStatement()
}

// peerShift places the peer id in the top 8 of a process id's 31 bits.
const peerShift = 23

// forwardCancel sends a CancelRequest on to the peer whose connection it is
// for. Like the request itself, it reports nothing back.
func (s *Server) forwardCancel(peer uint8, pid, secret uint32) {
	addr, ok := s.cfg.Peers[peer]
	if !ok {
		s.log.Warn("pgwire: cancel request for an unknown peer", "peer", peer, "pid", pid)
		return
	}
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		s.log.Warn("pgwire: forward cancel request", "peer", peer, "addr", addr, "err", err)
		return
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	msg := binary.BigEndian.AppendUint32(nil, 16)
	msg = binary.BigEndian.AppendUint32(msg, cancelRequestCode)
	msg = binary.BigEndian.AppendUint32(msg, pid)
	msg = binary.BigEndian.AppendUint32(msg, secret)
	if _, err := nc.Write(msg); err != nil {
		s.log.Warn("pgwire: forward cancel request", "peer", peer, "addr", addr, "err", err)
		return
	}
	// The peer closes the connection once it has acted on the request.
	_, _ = nc.Read(make([]byte, 1))
}

// CancelProcess cancels the running statement of the connection with
// process id pid, as pg_cancel_backend does (the caller checks privileges).
// It reports whether such a connection exists.
func (s *Server) CancelProcess(pid uint32) bool {
	s.mu.Lock()
	c := s.byPID[pid]
	s.mu.Unlock()
	if c == nil {
		return false
	}
	c.cancelStatement()
	return true
}

// connCount returns the number of live connections (for tests).
func (s *Server) connCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
