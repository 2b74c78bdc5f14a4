package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/shardtail/shardtail/pgwire"
)

// A tail process serves fast-path SUBSCRIBEs itself and passes every other
// statement, on the same client session, to the upstream server over one
// connection per session, opened when first needed. The upstream
// connection runs as the client's role; a role that needs a password
// upstream uses SHARDTAIL_UPSTREAM_PASSWORD. Canceling a proxied statement
// sends a CancelRequest upstream.

// upstream is a session's connection to the upstream server.
type upstream struct {
	conn *pgconn.PgConn
	// notices collects the upstream's NoticeResponses for the statement in
	// progress.
	mu      sync.Mutex
	notices [][]byte
}

// errUpstream wraps failures to reach the upstream, with a clear message.
func errUpstream(addr string, err error) error {
	return &Error{Code: "08006", Message: fmt.Sprintf("upstream server %s is unavailable: %v", addr, err),
		Hint_: "fast-path SUBSCRIBEs are still served by this tail process"}
}

// upstream returns the session's upstream connection, connecting it first.
func (s *Session) upstream(ctx context.Context) (*upstream, error) {
	if s.up != nil && !s.up.conn.IsClosed() {
		return s.up, nil
	}
	addr := s.c.cfg.Upstream
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, errUpstream(addr, err)
	}
	cfg, err := pgconn.ParseConfig(fmt.Sprintf("host=%s port=%s user=%s dbname=materialize sslmode=disable connect_timeout=10", host, port, s.user))
	if err != nil {
		return nil, errUpstream(addr, err)
	}
	if pw := os.Getenv("SHARDTAIL_UPSTREAM_PASSWORD"); pw != "" {
		cfg.Password = pw
	}
	if app, _ := s.getVar("application_name"); app != "" {
		cfg.RuntimeParams["application_name"] = app
	}
	up := &upstream{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		up.mu.Lock()
		defer up.mu.Unlock()
		up.notices = append(up.notices, pgwire.AppendNotice(nil, pgwire.Notice{Severity: n.Severity, Code: n.Code, Message: n.Message, Detail: n.Detail, Hint: n.Hint}))
	}
	// Cancel a proxied statement with a CancelRequest, keeping the
	// connection, as a direct client's cancel would.
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 10 * time.Second}
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
	return up, nil
}

func (u *upstream) takeNotices() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := u.notices
	u.notices = nil
	return n
}

func (u *upstream) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u.conn.Close(ctx)
}

// upstreamError turns an upstream error into the client's error, keeping
// its SQLSTATE and fields.
func upstreamError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return &Error{Code: pe.Code, Message: pe.Message, Detail_: pe.Detail, Hint_: pe.Hint}
	}
	if errors.Is(err, context.Canceled) {
		return pgwire.ErrQueryCanceled
	}
	return &Error{Code: "08006", Message: fmt.Sprintf("upstream connection lost: %v", err)}
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
// client.
type proxiedResult struct {
	u      *upstream
	rr     *pgconn.ResultReader
	fields []pgwire.Field
	kind   pgwire.ResultKind
	tag    string
	done   bool
	buf    []byte
	onDone func()
}

func (r *proxiedResult) Describe() pgwire.Description {
	return pgwire.Description{Kind: r.kind, Fields: r.fields}
}

func (r *proxiedResult) Next(ctx context.Context) ([][]byte, error) {
	if r.done {
		return nil, io.EOF
	}
	var msgs [][]byte
	r.buf = r.buf[:0]
	var ends []int
	for len(ends) < 256 && r.rr.NextRow() {
		r.buf = pgwire.AppendDataRow(r.buf, r.rr.Values())
		ends = append(ends, len(r.buf))
	}
	start := 0
	for _, e := range ends {
		msgs = append(msgs, r.buf[start:e:e])
		start = e
	}
	if len(ends) < 256 {
		tag, err := r.rr.Close()
		r.done = true
		if r.onDone != nil {
			r.onDone()
		}
		if err != nil {
			return nil, upstreamError(err)
		}
		r.tag = tag.String()
	}
	msgs = append(r.u.takeNotices(), msgs...)
	if len(msgs) == 0 && r.done {
		return nil, io.EOF
	}
	return msgs, nil
}

func (r *proxiedResult) Tag() string { return r.tag }

func (r *proxiedResult) Close() {
	if !r.done {
		r.rr.Close()
		r.done = true
		if r.onDone != nil {
			r.onDone()
		}
	}
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
			return nil, upstreamError(err)
		}
		return emptyResult{}, nil
	}
	rr := mrr.ResultReader()
	res := &proxiedResult{u: u, rr: rr, kind: pgwire.ResultCommand, onDone: func() { mrr.Close() }}
	if fds := rr.FieldDescriptions(); fds != nil {
		res.kind = pgwire.ResultRows
		res.fields = fieldsFromUpstream(fds)
	}
	return res, nil
}

// proxyCopyOut streams COPY ... TO STDOUT from upstream.
func (s *Session) proxyCopyOut(ctx context.Context, sqlText string, fields []pgwire.Field, format int16) (pgwire.Result, error) {
	u, err := s.upstream(ctx)
	if err != nil {
		return nil, err
	}
	ch := make(chan []byte, 64)
	res := &proxiedCopyOut{ch: ch, fields: fields, format: format, done: make(chan struct{})}
	cctx, cancel := context.WithCancel(ctx)
	res.cancel = cancel
	go func() {
		defer close(res.done)
		tag, err := u.conn.CopyTo(cctx, chanWriter(ch), sqlText)
		close(ch)
		res.tag, res.err = tag.String(), err
	}()
	return res, nil
}

// chanWriter sends each Write (one CopyData payload) to a channel.
type chanWriter chan []byte

func (w chanWriter) Write(p []byte) (int, error) {
	w <- append([]byte(nil), p...)
	return len(p), nil
}

type proxiedCopyOut struct {
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
			return nil, upstreamError(r.err)
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
		return upstreamError(err)
	}
	r.tag = tag.String()
	return nil
}

func (r *proxiedCopyIn) Next(ctx context.Context) ([][]byte, error) { return nil, io.EOF }
func (r *proxiedCopyIn) Tag() string                                { return r.tag }
func (r *proxiedCopyIn) Close()                                     {}
