package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/row"
)

// A tail process serves fast-path SUBSCRIBEs itself and passes every other
// statement, on the same client session, to the upstream server over one
// connection per session, opened when first needed. The upstream
// connection runs as the client's role with the password the client logged
// in with (a tail asks for it in clear text, see Config.Upstream), or else
// the tail's configured UpstreamPassword. Canceling a proxied statement
// sends a CancelRequest upstream.

// upstream is a session's connection to the upstream server.
type upstream struct {
	conn *pgconn.PgConn
	addr string // the upstream server's, for error messages
	// notices collects the upstream's NoticeResponses that arrive while no
	// result is streaming; sink, when set, receives them in order with the
	// rows of the result in progress.
	mu      sync.Mutex
	notices [][]byte
	sink    func([]byte)
	// reading counts the results whose goroutine still reads conn (a
	// suspended portal's); mu must be held.
	reading int
}

// errUpstream wraps failures to reach the upstream, with a clear message.
func errUpstream(addr string, err error) error {
	return &Error{Code: "08006", Message: fmt.Sprintf("upstream server %s is unavailable: %v", addr, err),
		hint: "fast-path SUBSCRIBEs are still served by this tail process"}
}

var errUpstreamLostInBlock = &Error{Code: "08006",
	Message: "the connection to the upstream server was lost inside this transaction block, which it rolled back",
	hint:    "ROLLBACK, then run the transaction again."}

// upstream returns the session's upstream connection, connecting it first.
func (s *Session) upstream(ctx context.Context) (*upstream, error) {
	if s.up != nil && s.up.busy() {
		return nil, errUpstreamBusy
	}
	if s.up != nil && !s.up.lost() {
		return s.up, nil
	}
	if s.up != nil && s.inBlock() {
		// The upstream had joined this transaction block and rolled it
		// back when its connection was lost: a new connection must not
		// carry on with the rest of the block as if it were whole.
		return nil, errUpstreamLostInBlock
	}
	// Lost outside a block: forget it, whether or not a new one connects,
	// so that statements on both sides (BEGIN) run here alone while the
	// upstream is away.
	s.up = nil
	if s.tx == txFailed {
		// A new connection would run the statement outside the failed
		// block, as if it had not failed.
		return nil, errInFailedTx
	}
	addr := s.c.cfg.Upstream
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, errUpstream(addr, err)
	}
	cfg, err := pgconn.ParseConfig(fmt.Sprintf("host=%s port=%s dbname=materialize sslmode=disable connect_timeout=10", host, port))
	if err != nil {
		return nil, errUpstream(addr, err)
	}
	// Set, not written into the string above: a role name may hold spaces,
	// quotes or "key=value" text.
	cfg.User = s.user
	cfg.Password = s.password
	if cfg.Password == "" {
		cfg.Password = s.c.cfg.UpstreamPassword
	}
	if app, _ := s.getVar("application_name"); app != "" {
		cfg.RuntimeParams["application_name"] = app
	}
	up := &upstream{addr: addr}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		msg := pgwire.AppendNotice(nil, pgwire.Notice{Severity: n.Severity, Code: n.Code, Message: n.Message, Detail: n.Detail, Hint: n.Hint})
		up.mu.Lock()
		sink := up.sink
		if sink == nil {
			up.notices = append(up.notices, msg)
		}
		up.mu.Unlock()
		if sink != nil {
			sink(msg) // called on the result's reading goroutine: in order with its rows
		}
	}
	// Cancel a proxied statement with a CancelRequest, keeping the
	// connection, as a direct client's cancel would.
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &cancelUpstream{conn: pc}
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := pgconn.ConnectConfig(cctx, cfg)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return nil, upstreamError(err)
		}
		return nil, errUpstream(addr, err)
	}
	up.conn = conn
	s.up = up
	// Opened inside a transaction block: the upstream joins it, so that
	// its statements (a cursor over a dataflow-path SUBSCRIBE) run in the
	// same block and end with it.
	if s.inBlock() {
		if _, err := conn.Exec(ctx, "BEGIN").ReadAll(); err != nil {
			return nil, upstreamError(err)
		}
	}
	return up, nil
}

// hasUpstream reports whether the session has an upstream connection for
// its statements on both sides (transaction control, SET) to go to as
// well. A connection found lost outside a transaction block is dropped
// first, so that BEGIN runs here alone while the upstream is away (the
// upstream joins the block when a statement needs it); one lost inside a
// block is kept, so that the block's statements fail with
// errUpstreamLostInBlock until it ends.
func (s *Session) hasUpstream() bool {
	if s.up != nil && !s.inBlock() && s.up.lost() {
		s.up = nil
	}
	return s.up != nil
}

// Timing of cancelUpstream.
const (
	// cancelRetry is how often a canceled statement that still runs is
	// canceled again.
	cancelRetry = 500 * time.Millisecond
	// cancelSettle is how long a CancelRequest is given to reach the
	// statement before the connection runs another one: the server may
	// deliver it after closing the cancel connection (PostgreSQL signals
	// the backend), and it must not cancel the next statement.
	cancelSettle = 100 * time.Millisecond
	// cancelGiveUp is how long a canceled statement may run on before the
	// connection's deadline ends it, and the connection with it.
	cancelGiveUp = 10 * time.Second
)

// cancelUpstream is the pgconn context watcher of an upstream connection:
// when a proxied statement's context is canceled, it sends a CancelRequest
// upstream, and sends it again every cancelRetry until the statement ends.
// pgconn's CancelRequestContextWatcherHandler sends one only, and a
// CancelRequest that reaches the upstream before the statement has started
// there is lost, as in PostgreSQL (the tail forwards the client's cancel at
// once, possibly while its statement is still on the wire); the client's
// own retries stop at the tail, whose statement is already canceled. After
// cancelGiveUp the connection's deadline ends the statement and the
// connection.
type cancelUpstream struct {
	conn *pgconn.PgConn
	stop chan struct{}
	done chan struct{}
}

// HandleCancel implements ctxwatch.Handler.
func (h *cancelUpstream) HandleCancel(context.Context) {
	h.stop, h.done = make(chan struct{}), make(chan struct{})
	deadline := time.Now().Add(cancelGiveUp)
	h.conn.Conn().SetDeadline(deadline)
	go func() {
		defer close(h.done)
		for {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			h.conn.CancelRequest(ctx)
			cancel()
			time.Sleep(cancelSettle)
			select {
			case <-h.stop:
				return
			case <-time.After(cancelRetry - cancelSettle):
			}
			if time.Now().After(deadline) {
				<-h.stop
				return
			}
		}
	}()
}

// HandleUnwatchAfterCancel implements ctxwatch.Handler: the statement has
// ended; no CancelRequest of it is in flight once this returns.
func (h *cancelUpstream) HandleUnwatchAfterCancel() {
	close(h.stop)
	<-h.done
	h.conn.Conn().SetDeadline(time.Time{})
}

func (u *upstream) setSink(f func([]byte)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sink = f
}

func (u *upstream) takeNotices() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := u.notices
	u.notices = nil
	return n
}

// lost reports whether the connection is closed or its server has gone.
// pgconn learns that only when it next reads, after the statement has been
// sent and when it is too late to send it elsewhere; so an idle connection
// is checked first, without a round trip: one whose socket has reached
// end of file, or holds an ErrorResponse its server sent while it was idle
// (FATAL, at shutdown), is closed here and reported lost.
// errUpstreamBusy is the error of a statement that needs the upstream
// while a suspended portal of the session still streams from it.
var errUpstreamBusy = &Error{Code: codeFeatureNotSupp,
	Message: "a tail process runs one upstream statement per session at a time, and a suspended portal is still reading",
	hint:    "Fetch the portal to its end or close it first."}

// busy reports whether a result still reads the connection.
func (u *upstream) busy() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.reading > 0
}

func (u *upstream) lost() bool {
	u.mu.Lock()
	reading := u.reading
	u.mu.Unlock()
	if reading > 0 {
		// Another result is reading the connection: it is not idle, and
		// the statement will find it busy (or closed) by itself.
		return false
	}
	if u.conn.IsClosed() {
		return true
	}
	// pgconn starts a background read when a write is slow (15 ms) and
	// stops it without interrupting the read: left in flight on an idle
	// connection, that read holds the socket, and the peek below would
	// wait for it forever. SyncConn ends such a read with a ping, and
	// returns at once when there is none.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := u.conn.SyncConn(ctx)
	cancel()
	if err != nil || peekLost(u.conn.Conn()) {
		u.close()
		return true
	}
	return false
}

func (u *upstream) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u.conn.Close(ctx)
}

// upstreamError turns an upstream error into the client's error, keeping
// its SQLSTATE and fields.
func upstreamError(err error) error { return upstreamErrorFrom("the upstream server", err) }

// error is upstreamError naming u's server.
func (u *upstream) error(err error) error { return upstreamErrorFrom("upstream server "+u.addr, err) }

// upstreamErrorFrom turns an error of the upstream server who into the
// client's error. A statement's error keeps its SQLSTATE and fields. The
// loss of the connection, and a FATAL or PANIC error that ends it (57P01
// at the upstream's shutdown), are 08006: they end the tail's connection
// to the upstream, not the client's to the tail, and the client must not
// take them for its own.
func upstreamErrorFrom(who string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if pe.Severity == "FATAL" || pe.Severity == "PANIC" {
			return &Error{Code: "08006", Message: fmt.Sprintf("%s closed the connection: %s", who, pe.Message),
				hint: "fast-path SUBSCRIBEs are still served by this tail process"}
		}
		return &Error{Code: pe.Code, Message: pe.Message, detail: pe.Detail, hint: pe.Hint}
	}
	if errors.Is(err, context.Canceled) {
		return pgwire.ErrQueryCanceled
	}
	return &Error{Code: "08006", Message: fmt.Sprintf("lost the connection to %s: %v", who, err),
		hint: "fast-path SUBSCRIBEs are still served by this tail process"}
}

func fieldsFromUpstream(fds []pgconn.FieldDescription) []pgwire.Field {
	out := make([]pgwire.Field, len(fds))
	for i, f := range fds {
		out[i] = pgwire.Field{Name: f.Name, TableOID: f.TableOID, TableAttr: f.TableAttributeNumber, TypeOID: f.DataTypeOID,
			TypeSize: f.DataTypeSize, TypeMod: f.TypeModifier, Format: f.Format}
	}
	return out
}

// proxiedResult streams one upstream result (rows or a command) to the
// client. A goroutine reads the upstream's rows as they arrive, so a
// streaming statement (SUBSCRIBE) reaches the client row by row while bulk
// results still travel in large batches.
type proxiedResult struct {
	u      *upstream
	fields []pgwire.Field
	kind   pgwire.ResultKind
	msgs   chan []byte // DataRows and NoticeResponses, in upstream order
	done   chan struct{}
	tag    string
	err    error
	onDone func()
	closed bool
	pre    [][]byte
	// cancel, when set, cancels the context the upstream statement runs
	// under, which the result owns (proxyExecParams): Next links it to
	// the context of each call, and Close cancels a statement that has
	// not ended.
	cancel context.CancelFunc
}

func newProxiedResult(u *upstream, rr *pgconn.ResultReader, kind pgwire.ResultKind, fields []pgwire.Field, onDone func()) *proxiedResult {
	r := &proxiedResult{u: u, fields: fields, kind: kind, msgs: make(chan []byte, 1024), done: make(chan struct{}), onDone: onDone,
		pre: u.takeNotices()}
	u.setSink(func(m []byte) { r.msgs <- m })
	u.mu.Lock()
	u.reading++
	u.mu.Unlock()
	go func() {
		defer close(r.done)
		defer func() {
			u.mu.Lock()
			u.reading--
			u.mu.Unlock()
		}()
		for rr.NextRow() {
			r.msgs <- pgwire.AppendDataRow(nil, rr.Values())
		}
		tag, err := rr.Close()
		r.tag, r.err = tag.String(), err
		if r.onDone != nil {
			r.onDone()
		}
		u.setSink(nil)
		close(r.msgs)
	}()
	return r
}

func (r *proxiedResult) Describe() pgwire.Description {
	return pgwire.Description{Kind: r.kind, Fields: r.fields}
}

func (r *proxiedResult) Next(ctx context.Context) ([][]byte, error) {
	if r.cancel != nil {
		defer context.AfterFunc(ctx, r.cancel)()
	}
	if len(r.pre) > 0 {
		pre := r.pre
		r.pre = nil
		return pre, nil
	}
	var out [][]byte
	select {
	case m, ok := <-r.msgs:
		if !ok {
			<-r.done
			if r.err != nil {
				return nil, r.u.error(r.err)
			}
			return nil, io.EOF
		}
		out = append(out, m)
	case <-ctx.Done():
		// The cancel has gone upstream (pgconn sends a CancelRequest);
		// what the upstream sent before it, and its error, follow.
		select {
		case m, ok := <-r.msgs:
			if ok {
				return [][]byte{m}, nil
			}
			<-r.done
			if r.err != nil {
				return nil, r.u.error(r.err)
			}
			return nil, pgwire.ErrQueryCanceled
		case <-time.After(10 * time.Second):
			return nil, pgwire.ErrQueryCanceled
		}
	}
	for len(out) < 1024 {
		select {
		case m, ok := <-r.msgs:
			if !ok {
				return out, nil
			}
			out = append(out, m)
			continue
		default:
		}
		break
	}
	return out, nil
}

func (r *proxiedResult) Tag() string { return r.tag }

// Close waits for the upstream to finish the statement (a canceled client
// context has already made pgconn send a CancelRequest upstream).
func (r *proxiedResult) Close() {
	if r.closed {
		return
	}
	r.closed = true
	if r.cancel != nil {
		// A portal closed before its statement ended (a suspended
		// SUBSCRIBE): cancel it upstream. After the end this is a no-op.
		defer r.cancel()
		select {
		case <-r.done:
		default:
			r.cancel()
		}
	}
	go func() {
		for range r.msgs {
		}
	}()
	<-r.done
}

// proxyExec runs one statement upstream (simple protocol) and returns its
// result. Multi-result statements are not expected here: the session
// proxies statement by statement.
func (s *Session) proxyExec(ctx context.Context, sqlText string) (pgwire.Result, error) {
	u, err := s.upstream(ctx)
	if err != nil {
		return nil, err
	}
	mrr := u.conn.Exec(ctx, sqlText)
	if !mrr.NextResult() {
		err := mrr.Close()
		if err != nil {
			return nil, u.error(err)
		}
		return emptyResult{}, nil
	}
	return newUpstreamResult(u, mrr.ResultReader(), func() { mrr.Close() }), nil
}

// proxyExecParams runs a bound extended-protocol statement upstream and
// returns its result, for a portal's Execute. The upstream statement runs
// under a context the result owns, not under ctx: a portal executed with a
// row limit spans several Execute messages, and the end of the first one
// must not cancel the statement (pgconn would send a CancelRequest
// upstream). A cancel of ctx while the statement starts, or of any later
// Execute while it waits for rows, cancels it upstream; so does closing
// the portal before it ends.
func (s *Session) proxyExecParams(ctx context.Context, text string, params [][]byte, paramOIDs []uint32,
	paramFormats, resultFormats []int16, fields []pgwire.Field) (pgwire.Result, error) {
	u, err := s.upstream(ctx)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	rr := u.conn.ExecParams(rctx, text, params, paramOIDs, paramFormats, resultFormats)
	stop()
	kind := pgwire.ResultCommand
	if fields != nil {
		kind = pgwire.ResultRows
	}
	r := newProxiedResult(u, rr, kind, fields, nil)
	r.cancel = cancel
	return r, nil
}

// newUpstreamResult streams one result of an upstream simple Query.
func newUpstreamResult(u *upstream, rr *pgconn.ResultReader, onDone func()) *proxiedResult {
	kind, fields := pgwire.ResultCommand, []pgwire.Field(nil)
	if fds := rr.FieldDescriptions(); fds != nil {
		kind, fields = pgwire.ResultRows, fieldsFromUpstream(fds)
	}
	return newProxiedResult(u, rr, kind, fields, onDone)
}

// upstreamRows runs a query upstream and returns its rows, parsed as cols.
func (s *Session) upstreamRows(ctx context.Context, query string, cols []row.Column) ([]row.Row, error) {
	u, err := s.upstream(ctx)
	if err != nil {
		return nil, err
	}
	res := u.conn.ExecParams(ctx, query, nil, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, u.error(res.Err)
	}
	rows := make([]row.Row, 0, len(res.Rows))
	for _, vals := range res.Rows {
		if len(vals) != len(cols) {
			return nil, errorf(codeInternal, "upstream %s: %d columns, want %d", query, len(vals), len(cols))
		}
		r := make(row.Row, len(cols))
		for i, v := range vals {
			if v == nil {
				continue
			}
			if r[i], err = pgrepr.ParseText(cols[i].Type, string(v)); err != nil {
				return nil, errorf(codeInternal, "upstream %s: column %s: %v", query, cols[i].Name, err)
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// proxyCopyOut streams COPY ... TO STDOUT from upstream.
func (s *Session) proxyCopyOut(ctx context.Context, sqlText string, fields []pgwire.Field, format int16) (pgwire.Result, error) {
	u, err := s.upstream(ctx)
	if err != nil {
		return nil, err
	}
	ch := make(chan []byte, 64)
	res := &proxiedCopyOut{u: u, ch: ch, fields: fields, format: format, done: make(chan struct{})}
	cctx, cancel := context.WithCancel(ctx)
	res.cancel = cancel
	go func() {
		defer close(res.done)
		tag, err := u.conn.CopyTo(cctx, chanWriter(ch), sqlText)
		res.tag, res.err = tag.String(), err
		close(ch)
	}()
	// Wait for the COPY to start (its first data) or fail, so that an
	// error reaches the client instead of a CopyOutResponse.
	select {
	case data, ok := <-ch:
		if !ok {
			<-res.done
			if res.err != nil {
				cancel()
				return nil, u.error(res.err)
			}
		} else {
			res.first = data
		}
	case <-ctx.Done():
		cancel()
		<-res.done
		return nil, pgwire.ErrQueryCanceled
	}
	return res, nil
}

// chanWriter sends each Write (one CopyData payload) to a channel.
type chanWriter chan []byte

func (w chanWriter) Write(p []byte) (int, error) {
	w <- append([]byte(nil), p...)
	return len(p), nil
}

type proxiedCopyOut struct {
	u      *upstream
	first  []byte
	ch     chan []byte
	fields []pgwire.Field
	format int16
	cancel context.CancelFunc
	done   chan struct{}
	tag    string
	err    error
}

func (r *proxiedCopyOut) Describe() pgwire.Description {
	return pgwire.Description{Kind: pgwire.ResultCopyOut, Fields: r.fields, CopyFormat: r.format}
}

func (r *proxiedCopyOut) Next(ctx context.Context) ([][]byte, error) {
	if r.first != nil {
		first := r.first
		r.first = nil
		return [][]byte{pgwire.AppendCopyData(nil, first)}, nil
	}
	var data []byte
	var ok bool
	select {
	case <-ctx.Done():
		r.cancel()
		<-r.done
		return nil, pgwire.ErrQueryCanceled
	case data, ok = <-r.ch:
	}
	if !ok {
		<-r.done
		if r.err != nil {
			return nil, r.u.error(r.err)
		}
		return nil, io.EOF
	}
	msgs := [][]byte{pgwire.AppendCopyData(nil, data)}
	for len(msgs) < 256 {
		select {
		case data, ok := <-r.ch:
			if !ok {
				return msgs, nil
			}
			msgs = append(msgs, pgwire.AppendCopyData(nil, data))
			continue
		default:
		}
		break
	}
	return msgs, nil
}

func (r *proxiedCopyOut) Tag() string { return r.tag }

func (r *proxiedCopyOut) Close() {
	r.cancel()
	go func() {
		for range r.ch {
		}
	}()
	<-r.done
}

// proxiedCopyIn forwards COPY ... FROM STDIN upstream.
type proxiedCopyIn struct {
	s      *Session
	sql    string
	fields []pgwire.Field
	format int16
	tag    string
}

func (r *proxiedCopyIn) Describe() pgwire.Description {
	return pgwire.Description{Kind: pgwire.ResultCopyIn, Fields: r.fields, CopyFormat: r.format}
}

func (r *proxiedCopyIn) CopyIn(ctx context.Context, in io.Reader) error {
	u, err := r.s.upstream(ctx)
	if err != nil {
		return err
	}
	tag, err := u.conn.CopyFrom(ctx, in, r.sql)
	if err != nil {
		return u.error(err)
	}
	r.tag = tag.String()
	return nil
}

func (r *proxiedCopyIn) Next(ctx context.Context) ([][]byte, error) { return nil, io.EOF }
func (r *proxiedCopyIn) Tag() string                                { return r.tag }
func (r *proxiedCopyIn) Close()                                     {}
