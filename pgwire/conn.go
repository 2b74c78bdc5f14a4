package pgwire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgproto3/v2"

	"github.com/shardtail/shardtail/internal/sockopt"
)

const (
	// flushThreshold is the send buffer size at which pgwire writes even in
	// the middle of a batch, bounding the buffer of a connection.
	flushThreshold = 64 << 10
	// maxRetainedBuffer is the largest send buffer kept for reuse (in
	// sendBufs) after a flush; a larger one (after a huge row) is dropped so
	// that no one pins it.
	maxRetainedBuffer = 256 << 10
	// closeGrace is how long a canceled connection may still write, to deliver
	// its final error to a client that is not reading.
	closeGrace = time.Second
)

// errConnDone is the cause of the connection context once the connection
// goroutine has finished.
var errConnDone = errors.New("pgwire: connection closed")

// conn is one client connection. The goroutine that runs it (serveConn, or
// after it parked the resumer that continues it: park.go) owns every field
// except those under mu, sleep, and nextWoken (the resumers'); an input
// pipe's goroutine only reads the socket.
type conn struct {
	srv *Server
	// logPID adds the backend pid to the connection's log lines once it
	// has one (see logger).
	logPID  bool
	slot    writeSlot // its turn for large writes (pacing.go)
	raw     net.Conn  // the accepted socket
	nc      net.Conn  // raw, or the TLS connection over it
	tls     bool
	refused bool                    // over Config.MaxConnections: refused after the startup message
	ctx     context.Context         // canceled by Close, a disconnect, or the end of the connection
	cancel  context.CancelCauseFunc // only through cancelAll
	// base is what statement contexts derive from: the server's values
	// without its cancellation. A statement context is not a child of ctx
	// (cancelAll cancels both), so that ctx holds neither a children map
	// nor a Done channel: bytes each of thousands of idle subscribers
	// would pay.
	base context.Context

	src switchReader
	in  *msgReader
	// be decodes the client's messages; nil while a statement's result
	// is parked (an idle subscriber does not read its client), and made
	// again by the next receive.
	be    *pgproto3.Backend
	input input // nil until authentication is done
	// unwatch stops the server's hangup watch of the socket; nil when the
	// connection reads it on an input pipe instead.
	unwatch func()

	out     []byte  // send buffer
	outBox  *[]byte // the sendBufs entry that carries out back to the pool
	outHeld int     // cap(out) as last charged to mem
	werr    error   // first write error; the connection is then finished

	// mem counts the bytes of the connection's message buffers, for
	// Server.MemoryBytes.
	mem memAccount

	sess        Session
	pid, secret uint32
	// password is the one the client sent in clear text (AuthCleartext),
	// kept for ConnInfo.Password.
	password string

	mu         sync.Mutex
	stmtCancel context.CancelCauseFunc // mu: cancels the running statement; nil between statements

	// query is the simple query being run statement by statement, and
	// exec the Execute being run; nil between messages. parking is set
	// when the result of one of them waits for its next batch: run then
	// parks the connection (park.go) and continues the message once the
	// result's wake, or the end of the statement, resumes it
	// (continueQuery, continueExecute).
	query   *queryRun
	exec    *executeRun
	parking bool
	// resumer is set while one of the server's resumers runs the
	// connection: it hands the connection to a goroutine of its own
	// before it waits for the client's next message (errHandOff), and
	// gives its place up before a write that would wait for the client
	// (write).
	resumer *resumer
	// rc is raw's socket, for the writes a resumer tries without
	// waiting; nil if it has none. Looked up once (rcKnown).
	rc      syscall.RawConn
	rcKnown bool
	// sleep is awake, asleep or wokenEarly (park.go); wakeFn is wake, as
	// a parked result keeps it; nextWoken links the connections waiting
	// in the server's resumers.
	sleep     atomic.Int32
	wakeFn    func()
	nextWoken *conn

	stmts          map[string]*prepared // nil until the first Parse: most connections never send one
	portals        map[string]*portal   // nil until the first Bind
	ignoreTillSync bool                 // an extended-protocol error happened: skip to Sync
	batchFailed    bool                 // an error was sent since the last Sync
	stopping       bool                 // a statement failed because the connection was canceled: end after this message
	inputErr       error                // reading the client failed inside a statement (COPY FROM): the connection ends with it
}

func newConn(s *Server, ctx context.Context, nc net.Conn) *conn {
	base := context.WithoutCancel(ctx)
	cctx, cancel := context.WithCancelCause(base)
	c := &conn{
		srv:    s,
		raw:    nc,
		nc:     nc,
		ctx:    cctx,
		cancel: cancel,
		base:   base,
	}
	c.mem.total = &s.mem
	c.src.r = nc
	c.in = newMsgReader(&c.src, s.cfg.MaxMessageSize, &c.mem)
	c.takeBackend()
	return c
}

// takeBackend gives the connection a message decoder if it has none.
func (c *conn) takeBackend() {
	if c.be == nil {
		// pgwire encodes into its own send buffer and never calls
		// Backend.Send.
		c.be = pgproto3.NewBackend(c.in, io.Discard)
	}
}

// park lets go of what a connection whose statement's result waits for
// its next batch does not need until the statement is done, which for a
// subscriber may be hours: the message decoder (448 bytes, most of them
// the message structs it decodes into), since nothing is received
// meanwhile. It runs between messages, when the decoder holds no partial
// message and no message still in use. (The send buffer went back at
// the flush before the result parked.)
func (c *conn) park() {
	c.be = nil
	if parkedHook != nil {
		parkedHook(c)
	}
}

// parkedHook, when set (by tests), sees each connection as it parks, on
// its goroutine.
var parkedHook func(*conn)

// logger returns the connection's logger: the server's, with the client's
// address and, once it has one, the backend pid. It is built for each use
// rather than kept: a connection logs rarely, and a kept logger (a cloned
// handler) would cost each of thousands of idle connections its bytes.
func (c *conn) logger() *slog.Logger {
	l := c.srv.log.With("remote", c.raw.RemoteAddr().String())
	if c.logPID {
		l = l.With("pid", c.pid)
	}
	return l
}

// abort cancels the connection with cause and unblocks it (armDeadlines).
// It replaces a context.AfterFunc on ctx, which would cost each of
// thousands of idle connections its bytes.
//
// A client that hung up (ErrClientGone: the hangup watcher saw its end of
// input, or a write failed) keeps its reads: what it sent before it
// hung up is still read to its end of input, so that a last message in
// error still gets its FATAL (a client may half-close and read on), and
// a read waiting for more sees EOF by itself. Only the statement running
// is canceled, and writes get closeGrace.
func (c *conn) abort(cause error) {
	if c.ctx.Err() != nil {
		return // already canceled, and its deadlines armed
	}
	c.cancelAll(cause)
	if errors.Is(cause, ErrClientGone) {
		c.raw.SetWriteDeadline(time.Now().Add(closeGrace))
		return
	}
	c.armDeadlines()
}

// cancelAll cancels the connection and its running statement, if any,
// with cause: the statement's context, not being a child of the
// connection's, is canceled here (see base). beginStatement checks the
// connection's context under mu after publishing the statement's cancel,
// so a statement that begins concurrently is canceled by one or the
// other.
func (c *conn) cancelAll(cause error) {
	c.cancel(cause)
	c.cancelRunning(cause)
}

// cancelRunning cancels the running statement, if any, with cause, and
// wakes the connection should it be parked in it (park.go).
func (c *conn) cancelRunning(cause error) {
	c.mu.Lock()
	running := c.stmtCancel != nil
	if running {
		c.stmtCancel(cause)
	}
	c.mu.Unlock()
	if running {
		c.wake()
	}
}

// armDeadlines unblocks a canceled connection: reads fail at once, and writes
// get closeGrace to deliver the final error.
func (c *conn) armDeadlines() {
	c.raw.SetReadDeadline(time.Now())
	c.raw.SetWriteDeadline(time.Now().Add(closeGrace))
}

// serveConn is the goroutine of a new connection.
func (s *Server) serveConn(c *conn) { s.runConn(c, false) }

// runConn runs a connection on the calling goroutine, from its start
// (serve) or, resumed after it parked, from the top of its loop (run),
// until it ends or parks again. A connection that ends is closed; one
// that parked is left alone: it may already run on another goroutine.
func (s *Server) runConn(c *conn, resumed bool) {
	ended := true
	defer func() {
		if !ended {
			return
		}
		defer s.wg.Done()
		defer s.forget(c)
		defer c.close()
		// A panic anywhere in the connection (ours or the session's) ends
		// only this connection.
		if r := recover(); r != nil {
			s.panics.Add(1)
			c.logger().Error("pgwire: panic in connection; closing it", "panic", r, "stack", string(debug.Stack()))
			c.fatal(Errorf("XX000", "internal error"))
		}
	}()
	var err error
	if resumed {
		err = c.run()
	} else {
		err = c.serve()
	}
	switch err {
	case errParked:
		ended = false
		return
	case errHandOff:
		ended = false
		go s.runConn(c, true)
		return
	}
	if err != nil {
		c.logger().Debug("pgwire: connection ended", "err", err)
	}
}

// serve runs the connection: startup, authentication, then the message
// loop.
func (c *conn) serve() error {
	if err := sockopt.SetNotSentLowWater(c.raw, c.srv.cfg.NotSentLowWater); err != nil {
		c.logger().Debug("pgwire: TCP_NOTSENT_LOWAT not set", "err", err)
	}
	if ok, err := c.open(); !ok {
		return err
	}
	return c.run()
}

// open runs startup and authentication and opens the session; ok reports
// that the connection goes on to the message loop.
func (c *conn) open() (ok bool, err error) {
	timeout := c.srv.cfg.AuthTimeout
	if c.refused {
		// A refused client gets a second to send its startup message: the
		// connection holds a descriptor from the reserve meanwhile.
		timeout = c.srv.refuseTimeout
	}
	deadline := time.Now().Add(timeout)
	c.raw.SetDeadline(deadline)
	params, err := c.startup()
	if err != nil {
		return false, c.failStartup(err)
	}
	if params == nil {
		return false, nil // a CancelRequest: no reply
	}
	if c.refused {
		return false, c.failStartup(ErrTooManyConnections)
	}
	if err := c.authenticate(params["user"], deadline); err != nil {
		if errors.Is(err, ErrAuthFailed) {
			c.logger().Info("pgwire: authentication failed", "user", params["user"])
		}
		return false, c.failStartup(err)
	}
	if err := c.openSession(params); err != nil {
		return false, c.failStartup(err)
	}

	// Authenticated: no more deadline, and from now on a disconnect is
	// noticed while a statement runs: the server's hangup watcher reports
	// it, or else an input pipe's goroutine reading the socket does.
	c.raw.SetDeadline(time.Time{})
	if c.ctx.Err() != nil {
		c.armDeadlines() // Close raced with the line above
	}
	gone := func() { c.abort(ErrClientGone) }
	if unwatch, ok := c.srv.hangupWatcher().watch(c.raw, gone); ok {
		c.unwatch = unwatch
		c.input = newSockReader(c.ctx, c.nc, c.raw, c.tls, &c.mem)
	} else {
		c.input = newInputPipe(c.ctx, c.nc, &c.mem, func(error) { gone() })
	}
	c.src.r = c.input
	return true, nil
}

// failStartup reports an error of the startup phase as FATAL, where the
// connection can still carry it.
func (c *conn) failStartup(err error) error {
	var silent errSilent
	switch {
	case c.ctx.Err() != nil:
		return c.terminate()
	case errors.As(err, &silent), isDisconnect(err):
	default:
		c.fatal(err)
	}
	return err
}

// run is the message loop of an authenticated connection. A canceled
// connection still handles the messages already buffered (their statements
// see the canceled context and end at once); receive then reports the
// cancellation. It returns errParked when the connection went to sleep
// (park.go); run called again continues it.
func (c *conn) run() error {
	for {
		// A statement's result parked: nothing else runs until its
		// message is done.
		if c.query != nil || c.exec != nil {
			if c.parking {
				c.parking = false
				if c.trySleep() {
					return errParked
				}
			}
			if c.query != nil {
				c.continueQuery()
			} else {
				c.continueExecute()
			}
			continue
		}
		if c.werr != nil {
			return c.werr
		}
		if c.inputErr != nil {
			return c.inputFailed(c.inputErr)
		}
		if c.stopping {
			return c.terminate()
		}
		if c.resumer != nil {
			// The statement that parked is done: the client's next
			// message may take long, and the resumer serves others.
			c.resumer = nil
			return errHandOff
		}
		msg, err := c.receive()
		if err != nil {
			return c.inputFailed(err)
		}
		if c.ignoreTillSync {
			switch msg.(type) {
			case *pgproto3.Sync, *pgproto3.Terminate:
			default:
				continue // Postgres semantics: after an error, skip to Sync
			}
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			c.simpleQuery(m.String)
		case *pgproto3.Parse:
			c.parse(m)
		case *pgproto3.Bind:
			c.bind(m)
		case *pgproto3.Describe:
			c.describe(m)
		case *pgproto3.Execute:
			c.execute(m)
		case *pgproto3.Close:
			c.closeMessage(m)
		case *pgproto3.Sync:
			c.sync()
		case *pgproto3.Flush:
			c.flush()
		case *pgproto3.Terminate:
			return nil
		case *pgproto3.CopyData, *pgproto3.CopyDone, *pgproto3.CopyFail:
			// The rest of a COPY FROM STDIN that failed: dropped, as Postgres
			// does.
		case *pgproto3.FunctionCall:
			c.sendError(Errorf("0A000", "the function call protocol is not supported"))
			c.readyForQuery()
		default:
			err := protocolErrorf("unexpected message type %q", frontendType(msg))
			c.fatal(err)
			return err
		}
	}
}

// inputFailed ends the connection after a failed receive: quietly for a
// client that is gone, with the reason for a canceled connection, and with
// FATAL for a protocol violation (sent even to a client that has half-closed
// its side).
func (c *conn) inputFailed(err error) error {
	canceled := c.ctx.Err() != nil
	if isDisconnect(err) || (canceled && errors.Is(err, context.Cause(c.ctx))) {
		if canceled {
			return c.terminate()
		}
		return err
	}
	c.fatal(err)
	return err
}

// terminate ends a canceled connection, telling the client why when the server
// is shutting down.
func (c *conn) terminate() error {
	cause := context.Cause(c.ctx)
	if errors.Is(cause, ErrServerClosed) {
		c.fatal(ErrServerClosed)
	}
	return cause
}

// close releases everything the connection holds, in order: results and
// portals, statements, the session, the socket, the input.
func (c *conn) close() {
	c.cancelAll(errConnDone)
	if c.srv.pacer != nil {
		c.giveSlot()
	}
	if q := c.query; q != nil {
		// A panic left the query open.
		c.query = nil
		if q.ex != nil {
			c.guard("close result", q.ex.close)
		}
		c.guard("stop query", q.steps.Stop)
	}
	c.exec = nil // its portal closes below
	for name, p := range c.portals {
		delete(c.portals, name)
		c.guard("close portal", p.close)
	}
	for name, ps := range c.stmts {
		delete(c.stmts, name)
		c.guard("close statement", ps.stmt.Close)
	}
	if c.sess != nil {
		c.guard("close session", func() {
			if err := c.sess.Close(); err != nil {
				c.logger().Warn("pgwire: close session", "err", err)
			}
		})
	}
	if c.unwatch != nil {
		c.unwatch() // before the descriptor is closed and may be reused
	}
	c.nc.Close()
	c.raw.Close()
	if c.input != nil {
		c.input.close()
	}
	c.mem.releaseAll()
}

// guard runs a cleanup call of the session, containing a panic in it.
func (c *conn) guard(what string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			c.srv.panics.Add(1)
			c.logger().Error("pgwire: panic in "+what, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	f()
}

// receive reads the next frontend message. A decoder panic in pgproto3 on a
// malformed message becomes a protocol violation.
func (c *conn) receive() (msg pgproto3.FrontendMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			msg, err = nil, protocolErrorf("invalid message format")
		}
	}()
	c.takeBackend()
	msg, err = c.be.Receive()
	if err != nil {
		if c.in.readErr == nil {
			// The bytes arrived but do not decode (pgproto3 even reports
			// some such errors as io.EOF).
			return nil, protocolErrorf("invalid frontend message: %v", err)
		}
		if isDisconnect(err) || c.ctx.Err() != nil {
			return nil, err
		}
		var coded interface{ SQLState() string }
		if !errors.As(err, &coded) {
			err = protocolErrorf("invalid frontend message: %v", err)
		}
		return nil, err
	}
	return msg, nil
}

// isDisconnect reports whether err means the socket is gone: nothing more can
// be sent or received.
func isDisconnect(err error) bool {
	var opErr *net.OpError
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.Is(err, ErrClientGone) || errors.As(err, &opErr)
}

// beginStatement returns the context of a protocol message that runs session
// code, cancelable by CancelRequest, and the function that ends it. It is
// canceled with the connection's cause when the connection is (cancelAll).
func (c *conn) beginStatement() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(c.base)
	c.mu.Lock()
	c.stmtCancel = cancel
	if c.ctx.Err() != nil {
		cancel(context.Cause(c.ctx))
	}
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		c.stmtCancel = nil
		c.mu.Unlock()
		cancel(nil)
	}
}

// cancelStatement cancels the running statement, if any (CancelRequest). It is
// called from the canceling connection's goroutine.
func (c *conn) cancelStatement() { c.cancelRunning(ErrQueryCanceled) }

// sendBufs holds send buffers between flushes: a connection takes one for
// the messages it is about to write and gives it back once they are written,
// so that an idle connection (one of thousands of subscribers waiting for a
// change) holds none, while a streaming one gets the same buffer back flush
// after flush instead of growing a new one.
var sendBufs sync.Pool

// takeOut gives the connection a send buffer if it has none. The pool's
// entry (outBox) stays with the connection while it holds the buffer and
// carries it back, so that a flush allocates nothing: an idle subscriber
// flushes a progress row every second.
func (c *conn) takeOut() {
	if c.out == nil && c.outBox == nil {
		if b, ok := sendBufs.Get().(*[]byte); ok {
			c.out, c.outBox = (*b)[:0], b
		}
	}
}

// releaseOut gives the (written) send buffer back to sendBufs, unless it
// grew past maxRetainedBuffer after a huge row: nothing should keep that.
func (c *conn) releaseOut() {
	if cap(c.out) <= maxRetainedBuffer && cap(c.out) > 0 {
		b := c.outBox
		if b == nil {
			b = new([]byte) // the buffer grew from nothing: the pool was empty
		}
		*b = c.out[:0]
		sendBufs.Put(b)
	}
	c.out, c.outBox = nil, nil
	c.chargeOut()
}

// send appends a message to the send buffer.
func (c *conn) send(msg pgproto3.BackendMessage) {
	c.takeOut()
	out, err := msg.Encode(c.out)
	if err != nil {
		// Only a message over 1 GiB fails to encode.
		c.logger().Error("pgwire: encode message", "type", fmt.Sprintf("%T", msg), "err", err)
		return
	}
	c.out = out
	c.chargeOut()
	if len(c.out) >= flushThreshold {
		c.flush()
	}
}

// reserve makes room in the send buffer for n more bytes (at most
// flushThreshold, past which the buffer is written anyway), so that a
// batch of messages appended one by one grows it once rather than by
// doubling from nothing each time the pool has no buffer to give.
func (c *conn) reserve(n int) {
	if n = min(n, flushThreshold); n == 0 {
		return // nothing to send: an idle connection holds no buffer
	}
	c.takeOut()
	if cap(c.out)-len(c.out) >= n {
		return
	}
	c.out = slices.Grow(c.out, n)
	c.chargeOut()
}

// sendRaw appends an encoded message to the send buffer; a large one is
// written directly rather than copied.
func (c *conn) sendRaw(msg []byte) {
	if len(msg) >= flushThreshold {
		if c.flush() == nil {
			c.write(msg)
		}
		return
	}
	c.takeOut()
	c.out = append(c.out, msg...)
	c.chargeOut()
	if len(c.out) >= flushThreshold {
		c.flush()
	}
}

// chargeOut brings the send buffer's charge in mem up to date after it grew
// or was dropped.
func (c *conn) chargeOut() {
	if d := cap(c.out) - c.outHeld; d != 0 {
		c.mem.add(d)
		c.outHeld = cap(c.out)
	}
}

// flush writes the send buffer to the client.
func (c *conn) flush() error {
	if c.werr != nil {
		c.out = c.out[:0]
		return c.werr
	}
	if len(c.out) == 0 {
		return nil
	}
	c.write(c.out)
	c.releaseOut()
	return c.werr
}

// write writes b to the client; the first failure finishes the connection.
//
// On a resumer it first writes what the socket takes without waiting: if
// the rest would wait for the client to read (a client that stalls, or
// only one slower than the server, TCP_NOTSENT_LOWAT reached), the
// resumer gives its place up (resumers.yield) before it waits, so that
// the connections behind it do not wait for this client too. A large
// write that must wait waits for its turn when the server paces them
// (pacing.go).
func (c *conn) write(b []byte) {
	if c.werr != nil {
		return
	}
	if w := c.resumer; w != nil && !c.tls {
		if !c.rcKnown {
			c.rc, c.rcKnown = rawConnOf(c.raw), true
		}
		if c.rc != nil {
			n, err := w.now.write(c.rc, b)
			if err != nil {
				c.writeFailed(err)
				return
			}
			if b = b[n:]; len(b) == 0 {
				return
			}
			// The rest waits on this goroutine, the connection's own
			// from now on.
			c.resumer = nil
			c.srv.resumers.yield(w)
		}
	}
	// A large write that waits takes its turn (pacing.go).
	if len(b) >= flushThreshold && c.srv.pacer != nil {
		c.takeSlot()
		if !c.slot.inResult {
			defer c.giveSlot()
		}
	}
	if _, err := c.nc.Write(b); err != nil {
		c.writeFailed(err)
	}
}

// writeFailed finishes the connection after a failed write.
func (c *conn) writeFailed(err error) {
	c.werr = err
	c.abort(ErrClientGone)
}

// sendError sends err as an ErrorResponse of severity ERROR.
func (c *conn) sendError(err error) {
	c.send(c.errorResponse(err, "ERROR"))
}

// fatal sends err as an ErrorResponse of severity FATAL and flushes; the
// caller then closes the connection.
func (c *conn) fatal(err error) {
	c.send(c.errorResponse(err, "FATAL"))
	c.flush()
}

// reportError sends the error of a statement. A statement canceled by
// CancelRequest is reported as such whatever error the session returned. When
// the connection itself was canceled (disconnect, shutdown) the statement
// error is not sent, nor the ReadyForQuery after it: a client must not mistake
// a cut-off result for a complete one. The connection ends instead, and
// terminate speaks for it.
func (c *conn) reportError(ctx context.Context, err error) {
	if c.ctx.Err() != nil || c.inputErr != nil {
		c.stopping = true
		return
	}
	if ctx != nil && errors.Is(context.Cause(ctx), ErrQueryCanceled) {
		err = ErrQueryCanceled
	}
	c.sendError(err)
}

// errorResponse maps err to an ErrorResponse: the SQLSTATE, message, detail,
// hint and position of the first error in its chain that has a SQLSTATE, or
// XX000 with the error's text (logged) when none has.
func (c *conn) errorResponse(err error, severity string) *pgproto3.ErrorResponse {
	resp := &pgproto3.ErrorResponse{Severity: severity, SeverityUnlocalized: severity}
	var coded interface {
		error
		SQLState() string
	}
	if !errors.As(err, &coded) || len(coded.SQLState()) != 5 {
		c.logger().Error("pgwire: internal error", "err", err)
		resp.Code = "XX000"
		resp.Message = err.Error()
		return resp
	}
	resp.Code = coded.SQLState()
	resp.Message = coded.Error()
	if d, ok := coded.(interface{ Detail() string }); ok {
		resp.Detail = d.Detail()
	}
	if h, ok := coded.(interface{ Hint() string }); ok {
		resp.Hint = h.Hint()
	}
	if p, ok := coded.(interface{ Position() int }); ok && p.Position() > 0 {
		resp.Position = int32(p.Position())
	}
	return resp
}

// readyForQuery sends ReadyForQuery with the session's transaction status and
// flushes: the client waits for it.
func (c *conn) readyForQuery() {
	if c.stopping {
		return
	}
	c.send(&pgproto3.ReadyForQuery{TxStatus: byte(c.sess.TxStatus())})
	c.flush()
}

// frontendType returns the type byte of a frontend message, for errors.
func frontendType(msg pgproto3.FrontendMessage) byte {
	switch msg.(type) {
	case *pgproto3.Bind:
		return 'B'
	case *pgproto3.Close:
		return 'C'
	case *pgproto3.Describe:
		return 'D'
	case *pgproto3.Execute:
		return 'E'
	case *pgproto3.FunctionCall:
		return 'F'
	case *pgproto3.Flush:
		return 'H'
	case *pgproto3.Parse:
		return 'P'
	case *pgproto3.Query:
		return 'Q'
	case *pgproto3.Sync:
		return 'S'
	case *pgproto3.Terminate:
		return 'X'
	case *pgproto3.CopyData:
		return 'd'
	case *pgproto3.CopyDone:
		return 'c'
	case *pgproto3.CopyFail:
		return 'f'
	case *pgproto3.PasswordMessage, *pgproto3.SASLInitialResponse, *pgproto3.SASLResponse, *pgproto3.GSSResponse:
		return 'p'
	default:
		return '?'
	}
}
