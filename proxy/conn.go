package proxy

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/row"
)

// Config says how a session's connection reaches the upstream server.
type Config struct {
	// Addr is the upstream server's HOST:PORT.
	Addr string
	// User and Password are the client's role and the password it logged
	// in with (or the proxy's configured fallback password).
	User     string
	Password string
	// ApplicationName, when set, is passed on as application_name.
	ApplicationName string
}

// Conn is one client session's connection to the upstream server. A
// session uses it from its own goroutine; the result it returns last may
// still read the connection on a goroutine of its own (a suspended
// portal), which Busy reports.
type Conn struct {
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

// connectTimeout bounds the dial and startup of an upstream connection.
const connectTimeout = 15 * time.Second

// Dial connects to the upstream server as cfg's role. An upstream refusal
// (a bad password, an unknown role) keeps its SQLSTATE; any other failure
// to connect is 08006 naming the upstream.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, errUnavailable(cfg.Addr, err)
	}
	pc, err := pgconn.ParseConfig(fmt.Sprintf("host=%s port=%s dbname=materialize sslmode=disable connect_timeout=10", host, port))
	if err != nil {
		return nil, errUnavailable(cfg.Addr, err)
	}
	// Set, not written into the string above: a role name may hold spaces,
	// quotes or "key=value" text.
	pc.User = cfg.User
	pc.Password = cfg.Password
	if cfg.ApplicationName != "" {
		pc.RuntimeParams["application_name"] = cfg.ApplicationName
	}
	c := &Conn{addr: cfg.Addr}
	pc.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		msg := pgwire.AppendNotice(nil, pgwire.Notice{Severity: n.Severity, Code: n.Code, Message: n.Message, Detail: n.Detail, Hint: n.Hint})
		c.mu.Lock()
		sink := c.sink
		if sink == nil {
			c.notices = append(c.notices, msg)
		}
		c.mu.Unlock()
		if sink != nil {
			sink(msg) // called on the result's reading goroutine: in order with its rows
		}
	}
	// Cancel a proxied statement with a CancelRequest, keeping the
	// connection, as a direct client's cancel would; or close the
	// connection when the session ends, as a direct client's disconnect
	// would.
	ended := new(atomic.Bool)
	pc.DialFunc = noCancelAfterEnd(pc.DialFunc, ended)
	pc.BuildContextWatcherHandler = func(conn *pgconn.PgConn) ctxwatch.Handler {
		return &cancelUpstream{conn: conn, ended: ended}
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := pgconn.ConnectConfig(cctx, pc)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return nil, upstreamError(err)
		}
		return nil, errUnavailable(cfg.Addr, err)
	}
	c.conn = conn
	return c, nil
}

// Begin opens a transaction block upstream, for a connection opened inside
// the client's block: its statements (a cursor over a dataflow-path
// SUBSCRIBE) then run in the same block and end with it.
func (c *Conn) Begin(ctx context.Context) error {
	if _, err := c.conn.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		return upstreamError(err)
	}
	return nil
}

func (c *Conn) setSink(f func([]byte)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sink = f
}

func (c *Conn) takeNotices() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.notices
	c.notices = nil
	return n
}

// Busy reports whether a result still reads the connection.
func (c *Conn) Busy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reading > 0
}

// Lost reports whether the connection is closed or its server has gone.
// pgconn learns that only when it next reads, after the statement has been
// sent and when it is too late to send it elsewhere; so an idle connection
// is checked first, without a round trip: one whose socket has reached
// end of file, or holds an ErrorResponse its server sent while it was idle
// (FATAL, at shutdown), is closed here and reported lost.
func (c *Conn) Lost() bool {
	c.mu.Lock()
	reading := c.reading
	c.mu.Unlock()
	if reading > 0 {
		// Another result is reading the connection: it is not idle, and
		// the statement will find it busy (or closed) by itself.
		return false
	}
	if c.conn.IsClosed() {
		return true
	}
	// pgconn starts a background read when a write is slow (15 ms) and
	// stops it without interrupting the read: left in flight on an idle
	// connection, that read holds the socket, and the peek below would
	// wait for it forever. SyncConn ends such a read with a ping, and
	// returns at once when there is none.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := c.conn.SyncConn(ctx)
	cancel()
	if err != nil || peekLost(c.conn.Conn()) {
		c.Close()
		return true
	}
	return false
}

// Close closes the connection, waiting at most a few seconds for the
// upstream to acknowledge.
func (c *Conn) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.conn.Close(ctx)
}

// error turns an error of this connection into the client's, naming c's
// server.
func (c *Conn) error(err error) error { return upstreamErrorFrom("upstream server "+c.addr, err) }

// Exec runs one statement upstream (simple protocol) and returns its
// result. Multi-result statements are not expected here: the session
// proxies statement by statement (Query runs several at once).
func (c *Conn) Exec(ctx context.Context, sqlText string) (pgwire.Result, error) {
	mrr := c.conn.Exec(ctx, sqlText)
	if !mrr.NextResult() {
		err := mrr.Close()
		if err != nil {
			return nil, c.error(err)
		}
		return emptyResult{}, nil
	}
	return c.newSimpleResult(mrr.ResultReader(), func() { mrr.Close() }), nil
}

// Query runs a multi-statement query upstream as one simple Query, which
// keeps its statements one implicit transaction there, and yields its
// results in order; an error is yielded last.
func (c *Conn) Query(ctx context.Context, text string) iter.Seq2[pgwire.Result, error] {
	return func(yield func(pgwire.Result, error) bool) {
		mrr := c.conn.Exec(ctx, text)
		for mrr.NextResult() {
			if !yield(c.newSimpleResult(mrr.ResultReader(), nil), nil) {
				_ = mrr.Close()
				return
			}
		}
		if err := mrr.Close(); err != nil {
			yield(nil, upstreamError(err))
		}
	}
}

// ExecParams runs a bound extended-protocol statement upstream and returns
// its result, for a portal's Execute; fields is the statement's row
// description (nil for a command). The upstream statement runs under a
// context the result owns, not under ctx: a portal executed with a row
// limit spans several Execute messages, and the end of the first one must
// not cancel the statement (pgconn would send a CancelRequest upstream). A
// cancel of ctx while the statement starts, or of any later Execute while
// it waits for rows, cancels it upstream; so does closing the portal
// before it ends. The cancel carries the cause of the context that caused
// it, so that a client's disconnect reaches the upstream as one
// (cancelUpstream).
func (c *Conn) ExecParams(ctx context.Context, text string, params [][]byte, paramOIDs []uint32,
	paramFormats, resultFormats []int16, fields []pgwire.Field) pgwire.Result {
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	rr := c.conn.ExecParams(rctx, text, params, paramOIDs, paramFormats, resultFormats)
	stop()
	kind := pgwire.ResultCommand
	if fields != nil {
		kind = pgwire.ResultRows
	}
	r := c.newResult(rr, kind, fields, nil)
	r.cancel, r.last = cancel, ctx
	return r
}

// Rows runs a query upstream and returns its rows, parsed as cols (for
// system relations that combine this process's rows with the upstream's).
func (c *Conn) Rows(ctx context.Context, query string, cols []row.Column) ([]row.Row, error) {
	res := c.conn.ExecParams(ctx, query, nil, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, c.error(res.Err)
	}
	rows := make([]row.Row, 0, len(res.Rows))
	for _, vals := range res.Rows {
		if len(vals) != len(cols) {
			return nil, pgwire.Errorf(codeInternal, "upstream %s: %d columns, want %d", query, len(vals), len(cols))
		}
		r := make(row.Row, len(cols))
		for i, v := range vals {
			if v == nil {
				continue
			}
			var err error
			if r[i], err = pgrepr.ParseText(cols[i].Type, string(v)); err != nil {
				return nil, pgwire.Errorf(codeInternal, "upstream %s: column %s: %v", query, cols[i].Name, err)
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// fieldsFromUpstream converts an upstream row description. A statement
// that returns no rows has none (nil: NoData), unlike one that returns rows
// of no columns.
func fieldsFromUpstream(fds []pgconn.FieldDescription) []pgwire.Field {
	if fds == nil {
		return nil
	}
	out := make([]pgwire.Field, len(fds))
	for i, f := range fds {
		out[i] = pgwire.Field{Name: f.Name, TableOID: f.TableOID, TableAttr: f.TableAttributeNumber, TypeOID: f.DataTypeOID,
			TypeSize: f.DataTypeSize, TypeMod: f.TypeModifier, Format: f.Format}
	}
	return out
}
