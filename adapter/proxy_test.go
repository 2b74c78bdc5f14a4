package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/pgwire"
)

// Proxy (tail) processes, in-process: an upstream server (role all) and a proxy
// process (adapter.Config.Upstream) on the same in-memory storage, with
// pgx clients on the proxy. A cancel reaches whichever side runs the
// statement; the proxy keeps serving the fast path without its upstream and
// its sessions reconnect when the upstream returns; the client's password
// passes through to the upstream; prepared transaction control and SETs
// take effect on both sides.

// proxyPair is an upstream server and a proxy process in front of it.
type proxyPair struct {
	blob   persist.Blob
	cons   persist.Consensus
	upOpts testserver.Options
	up     *testserver.Server
	proxy  *testserver.Server
}

// startProxyPair starts an upstream with upOpts and a proxy with proxyOpts,
// both on one fresh in-memory storage.
func startProxyPair(t testing.TB, upOpts, proxyOpts testserver.Options) *proxyPair {
	t.Helper()
	p := &proxyPair{blob: blobmem.New(), cons: consmem.New()}
	upOpts.Blob, upOpts.Consensus = p.blob, p.cons
	p.upOpts = upOpts
	p.up = testserver.Start(t, upOpts)
	proxyOpts.Blob, proxyOpts.Consensus = p.blob, p.cons
	addr, tune := p.up.Addr, proxyOpts.Adapter
	proxyOpts.Adapter = func(c *adapter.Config) {
		c.Upstream = addr
		if tune != nil {
			tune(c)
		}
	}
	p.proxy = testserver.Start(t, proxyOpts)
	return p
}

// restartUpstream starts the upstream again where the proxy expects it: on
// its stopped predecessor's address and storage.
func (p *proxyPair) restartUpstream(t testing.TB) {
	t.Helper()
	opts := p.upOpts
	opts.Listen = p.up.Addr
	p.up.Stop()
	p.up = testserver.Start(t, opts)
}

// checkGoroutines fails t if goroutines of shardtail or pgx that were not
// running when it was called still run once t's cleanups (servers,
// connections, registered later so run earlier) are done. Call it first.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := len(ourGoroutines())
	t.Cleanup(func() {
		var now []string
		deadline := time.Now().Add(20 * time.Second)
		for {
			if now = ourGoroutines(); len(now) <= before || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if len(now) > before {
			t.Errorf("%d goroutines of ours were running before the test and %d after:\n\n%s", before, len(now), strings.Join(now, "\n\n"))
		}
	})
}

// ourGoroutines returns the stacks of the goroutines running shardtail or
// pgx code, other than the caller's.
func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "adapter_test.ourGoroutines") || strings.Contains(g, "testing.tRunner") {
			continue
		}
		if strings.Contains(g, "github.com/shardtail/shardtail/") || strings.Contains(g, "github.com/jackc/") {
			out = append(out, g)
		}
	}
	return out
}

// runningSubscribes returns the paths ("fast", "dataflow") of the
// subscribes server s runs itself, one entry per subscribe, from its
// shardtail_subscribes gauge.
func runningSubscribes(t testing.TB, s *testserver.Server) []string {
	t.Helper()
	mfs, err := s.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, mf := range mfs {
		if mf.GetName() != "shardtail_subscribes" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "path" {
					for range int(m.GetGauge().GetValue()) {
						out = append(out, l.GetValue())
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// subscribes returns where p's subscribes run: "up:PATH" on the
// upstream, "proxy:PATH" on the proxy.
func (p *proxyPair) subscribes(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, path := range runningSubscribes(t, p.up) {
		out = append(out, "up:"+path)
	}
	for _, path := range runningSubscribes(t, p.proxy) {
		out = append(out, "proxy:"+path)
	}
	return out
}

// TestProxyCancel: a CancelRequest, or pg_cancel_backend from another
// session on the same proxy, ends a long-running statement wherever it runs
// (proxied to the upstream: a dataflow-path SUBSCRIBE, a FETCH from a
// proxied cursor; on the proxy: a fast-path SUBSCRIBE, one of a query (a
// shape) and a FETCH from its cursor) with 57014; the statement ends on the side
// that ran it, and the session stays usable for proxied and local
// statements, twice in a row.
func TestProxyCancel(t *testing.T) {
	checkGoroutines(t)
	p := startProxyPair(t, testserver.Options{}, testserver.Options{})
	admin := connectMode(t, p.proxy, pgx.QueryExecModeSimpleProtocol)
	execT(t, admin, "CREATE TABLE t (a int8)", "INSERT INTO t VALUES (1)", "CREATE TABLE log (a int8)")

	type statement struct {
		name  string
		setup []string // run first
		query string   // the statement to cancel
		// streams: the statement returns rows before it blocks; the cancel
		// comes after the first. Otherwise it blocks at once.
		streams bool
		after   []string // run after the cancel (end the block)
		where   string   // where it runs: "up:dataflow" or "proxy:fast"
	}
	stmts := []statement{
		{name: "DataflowPath", setup: []string{"SET enable_subscribe_persist_fast_path = false"}, query: "SUBSCRIBE t", streams: true, where: "up:dataflow"},
		{name: "SubscribeQuery", query: "SUBSCRIBE (SELECT a FROM t WHERE a > 0)", streams: true, where: "proxy:fast"},
		{name: "ProxiedCursor", setup: []string{"SET enable_subscribe_persist_fast_path = false", "BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE (SELECT a FROM t)", "FETCH ALL c"},
			query: "FETCH ALL c WITH (timeout = '120s')", after: []string{"ROLLBACK"}, where: "up:dataflow"},
		{name: "FastPath", query: "SUBSCRIBE t", streams: true, where: "proxy:fast"},
		{name: "FastPathCursor", setup: []string{"BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE t", "FETCH ALL c"},
			query: "FETCH ALL c WITH (timeout = '120s')", after: []string{"ROLLBACK"}, where: "proxy:fast"},
	}
	// Each way to cancel returns the function that cancels c's statement;
	// it runs on another goroutine.
	cancels := []struct {
		name string
		way  func(t *testing.T, c *pgx.Conn) func()
	}{
		{"CancelRequest", func(t *testing.T, c *pgx.Conn) func() {
			return func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := c.PgConn().CancelRequest(ctx); err != nil {
					t.Errorf("CancelRequest: %v", err)
				}
			}
		}},
		{"PgCancelBackend", func(t *testing.T, c *pgx.Conn) func() {
			other := connectMode(t, p.proxy, pgx.QueryExecModeSimpleProtocol)
			q := fmt.Sprintf("SELECT pg_cancel_backend(%d)", c.PgConn().PID())
			return func() {
				got, err := tryQueryRows(other, q)
				if err != nil || !reflect.DeepEqual(got, []string{"true"}) {
					t.Errorf("%s: %q, %v; want true", q, got, err)
				}
			}
		}},
	}
	modes := []struct {
		name string
		mode pgx.QueryExecMode
	}{{"Simple", pgx.QueryExecModeSimpleProtocol}, {"Extended", pgx.QueryExecModeCacheStatement}}

	n := 0
	for _, st := range stmts {
		for _, cn := range cancels {
			for _, m := range modes {
				t.Run(st.name+"/"+cn.name+"/"+m.name, func(t *testing.T) {
					c := connectMode(t, p.proxy, m.mode)
					cancel := cn.way(t, c)
					for round := range 2 {
						// The setup runs in the simple protocol: a DECLARE
						// prepared once and executed again registers the
						// cursor planDeclare made at Parse, whose subscription
						// has ended, and FETCH then waits forever (on any
						// server, not only through a proxy).
						execT(t, c, st.setup...)
						// While it runs, the statement is where it belongs.
						running := func() {
							if got, want := p.subscribes(t), []string{st.where}; !reflect.DeepEqual(got, want) {
								t.Errorf("round %d: running subscribes: %q, want %q", round, got, want)
							}
						}
						err := runCanceled(t, c, st.query, st.streams, running, cancel)
						wantCode(t, err, "57014", fmt.Sprintf("round %d: %s canceled", round, st.query))
						execIn(t, c, m.mode, st.after...)
						// The statement has ended where it ran.
						if err := waitFor(30*time.Second, func() error {
							if got := p.subscribes(t); len(got) != 0 {
								return fmt.Errorf("subscribes still running: %q", got)
							}
							return nil
						}); err != nil {
							t.Fatalf("round %d: after the cancel: %v", round, err)
						}
						// The session goes on: proxied and local statements.
						n++
						execIn(t, c, m.mode, fmt.Sprintf("INSERT INTO log VALUES (%d)", n))
						if got := queryRows(t, c, fmt.Sprintf("SELECT a FROM log WHERE a = %d", n)); !reflect.DeepEqual(got, []string{fmt.Sprint(n)}) {
							t.Fatalf("round %d: proxied SELECT after the cancel: %q", round, got)
						}
						if got := queryRows(t, c, "SELECT 1"); !reflect.DeepEqual(got, []string{"1"}) {
							t.Fatalf("round %d: local SELECT after the cancel: %q", round, got)
						}
					}
				})
			}
		}
	}
}

// execT runs statements one by one, each within a minute, and fails on
// the first error.
func execT(t testing.TB, c *pgx.Conn, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := c.Exec(ctx, q)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// execIn runs statements on c in the protocol of mode: pgx's Exec without
// arguments always uses the simple protocol, its Query the one asked for.
func execIn(t testing.TB, c *pgx.Conn, mode pgx.QueryExecMode, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		rows, err := c.Query(ctx, q, mode)
		if err == nil {
			rows.Close()
			err = rows.Err()
		}
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// runCanceled runs query on c. Once it runs (after its first row when it
// streams, else once it is sent), it calls running, then cancel, and
// cancel again every 100 ms until the query ends: a cancel that arrives
// before the statement starts is lost, as in PostgreSQL. It returns the
// query's error.
func runCanceled(t *testing.T, c *pgx.Conn, query string, streams bool, running, cancel func()) error {
	t.Helper()
	ctx, stop := context.WithTimeout(context.Background(), 90*time.Second)
	defer stop()
	done := make(chan struct{})
	var wg sync.WaitGroup
	start := func() {
		running()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				cancel()
				select {
				case <-done:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	if !streams {
		start() // the cancels go out while pgx waits for the result
	}
	rows, err := c.Query(ctx, query)
	if err == nil {
		first := true
		for rows.Next() {
			if first && streams {
				start()
			}
			first = false
		}
		rows.Close()
		err = rows.Err()
		if streams && first {
			t.Errorf("%s: no row before the cancel", query)
		}
	}
	close(done)
	wg.Wait()
	return err
}

// copyStream is what a COPY (SUBSCRIBE ...) TO STDOUT client received.
type copyStream struct {
	mu      sync.Mutex
	rows    []string // "diff a" of each data row
	updated chan struct{}
}

func (s *copyStream) Write(p []byte) (int, error) {
	f := strings.Split(strings.TrimRight(string(p), "\n"), "\t")
	s.mu.Lock()
	if len(f) >= 3 && f[1] != "t" {
		s.rows = append(s.rows, f[len(f)-2]+" "+f[len(f)-1])
	}
	s.mu.Unlock()
	select {
	case s.updated <- struct{}{}:
	default:
	}
	return len(p), nil
}

// waitRow waits until the stream has the data row "diff a".
func (s *copyStream) waitRow(t testing.TB, row string) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		s.mu.Lock()
		has := false
		for _, r := range s.rows {
			has = has || r == row
		}
		rows := append([]string(nil), s.rows...)
		s.mu.Unlock()
		if has {
			return
		}
		select {
		case <-s.updated:
		case <-timeout:
			t.Fatalf("the subscriber did not receive %q; it has %q", row, rows)
		}
	}
}

// startCopySubscriber streams COPY (query) TO STDOUT from s in the
// background until the test ends.
func startCopySubscriber(t testing.TB, s *testserver.Server, query string) (*copyStream, <-chan error) {
	t.Helper()
	c, err := pgconn.Connect(context.Background(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	st := &copyStream{updated: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.CopyTo(ctx, st, "COPY ("+query+") TO STDOUT")
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("the COPY subscriber did not end")
		}
		c.Close(context.Background())
	})
	return st, done
}

// wantUpstreamDown fails unless err is the proxy's "upstream unavailable"
// error: SQLSTATE class 08 with the upstream's address in the message.
func wantUpstreamDown(t testing.TB, err error, addr, what string) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Errorf("%s: got %v, want an 08006 error naming the upstream", what, err)
		return
	}
	if !strings.HasPrefix(pe.Code, "08") || !strings.Contains(pe.Message, addr) {
		t.Errorf("%s: got %s %q, want SQLSTATE 08006 naming the upstream %s", what, pe.Code, pe.Message, addr)
	}
}

// fastPathCursor declares a fast-path cursor over t in a block, fetches
// its snapshot and commits; it returns the snapshot's values of a.
func fastPathCursor(c *pgx.Conn) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, q := range []string{"BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE t"} {
		if _, err := c.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	rows, err := c.Query(ctx, "FETCH ALL c", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		out = append(out, string(rows.RawValues()[2]))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("FETCH: %w", err)
	}
	sort.Strings(out)
	if _, err := c.Exec(ctx, "COMMIT"); err != nil {
		return nil, fmt.Errorf("COMMIT: %w", err)
	}
	return out, nil
}

// TestProxyUpstreamLoss: with the upstream stopped, the proxy keeps serving
// the fast path (a running subscriber keeps its connection, and new
// subscribes to existing collections start), statements that need the
// upstream fail with 08006 naming it, and a block whose upstream work was
// lost cannot commit; when the upstream returns on the same address, the
// same sessions' next proxied statements work again, whether they failed
// during the outage or stayed idle through it.
func TestProxyUpstreamLoss(t *testing.T) {
	checkGoroutines(t)
	p := startProxyPair(t, testserver.Options{}, testserver.Options{})
	upAddr := p.up.Addr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	sess := connectMode(t, p.proxy, pgx.QueryExecModeCacheStatement)
	execT(t, sess, "CREATE TABLE t (a int8)", "INSERT INTO t VALUES (1)")
	// idle uses the upstream before the outage and stays idle through it.
	idle := connectMode(t, p.proxy, pgx.QueryExecModeCacheStatement)
	if got := queryRows(t, idle, "SELECT a FROM t"); !reflect.DeepEqual(got, []string{"1"}) {
		t.Fatalf("SELECT: %q", got)
	}
	// inBlock has written in a block that the outage interrupts.
	inBlock := connectMode(t, p.proxy, pgx.QueryExecModeSimpleProtocol)
	execT(t, inBlock, "BEGIN", "INSERT INTO t VALUES (100)")
	// cursors has used the upstream and declares fast-path cursors during
	// the outage.
	cursors := connectMode(t, p.proxy, pgx.QueryExecModeSimpleProtocol)
	execT(t, cursors, "INSERT INTO t VALUES (2)")
	// A running fast-path subscriber, and a proxied dataflow-path one.
	sub, subDone := startCopySubscriber(t, p.proxy, "SUBSCRIBE t")
	sub.waitRow(t, "1 2")
	proxied := connectMode(t, p.proxy, pgx.QueryExecModeSimpleProtocol)
	execT(t, proxied, "SET enable_subscribe_persist_fast_path = false")
	proxiedRows, err := proxied.Query(ctx, "SUBSCRIBE t")
	if err != nil {
		t.Fatal(err)
	}
	if !proxiedRows.Next() {
		t.Fatalf("proxied SUBSCRIBE: no row: %v", proxiedRows.Err())
	}

	p.up.Stop()

	// The proxied SUBSCRIBE ends with an 08 error, not the upstream's
	// FATAL: the client's own connection is fine.
	for proxiedRows.Next() {
	}
	wantUpstreamDown(t, proxiedRows.Err(), upAddr, "a proxied SUBSCRIBE when the upstream stops")
	if got, err := tryQueryRows(proxied, "SELECT 1"); err != nil || !reflect.DeepEqual(got, []string{"1"}) {
		t.Errorf("local SELECT after the proxied SUBSCRIBE failed: %q, %v", got, err)
	}

	// Statements that need the upstream fail, clearly, every time.
	for _, q := range []string{"SELECT a FROM t", "INSERT INTO t VALUES (3)", "SELECT a FROM t WHERE a = $1"} {
		var err error
		if strings.Contains(q, "$1") {
			_, err = sess.Exec(ctx, q, 1)
		} else {
			_, err = sess.Exec(ctx, q)
		}
		wantUpstreamDown(t, err, upAddr, q+" during the outage")
	}
	fresh := connectMode(t, p.proxy, pgx.QueryExecModeSimpleProtocol) // logs in without the upstream
	_, err = fresh.Exec(ctx, "INSERT INTO t VALUES (3)")
	wantUpstreamDown(t, err, upAddr, "a new session's INSERT during the outage")
	// The block's upstream work is gone: it cannot commit.
	_, err = inBlock.Exec(ctx, "COMMIT")
	if pgCode(err) == "" || !strings.HasPrefix(pgCode(err), "08") {
		t.Errorf("COMMIT of a block whose upstream connection was lost: %v, want an 08 error", err)
	}
	execT(t, inBlock, "ROLLBACK")

	// Local statements and the fast path work.
	if got, err := tryQueryRows(sess, "SELECT 1"); err != nil || !reflect.DeepEqual(got, []string{"1"}) {
		t.Errorf("local SELECT during the outage: %q, %v", got, err)
	}
	if got, err := tryQueryRows(sess, "SHOW enable_subscribe_persist_fast_path"); err != nil || !reflect.DeepEqual(got, []string{"on"}) {
		t.Errorf("SHOW during the outage: %q, %v", got, err)
	}
	t.Run("NewFastPathSubscribe", func(t *testing.T) {
		if got, err := fastPathCursor(fresh); err != nil || !reflect.DeepEqual(got, []string{"1", "2"}) {
			t.Errorf("fast-path cursor on a new session during the outage: %q, %v", got, err)
		}
		if got, err := fastPathCursor(sess); err != nil || !reflect.DeepEqual(got, []string{"1", "2"}) {
			t.Errorf("fast-path cursor on a session whose statements failed during the outage: %q, %v", got, err)
		}
		other, _ := startCopySubscriber(t, p.proxy, "SUBSCRIBE t")
		other.waitRow(t, "1 2")
	})
	t.Run("NewFastPathSubscribeOnUsedSession", func(t *testing.T) {
		// cursors's upstream connection died while it was idle: BEGIN, a
		// both-sides statement, must not need it.
		if got, err := fastPathCursor(cursors); err != nil || !reflect.DeepEqual(got, []string{"1", "2"}) {
			t.Errorf("fast-path cursor on a session that used the upstream before the outage: %q, %v", got, err)
		}
	})

	p.restartUpstream(t)

	// The same sessions reconnect on their next proxied statement.
	if got, err := tryQueryRows(idle, "SELECT a FROM t"); err != nil || !reflect.DeepEqual(got, []string{"1", "2"}) {
		t.Errorf("first proxied SELECT of a session idle through the outage: %q, %v", got, err)
	}
	if got, err := tryQueryRows(sess, "SELECT a FROM t WHERE a = $1", 1); err != nil || !reflect.DeepEqual(got, []string{"1"}) {
		t.Errorf("proxied SELECT after the outage: %q, %v", got, err)
	}
	execT(t, sess, "INSERT INTO t VALUES (4)")
	execT(t, inBlock, "BEGIN", "INSERT INTO t VALUES (5)", "COMMIT")
	execT(t, fresh, "INSERT INTO t VALUES (6)")
	if got := queryRows(t, cursors, "SELECT a FROM t"); !reflect.DeepEqual(got, []string{"1", "2", "4", "5", "6"}) {
		t.Errorf("after the outage: %q, want 1 2 4 5 6 (the interrupted block's 100 must be gone)", got)
	}
	// The subscriber that ran through the outage sees the new writes.
	sub.waitRow(t, "1 6")
	select {
	case err := <-subDone:
		t.Errorf("the fast-path subscriber ended: %v", err)
	default:
	}
}

// TestProxyPasswordPassThrough: a proxy that asks for passwords in clear text
// logs its sessions in upstream as the client's role with the client's
// password (the upstream uses SCRAM); a wrong password fails at the proxy's
// login with 28P01, a role without a password logs in with trust, and a
// proxy that cannot see the password (SCRAM) uses its UpstreamPassword.
func TestProxyPasswordPassThrough(t *testing.T) {
	checkGoroutines(t)
	p := startProxyPair(t, testserver.Options{PGWire: pgwire.Config{Auth: pgwire.AuthSCRAM}},
		testserver.Options{PGWire: pgwire.Config{Auth: pgwire.AuthCleartext}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := connectMode(t, p.up, pgx.QueryExecModeSimpleProtocol)
	execT(t, admin, "CREATE ROLE u LOGIN PASSWORD 'pw'", `CREATE ROLE "u 2" LOGIN PASSWORD 'pw 2'`, "CREATE ROLE v LOGIN",
		"CREATE TABLE t (a int8)", "INSERT INTO t VALUES (1)", "GRANT SELECT ON t TO u", `GRANT SELECT ON t TO "u 2"`)

	_, err := connectWith(t, p.proxy, "u", "wrong", pgx.QueryExecModeCacheStatement)
	wantCode(t, err, "28P01", "wrong password at the proxy")
	_, err = connectWith(t, p.proxy, "nobody", "pw", pgx.QueryExecModeCacheStatement)
	if err == nil {
		t.Errorf("an unknown role logged in at the proxy")
	}

	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		t.Run(mode.String(), func(t *testing.T) {
			u, err := connectWith(t, p.proxy, "u", "pw", mode)
			if err != nil {
				t.Fatalf("login as u at the proxy: %v", err)
			}
			if got, err := tryQueryRows(u, "SELECT 1"); err != nil || !reflect.DeepEqual(got, []string{"1"}) {
				t.Fatalf("SELECT 1: %q, %v", got, err)
			}
			if got, err := tryQueryRows(u, "SELECT a FROM t WHERE a = 1"); err != nil || !reflect.DeepEqual(got, []string{"1"}) {
				t.Fatalf("proxied SELECT as u: %q, %v", got, err)
			}
			// The upstream session is u's, with u's privileges.
			_, err = u.Exec(ctx, "INSERT INTO t VALUES (2)")
			wantCode(t, err, "42501", "proxied INSERT as u without the grant")
		})
	}
	execT(t, admin, "GRANT INSERT ON t TO u")
	u, err := connectWith(t, p.proxy, "u", "pw", pgx.QueryExecModeCacheStatement)
	if err != nil {
		t.Fatal(err)
	}
	execT(t, u, "INSERT INTO t VALUES (2)")
	if got := queryRows(t, admin, "SELECT a FROM t"); !reflect.DeepEqual(got, []string{"1", "2"}) {
		t.Errorf("after u's INSERT through the proxy: %q", got)
	}

	t.Run("RoleNameWithSpace", func(t *testing.T) {
		c, err := connectAs(t, p.proxy, "u 2", "pw 2")
		if err != nil {
			t.Fatalf("login as \"u 2\": %v", err)
		}
		if got, err := tryQueryRows(c, "SELECT a FROM t WHERE a = 1"); err != nil || !reflect.DeepEqual(got, []string{"1"}) {
			t.Errorf("proxied SELECT as \"u 2\": %q, %v", got, err)
		}
	})
	t.Run("Trust", func(t *testing.T) {
		v, err := connectWith(t, p.proxy, "v", "", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatalf("login as v (no password) at the proxy: %v", err)
		}
		_, err = v.Exec(ctx, "SELECT a FROM t")
		wantCode(t, err, "42501", "proxied SELECT as v without the grant")
		execT(t, admin, "GRANT SELECT ON t TO v")
		if got, err := tryQueryRows(v, "SELECT a FROM t WHERE a = 1"); err != nil || !reflect.DeepEqual(got, []string{"1"}) {
			t.Errorf("proxied SELECT as v: %q, %v", got, err)
		}
	})
	t.Run("UpstreamPassword", func(t *testing.T) {
		for _, tc := range []struct {
			name, password string
			wantErr        bool
		}{{"Configured", "pw", false}, {"Missing", "", true}} {
			t.Run(tc.name, func(t *testing.T) {
				addr := p.up.Addr
				scram := testserver.Start(t, testserver.Options{Blob: p.blob, Consensus: p.cons, PGWire: pgwire.Config{Auth: pgwire.AuthSCRAM},
					Adapter: func(c *adapter.Config) { c.Upstream, c.UpstreamPassword = addr, tc.password }})
				c, err := connectWith(t, scram, "u", "pw", pgx.QueryExecModeSimpleProtocol)
				if err != nil {
					t.Fatalf("login as u at a SCRAM proxy: %v", err)
				}
				got, err := tryQueryRows(c, "SELECT a FROM t WHERE a = 1")
				if tc.wantErr {
					if err == nil {
						t.Errorf("proxied SELECT with no password for the upstream succeeded")
					}
					return
				}
				if err != nil || !reflect.DeepEqual(got, []string{"1"}) {
					t.Errorf("proxied SELECT as u with UpstreamPassword: %q, %v", got, err)
				}
			})
		}
	})
}

// connectAs opens a simple-protocol pgx connection to s as user, whatever
// characters its name holds.
func connectAs(t testing.TB, s *testserver.Server, user, password string) (*pgx.Conn, error) {
	t.Helper()
	return connectWith(t, s, user, password, pgx.QueryExecModeSimpleProtocol)
}

// TestProxyExtendedProtocol: through a proxy, statements prepared once and
// executed many times (pgx's statement cache) take effect each time they
// run: BEGIN, INSERT, COMMIT and ROLLBACK in turn (only the committed rows
// remain), and SET, RESET, SET again and SET in a rolled-back block, on
// both sides (SHOW on the proxy; the limit the upstream enforces).
func TestProxyExtendedProtocol(t *testing.T) {
	checkGoroutines(t)
	p := startProxyPair(t, testserver.Options{}, testserver.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := connectMode(t, p.proxy, pgx.QueryExecModeCacheStatement)
	execT(t, c, "CREATE TABLE t (a int8)")
	// Each statement is parsed once, here, and then bound and executed
	// each time it runs (pgx's Exec of a prepared statement's name); a
	// plain Exec without arguments would use the simple protocol.
	for name, sql := range map[string]string{
		"begin": "BEGIN", "commit": "COMMIT", "rollback": "ROLLBACK", "insert": "INSERT INTO t VALUES ($1)",
		"set1": "SET max_result_size = 1", "set2": "SET max_result_size = 2", "reset": "RESET max_result_size",
	} {
		if _, err := c.Prepare(ctx, name, sql); err != nil {
			t.Fatalf("prepare %s: %v", sql, err)
		}
	}
	run := func(names ...string) {
		t.Helper()
		for _, name := range names {
			if _, err := c.Exec(ctx, name); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	var want []string
	for i := range 6 {
		run("begin")
		if _, err := c.Exec(ctx, "insert", i); err != nil {
			t.Fatalf("round %d: INSERT: %v", i, err)
		}
		end := "commit"
		if i%2 == 1 {
			end = "rollback"
		} else {
			want = append(want, fmt.Sprint(i))
		}
		run(end)
		if got := queryRows(t, c, "SELECT a FROM t"); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: after BEGIN, INSERT %d, %s: %q, want %q", i, i, end, got, want)
		}
	}
	if got := queryRows(t, connectMode(t, p.up, pgx.QueryExecModeSimpleProtocol), "SELECT a FROM t"); !reflect.DeepEqual(got, want) {
		t.Fatalf("on the upstream: %q, want %q", got, want)
	}

	// limit checks max_result_size on both sides: SHOW runs on the proxy;
	// the upstream enforces it on a SELECT of t, which runs there (planned
	// once, by pgx's cache, and executed each time). want is the SHOW
	// value; tiny values make the SELECT fail with 53200 naming the limit.
	limit := func(what, want string) {
		t.Helper()
		got, err := tryQueryRows(c, "SHOW max_result_size")
		if err != nil || !reflect.DeepEqual(got, []string{want}) {
			t.Errorf("%s: SHOW max_result_size on the proxy: %q, %v; want %q", what, got, err, want)
		}
		_, err = tryQueryRows(c, "SELECT a FROM t")
		switch want {
		case "1GB":
			if err != nil {
				t.Errorf("%s: upstream SELECT with the default max_result_size: %v", what, err)
			}
		default:
			if pe := wantCode(t, err, "53200", what+": upstream SELECT over max_result_size"); pe != nil && !strings.Contains(pe.Message, " "+want+" B") {
				t.Errorf("%s: upstream SELECT: %q, want the upstream's limit to be %s B", what, pe.Message, want)
			}
		}
	}
	limit("default", "1GB")
	for round := range 2 {
		run("set1")
		limit(fmt.Sprintf("round %d: SET", round), "1")
		run("reset")
		limit(fmt.Sprintf("round %d: RESET", round), "1GB")
		run("set1")
		limit(fmt.Sprintf("round %d: SET again", round), "1")
		run("begin", "set2")
		got, err := tryQueryRows(c, "SHOW max_result_size")
		if err != nil || !reflect.DeepEqual(got, []string{"2"}) {
			t.Errorf("round %d: SHOW max_result_size in the block: %q, %v; want 2", round, got, err)
		}
		_, err = tryQueryRows(c, "SELECT a FROM t")
		if pe := wantCode(t, err, "53200", "SELECT in the block"); pe != nil && !strings.Contains(pe.Message, " 2 B") {
			t.Errorf("round %d: upstream SELECT in the block: %q, want the upstream's limit to be 2 B", round, pe.Message)
		}
		run("rollback") // undoes the SET on both sides
		limit(fmt.Sprintf("round %d: after ROLLBACK", round), "1")
		run("reset")
		limit(fmt.Sprintf("round %d: RESET at the end", round), "1GB")
	}
}

// TestProxySuspendedPortal: a proxied statement executed in pieces (Execute
// with a row limit, as JDBC's fetch size does), each Execute its own round
// trip, returns every row; a proxied SUBSCRIBE so executed keeps streaming
// rows written after its first Execute: the upstream statement lives as
// long as the portal, not as the Execute message that started it.
func TestProxySuspendedPortal(t *testing.T) {
	checkGoroutines(t)
	p := startProxyPair(t, testserver.Options{}, testserver.Options{})
	admin := connectMode(t, p.proxy, pgx.QueryExecModeSimpleProtocol)
	execT(t, admin, "CREATE TABLE t (a int8)", "INSERT INTO t VALUES (1), (2), (3)")

	for _, tc := range []struct {
		name, query string
		subscribe   bool
	}{
		{"Select", "SELECT a FROM t", false},
		{"DataflowSubscribe", "SUBSCRIBE (SELECT a FROM t)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := pgconn.Connect(context.Background(), p.proxy.URL())
			if err != nil {
				t.Fatal(err)
			}
			hj, err := pc.Hijack()
			if err != nil {
				t.Fatal(err)
			}
			defer hj.Conn.Close()
			hj.Conn.SetDeadline(time.Now().Add(60 * time.Second))
			fe := hj.Frontend
			// untilReady reads to ReadyForQuery; it returns the last
			// column of the last DataRow, whether the portal completed,
			// and the error, if any.
			untilReady := func(what string) (row string, complete bool, err error) {
				t.Helper()
				if err := fe.Flush(); err != nil {
					t.Fatal(err)
				}
				for {
					msg, rerr := fe.Receive()
					if rerr != nil {
						t.Fatalf("%s: %v", what, rerr)
					}
					switch m := msg.(type) {
					case *pgproto3.DataRow:
						row = string(m.Values[len(m.Values)-1])
					case *pgproto3.CommandComplete:
						complete = true
					case *pgproto3.ErrorResponse:
						err = fmt.Errorf("%s %s", m.Code, m.Message)
					case *pgproto3.ReadyForQuery:
						return row, complete, err
					}
				}
			}
			if tc.subscribe {
				// A subscribe the proxy passes upstream: one of a query
				// over a table would be a shape the proxy serves.
				fe.Send(&pgproto3.Query{String: "SET enable_subscribe_persist_fast_path = false"})
				if _, _, err := untilReady("SET"); err != nil {
					t.Fatal(err)
				}
			}
			// In a block, so that the portal outlives each Sync, as JDBC
			// does with a fetch size.
			fe.Send(&pgproto3.Query{String: "BEGIN"})
			if _, _, err := untilReady("BEGIN"); err != nil {
				t.Fatal(err)
			}
			fe.Send(&pgproto3.Parse{Query: tc.query})
			fe.Send(&pgproto3.Bind{})
			fe.Send(&pgproto3.Sync{})
			if _, _, err := untilReady("Parse, Bind"); err != nil {
				t.Fatal(err)
			}
			// execute runs Execute with a limit of one row, each its own
			// round trip.
			execute := func(what string) (string, bool) {
				t.Helper()
				fe.Send(&pgproto3.Execute{MaxRows: 1})
				fe.Send(&pgproto3.Sync{})
				row, complete, err := untilReady(what)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				return row, complete
			}
			var got []string
			for i := range 3 {
				row, complete := execute(fmt.Sprintf("execute %d", i))
				if complete {
					t.Fatalf("execute %d: the portal completed early", i)
				}
				got = append(got, row)
			}
			sort.Strings(got)
			if want := []string{"1", "2", "3"}; !reflect.DeepEqual(got, want) {
				t.Errorf("rows %q, want %q", got, want)
			}
			if tc.subscribe {
				// A row written now reaches the running SUBSCRIBE.
				execT(t, admin, "INSERT INTO t VALUES (4)")
				if row, _ := execute("execute after the INSERT"); row != "4" {
					t.Errorf("after the INSERT: row %q, want 4", row)
				}
				execT(t, admin, "DELETE FROM t WHERE a = 4")
				// Another upstream statement meanwhile gets a clear error:
				// the session's upstream connection is streaming the portal.
				fe.Send(&pgproto3.Parse{Name: "other", Query: "SELECT a FROM t"})
				fe.Send(&pgproto3.Sync{})
				if _, _, err := untilReady("a second statement"); err == nil || !strings.HasPrefix(err.Error(), "0A000 ") {
					t.Errorf("a second upstream statement while the portal streams: %v, want 0A000", err)
				}
			} else if row, complete := execute("last execute"); !complete || row != "" {
				t.Errorf("last execute: row %q, complete %v; want no row and completion", row, complete)
			}
			fe.Send(&pgproto3.Query{String: "ROLLBACK"})
			if _, _, err := untilReady("ROLLBACK"); err != nil {
				t.Error(err)
			}
			fe.Send(&pgproto3.Terminate{})
			fe.Flush()
		})
	}
}

// TestProxyTxnReadOrWrite: a proxy keeps the transaction rules that a
// SUBSCRIBE follows no write, no write follows a SUBSCRIBE and a SUBSCRIBE
// is the only read of its block, although the writes and other reads run
// upstream and a fast-path SUBSCRIBE runs on the proxy, in the simple and
// in the extended protocol.
func TestProxyTxnReadOrWrite(t *testing.T) {
	p := startProxyPair(t, testserver.Options{}, testserver.Options{})
	ctx := context.Background()
	up := connect(t, p.up)
	mustExec(t, up, "CREATE TABLE t (a int)", "INSERT INTO t VALUES (1)")
	c := connect(t, p.proxy)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec} {
		for _, tc := range []struct{ stmts, code string }{
			{"BEGIN; INSERT INTO t VALUES (2); DECLARE c CURSOR FOR SUBSCRIBE t; FETCH 1 c", "25000"},
			{"BEGIN; DELETE FROM t WHERE a = 12345; DECLARE c CURSOR FOR SUBSCRIBE t; FETCH 1 c", "25000"},
			{"BEGIN; DECLARE c CURSOR FOR SUBSCRIBE t; FETCH 1 c; INSERT INTO t VALUES (2)", "25006"},
			{"BEGIN; SELECT a FROM t; DECLARE c CURSOR FOR SUBSCRIBE t; FETCH 1 c", "25000"},
			{"BEGIN; DECLARE c CURSOR FOR SUBSCRIBE t; FETCH 1 c; SELECT a FROM t", "25000"},
		} {
			var err error
			for _, st := range strings.Split(tc.stmts, "; ") {
				var rows pgx.Rows
				if rows, err = c.Query(ctx, st, mode); err == nil {
					rows.Close()
					err = rows.Err()
				}
				if err != nil {
					break
				}
			}
			wantCode(t, err, tc.code, fmt.Sprintf("%s (%v)", tc.stmts, mode))
			if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := queryRows(t, up, "SELECT a FROM t"); len(got) != 1 {
		t.Errorf("t holds %q after the refused blocks, want the one row", got)
	}
}

// TestProxyMultiStatementAtomic: a multi-statement query through a proxy
// that writes is one implicit transaction, as on the upstream: a failure
// in a statement the proxy would answer itself rolls back the writes
// before it.
func TestProxyMultiStatementAtomic(t *testing.T) {
	p := startProxyPair(t, testserver.Options{}, testserver.Options{})
	up := connect(t, p.up)
	mustExec(t, up, "CREATE TABLE m (a int)")
	c := connect(t, p.proxy)
	_, err := c.Exec(context.Background(), "INSERT INTO m VALUES (1); SELECT 1/0", pgx.QueryExecModeSimpleProtocol)
	wantCode(t, err, "22012", "a write and a failing constant SELECT")
	if got := queryRows(t, up, "SELECT a FROM m"); len(got) != 0 {
		t.Errorf("m holds %q after the failed query, want nothing", got)
	}
	if _, err := c.Exec(context.Background(), "INSERT INTO m VALUES (2); SELECT 1", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	if got := queryRows(t, up, "SELECT a FROM m"); !reflect.DeepEqual(got, []string{"2"}) {
		t.Errorf("m holds %q, want the one row", got)
	}
}

// rawFrontend connects to s and returns the connection's frontend, for
// tests that send protocol messages themselves.
func rawFrontend(t testing.TB, s *testserver.Server) *pgproto3.Frontend {
	t.Helper()
	pc, err := pgconn.Connect(context.Background(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	hj, err := pc.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hj.Conn.Close() })
	hj.Conn.SetDeadline(time.Now().Add(30 * time.Second))
	return hj.Frontend
}

// exchange sends msgs on fe and returns the type names of the messages
// received up to and including one of until's type (an ErrorResponse's
// with its code and message), and the CopyData payloads among them.
func exchange(t testing.TB, fe *pgproto3.Frontend, what string, until pgproto3.BackendMessage, msgs ...pgproto3.FrontendMessage) (types, data []string) {
	t.Helper()
	for _, m := range msgs {
		fe.Send(m)
	}
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatalf("%s: %v (received %q so far)", what, err, types)
		}
		typ := reflect.TypeOf(msg).Elem().Name()
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			data = append(data, string(m.Data))
		case *pgproto3.ErrorResponse:
			typ += " " + m.Code + " " + m.Message
		}
		types = append(types, typ)
		if reflect.TypeOf(msg) == reflect.TypeOf(until) {
			return types, data
		}
	}
}

// TestProxyExtendedCopy: a COPY sent with the extended protocol (Parse,
// Bind, Execute) runs through a proxy as it does through the simple
// protocol: COPY FROM STDIN asks for the client's data and writes it
// upstream, COPY TO STDOUT sends the rows as CopyData.
func TestProxyExtendedCopy(t *testing.T) {
	p := startProxyPair(t, testserver.Options{}, testserver.Options{})
	up := connect(t, p.up)
	mustExec(t, up, "CREATE TABLE t (a int8, b text)")
	fe := rawFrontend(t, p.proxy)
	got, _ := exchange(t, fe, "COPY FROM STDIN", &pgproto3.CopyInResponse{},
		&pgproto3.Parse{Query: "COPY t FROM STDIN"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Flush{})
	if want := []string{"ParseComplete", "BindComplete", "CopyInResponse"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("COPY FROM STDIN: %q, want %q", got, want)
	}
	got, _ = exchange(t, fe, "COPY FROM STDIN's data", &pgproto3.ReadyForQuery{},
		&pgproto3.CopyData{Data: []byte("1\tx\n2\ty\n")}, &pgproto3.CopyDone{}, &pgproto3.Sync{})
	if want := []string{"CommandComplete", "ReadyForQuery"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("COPY FROM STDIN's data: %q, want %q", got, want)
	}
	if got, want := queryRows(t, up, "SELECT a FROM t"), []string{"1", "2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("t on the upstream after COPY FROM STDIN: %q, want %q", got, want)
	}
	// A CopyFail ends it with the client's message, as on the upstream.
	exchange(t, fe, "COPY FROM STDIN", &pgproto3.CopyInResponse{}, &pgproto3.Query{String: "COPY t FROM STDIN"})
	got, _ = exchange(t, fe, "CopyFail", &pgproto3.ReadyForQuery{},
		&pgproto3.CopyData{Data: []byte("3\tz\n")}, &pgproto3.CopyFail{Message: "gave up"})
	if want := []string{"ErrorResponse 57014 COPY from stdin failed: gave up", "ReadyForQuery"}; !reflect.DeepEqual(got, want) {
		t.Errorf("CopyFail: %q, want %q", got, want)
	}
	got, data := exchange(t, fe, "COPY TO STDOUT", &pgproto3.ReadyForQuery{},
		&pgproto3.Parse{Query: "COPY t TO STDOUT"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if want := []string{"ParseComplete", "BindComplete", "CopyOutResponse", "CopyData", "CopyData", "CopyDone", "CommandComplete", "ReadyForQuery"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("COPY TO STDOUT: %q, want %q", got, want)
	}
	sort.Strings(data)
	if want := []string{"1\tx\n", "2\ty\n"}; !reflect.DeepEqual(data, want) {
		t.Errorf("COPY TO STDOUT's data: %q, want %q", data, want)
	}
}

// TestProxyDescribeCommand: Describe of a statement that returns no rows
// (INSERT), proxied upstream, gets NoData, as from the upstream itself: a
// RowDescription of no columns tells a driver that it returns rows (JDBC's
// executeUpdate then fails).
func TestProxyDescribeCommand(t *testing.T) {
	p := startProxyPair(t, testserver.Options{}, testserver.Options{})
	mustExec(t, connect(t, p.up), "CREATE TABLE t (a int8)")
	fe := rawFrontend(t, p.proxy)
	got, _ := exchange(t, fe, "INSERT", &pgproto3.ReadyForQuery{},
		&pgproto3.Parse{Name: "s", Query: "INSERT INTO t VALUES ($1)"}, &pgproto3.Describe{ObjectType: 'S', Name: "s"},
		&pgproto3.Bind{PreparedStatement: "s", Parameters: [][]byte{[]byte("1")}}, &pgproto3.Describe{ObjectType: 'P'},
		&pgproto3.Execute{}, &pgproto3.Sync{})
	want := []string{"ParseComplete", "ParameterDescription", "NoData", "BindComplete", "NoData", "CommandComplete", "ReadyForQuery"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse, Describe, Bind, Describe, Execute of an INSERT: %q, want %q", got, want)
	}
}
