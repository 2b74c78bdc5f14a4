package deploytest

import (
	"context"
	bin "encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/internal/childproc"
	"github.com/shardtail/shardtail/internal/testsupport/pgtest"
	"github.com/shardtail/shardtail/internal/testsupport/s3test"
	"github.com/shardtail/shardtail/internal/testsupport/testbin"
)

func TestMain(m *testing.M) { pgtest.Main(m, testbin.Remove) }

// proc is one shardtail process, started again on its address by restart.
type proc struct {
	name   string
	addr   string
	args   []string // after serve's --listen and --http-listen
	logDir string
	child  *childproc.Process // nil while not running
	runs   int                // how many times it was started
	prev   string             // what the runs before a restart wrote
}

func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startProcAt(t, name, testbin.FreeAddr(t), args...)
}

// startProcAt is startProc listening on addr.
func startProcAt(t *testing.T, name, addr string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, addr: addr, args: args, logDir: t.TempDir()}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s log:\n%s", p.name, p.logText())
		}
	})
	p.start(t)
	return p
}

// start starts the process on p.addr and waits until it accepts
// connections.
func (p *proc) start(t *testing.T) {
	t.Helper()
	args := append([]string{"serve", "--listen", p.addr, "--http-listen", testbin.FreeAddr(t), "--feed-listen", "", "--tick", "100ms"}, p.args...)
	p.runs++
	child, err := childproc.Start(testbin.Build(t), args, childproc.Options{LogPath: filepath.Join(p.logDir, fmt.Sprintf("%s-%d.log", p.name, p.runs))})
	if err != nil {
		t.Fatal(err)
	}
	p.child = child
	err = child.WaitReady(context.Background(), 30*time.Second, func(ctx context.Context) error {
		c, err := pgconn.Connect(ctx, p.url())
		if err != nil {
			return err
		}
		return c.Close(ctx)
	})
	if err != nil {
		t.Fatalf("%s did not start: %v\n%s", p.name, err, p.logText())
	}
}

// kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *proc) kill() {
	if p.child == nil {
		return
	}
	p.child.Kill()
	p.prev += p.child.Log()
	p.child = nil
}

// restart kills the process and starts it again on the same address with
// the same arguments.
func (p *proc) restart(t *testing.T) {
	t.Helper()
	p.kill()
	p.prev += "--- restarted ---\n"
	p.start(t)
}

// logText is what the process has written to stdout and stderr, over all
// its runs.
func (p *proc) logText() string {
	if p.child == nil {
		return p.prev
	}
	return p.prev + p.child.Log()
}

func (p *proc) url() string {
	return fmt.Sprintf("postgres://materialize@%s/materialize?sslmode=disable", p.addr)
}

func connect(t *testing.T, p *proc) *pgconn.PgConn {
	t.Helper()
	c, err := pgconn.Connect(context.Background(), p.url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func exec1(t *testing.T, c *pgconn.PgConn, sql string) {
	t.Helper()
	if _, err := c.Exec(context.Background(), sql).ReadAll(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// stream is what one subscriber saw: data rows by time, and its progress.
type stream struct {
	mu       sync.Mutex
	asOf     uint64
	progress uint64
	rows     []string // "time diff k v"
	updated  chan struct{}
}

func newStream() *stream { return &stream{updated: make(chan struct{}, 1)} }

// Write receives one CopyData row of COPY (SUBSCRIBE ... WITH (PROGRESS)).
func (s *stream) Write(p []byte) (int, error) {
	f := strings.Split(strings.TrimRight(string(p), "\n"), "\t")
	ts, _ := strconv.ParseUint(f[0], 10, 64)
	s.mu.Lock()
	if f[1] == "t" {
		if s.asOf == 0 {
			s.asOf = ts
		}
		s.progress = ts
	} else {
		s.rows = append(s.rows, strings.Join([]string{f[0], f[2], f[3], f[4]}, " "))
	}
	s.mu.Unlock()
	select {
	case s.updated <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (s *stream) state() (uint64, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.progress, append([]string(nil), s.rows...)
}

// subscribe streams COPY (SUBSCRIBE ...) into s until ctx ends or the
// connection breaks.
func subscribe(ctx context.Context, url, query string, s *stream) error {
	c, err := pgconn.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.CopyTo(ctx, s, "COPY ("+query+") TO STDOUT")
	return err
}

// waitProgress waits until every stream has progressed past t.
func waitProgress(t *testing.T, t0 uint64, streams ...*stream) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range streams {
		for {
			if p, _ := s.state(); p > t0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a subscriber did not progress past %d", t0)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func upTo(rows []string, t0 uint64) []string {
	var out []string
	for _, r := range rows {
		ts, _ := strconv.ParseUint(strings.Fields(r)[0], 10, 64)
		if ts <= t0 {
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}

// TestProxyProcesses is the scaled deployment: one role-all server and two
// tail processes on shared S3 (over HTTP) and PostgreSQL. Writes go through
// a tail's proxy; subscribers on both tails and on the upstream see the
// same stream; a tail killed with SIGKILL mid-stream loses its clients,
// which resume on the other tail from their last progress with no gap and
// no duplicate.
func TestProxyProcesses(t *testing.T) {
	storage := []string{"--blob", s3test.URL(t), "--consensus", pgtest.URL(t)}
	up := startProc(t, "upstream", storage...)
	proxy1 := startProc(t, "tail1", append(storage, "--upstream", up.addr)...)
	proxy2 := startProc(t, "tail2", append(storage, "--upstream", up.addr)...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	w := connect(t, proxy1) // writes through a tail's proxy
	exec1(t, w, "CREATE TABLE t (k int8 NOT NULL, v text)")
	exec1(t, w, "INSERT INTO t VALUES (0, 'initial')")

	// The first subscriber fixes AS OF; the others start at the same time
	// so that all streams are comparable row for row.
	onUp := newStream()
	go subscribe(ctx, up.url(), "SUBSCRIBE t WITH (PROGRESS)", onUp)
	waitProgress(t, 0, onUp)
	asOf := onUp.asOf
	q := fmt.Sprintf("SUBSCRIBE t WITH (PROGRESS) AS OF %d", asOf)
	onProxy2 := newStream()
	go subscribe(ctx, proxy2.url(), q, onProxy2)
	moving := newStream() // starts on proxy1, moves to proxy2
	movingDone := make(chan error, 1)
	go func() { movingDone <- subscribe(ctx, proxy1.url(), q, moving) }()
	waitProgress(t, asOf, onProxy2, moving)

	w2 := connect(t, proxy2)
	for i := 1; i <= 40; i++ {
		c := w
		if i%2 == 0 {
			c = w2
		}
		exec1(t, c, fmt.Sprintf("INSERT INTO t VALUES (%d, 'v%d')", i, i))
		if i%10 == 0 {
			exec1(t, c, fmt.Sprintf("DELETE FROM t WHERE k = %d", i-5))
		}
		if i == 20 {
			// Kill proxy1 mid-stream; its client resumes on proxy2 from the
			// last progress it saw.
			proxy1.kill()
			<-movingDone
			f, _ := moving.state()
			resume := fmt.Sprintf("SUBSCRIBE t WITH (SNAPSHOT = false, PROGRESS) AS OF %d", f-1)
			go subscribe(ctx, proxy2.url(), resume, moving)
			// The write path moves to proxy2 too.
			w = w2
		}
	}
	// The last write's time: every stream must pass it.
	final := newStream()
	go subscribe(ctx, up.url(), "SUBSCRIBE t WITH (PROGRESS)", final)
	waitProgress(t, 0, final)
	last := final.asOf
	waitProgress(t, last, onUp, onProxy2, moving)

	_, upRows := onUp.state()
	_, t2Rows := onProxy2.state()
	_, mvRows := moving.state()
	want := upTo(upRows, last)
	if got := upTo(t2Rows, last); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("tail2's stream differs from the upstream's:\n got %v\nwant %v", got, want)
	}
	if got := upTo(mvRows, last); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the resumed stream differs from the upstream's (gap or duplicate):\n got %v\nwant %v", got, want)
	}
	t.Logf("%d rows in each stream up to %d", len(want), last)
}

// TestReadYourWritesAcrossProcesses: a write acknowledged by the upstream
// is in the snapshot of any SUBSCRIBE that starts afterwards on a tail.
func TestReadYourWritesAcrossProcesses(t *testing.T) {
	storage := []string{"--blob", s3test.URL(t), "--consensus", pgtest.URL(t)}
	up := startProc(t, "upstream", storage...)
	tl := startProc(t, "tail", append(storage, "--upstream", up.addr)...)
	w := connect(t, up)
	exec1(t, w, "CREATE TABLE t (k int8 NOT NULL)")
	r := connect(t, tl)
	ctx := context.Background()
	for i := range 25 {
		exec1(t, w, fmt.Sprintf("INSERT INTO t VALUES (%d)", i))
		exec1(t, r, "BEGIN")
		exec1(t, r, "DECLARE c CURSOR FOR SUBSCRIBE t WITH (PROGRESS)")
		// Fetch until the progress row that closes the snapshot.
		n, progress := 0, 0
		for progress < 2 {
			res, err := r.Exec(ctx, "FETCH ALL c").ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range res[0].Rows {
				if string(row[1]) == "t" {
					progress++
				} else if progress == 1 {
					n++
				}
			}
		}
		exec1(t, r, "COMMIT")
		if n < i+1 {
			t.Fatalf("iteration %d: the tail's snapshot has %d rows, want %d (a write acknowledged upstream is missing)", i, n, i+1)
		}
	}
}

// connectAs opens a connection to p as user with password.
func connectAs(t *testing.T, p *proc, user, password string) *pgconn.PgConn {
	t.Helper()
	c, err := pgconn.Connect(context.Background(), fmt.Sprintf("postgres://%s:%s@%s/materialize?sslmode=disable", user, password, p.addr))
	if err != nil {
		t.Fatalf("connect to %s as %s: %v", p.name, user, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// query runs sql and returns its rows' first column, sorted.
func query(c *pgconn.PgConn, sql string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.Exec(ctx, sql).ReadAll()
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, r := range res {
		for _, row := range r.Rows {
			out = append(out, string(row[0]))
		}
	}
	sort.Strings(out)
	return out, nil
}

// wantUpstreamDown fails unless err is the tail's error for a statement
// that needs its lost upstream: SQLSTATE class 08, naming the upstream.
func wantUpstreamDown(t *testing.T, err error, addr, what string) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || !strings.HasPrefix(pe.Code, "08") || !strings.Contains(pe.Message, addr) {
		t.Errorf("%s: got %v, want SQLSTATE 08006 naming the upstream %s", what, err, addr)
	}
}

// TestUpstreamCrash: the role-all process dies (SIGKILL) under a tail. The
// tail keeps serving the fast path: a running subscriber keeps its
// connection and a new fast-path subscribe starts; statements that need
// the upstream fail with 08006 naming it. The upstream restarts on the
// same address: the same client sessions' next proxied statements work
// again (one logged in with a password, passed through again on
// reconnect), and the subscriber that ran through the crash sees the
// writes made after it.
func TestUpstreamCrash(t *testing.T) {
	storage := []string{"--blob", s3test.URL(t), "--consensus", pgtest.URL(t)}
	up := startProc(t, "upstream", storage...)
	tl := startProc(t, "tail", append(storage, "--upstream", up.addr)...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	admin := connect(t, up)
	exec1(t, admin, "CREATE TABLE t (k int8 NOT NULL, v text)")
	exec1(t, admin, "INSERT INTO t VALUES (1, 'one')")
	exec1(t, admin, "CREATE ROLE u LOGIN PASSWORD 'pw'")
	exec1(t, admin, "GRANT SELECT, INSERT ON t TO u")
	admin.Close(ctx)

	// u writes through the tail's proxy with its own password.
	w := connectAs(t, tl, "u", "pw")
	exec1(t, w, "INSERT INTO t VALUES (2, 'two')")
	// idle uses the upstream, then stays idle through the crash.
	idle := connect(t, tl)
	if got, err := query(idle, "SELECT k FROM t"); err != nil || strings.Join(got, " ") != "1 2" {
		t.Fatalf("SELECT through the tail: %q, %v", got, err)
	}
	sub := newStream()
	subDone := make(chan error, 1)
	go func() { subDone <- subscribe(ctx, tl.url(), "SUBSCRIBE t WITH (PROGRESS)", sub) }()
	waitRows(t, sub, "2")

	up.kill()

	_, err := w.Exec(ctx, "INSERT INTO t VALUES (3, 'three')").ReadAll()
	wantUpstreamDown(t, err, up.addr, "INSERT through the tail after the crash")
	_, err = w.Exec(ctx, "SELECT k FROM t").ReadAll()
	wantUpstreamDown(t, err, up.addr, "SELECT through the tail after the crash")
	// A new fast-path subscribe to an existing table starts.
	r := connect(t, tl)
	exec1(t, r, "BEGIN")
	exec1(t, r, "DECLARE c CURSOR FOR SUBSCRIBE t")
	if got, err := query(r, "FETCH ALL c"); err != nil || len(got) != 2 {
		t.Errorf("fast-path cursor during the crash: %q, %v; want the two rows", got, err)
	}
	exec1(t, r, "COMMIT")
	select {
	case err := <-subDone:
		t.Fatalf("the running fast-path subscriber ended with the upstream: %v", err)
	default:
	}

	up.restart(t)

	exec1(t, w, "INSERT INTO t VALUES (4, 'four')")
	if got, err := query(idle, "SELECT k FROM t"); err != nil || strings.Join(got, " ") != "1 2 4" {
		t.Errorf("first SELECT of a session idle through the crash: %q, %v; want 1 2 4", got, err)
	}
	waitRows(t, sub, "4")
	select {
	case err := <-subDone:
		t.Errorf("the fast-path subscriber ended: %v", err)
	default:
	}
}

// waitRows waits until s has a data row with key k.
func waitRows(t *testing.T, s *stream, k string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, rows := s.state()
		for _, r := range rows {
			if f := strings.Fields(r); len(f) >= 3 && f[2] == k {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the subscriber has no row %s: %q", k, rows)
		}
		select {
		case <-s.updated:
		case <-time.After(time.Second):
		}
	}
}

// TestCancelThroughPeer: behind a load balancer a CancelRequest may reach
// another tail than the one running the statement; tails started with
// --peer-id and --peers forward it, for a fast-path SUBSCRIBE the tail
// serves and for a dataflow-path one it proxies upstream.
func TestCancelThroughPeer(t *testing.T) {
	storage := []string{"--blob", s3test.URL(t), "--consensus", pgtest.URL(t)}
	up := startProc(t, "upstream", storage...)
	addr1, addr2 := testbin.FreeAddr(t), testbin.FreeAddr(t)
	peers := "--peers=1=" + addr1 + ",2=" + addr2
	tail1 := startProcAt(t, "tail1", addr1, append(storage, "--upstream", up.addr, "--peer-id", "1", peers)...)
	tail2 := startProcAt(t, "tail2", addr2, append(storage, "--upstream", up.addr, "--peer-id", "2", peers)...)
	exec1(t, connect(t, tail1), "CREATE TABLE t (k int8)")

	for _, path := range []string{"on", "off"} {
		c := connect(t, tail1)
		exec1(t, c, "SET enable_subscribe_persist_fast_path = "+path)
		done := make(chan error, 1)
		go func() {
			_, err := c.Exec(context.Background(), "SUBSCRIBE t").ReadAll()
			done <- err
		}()
		// Until the statement has ended, cancel it through the other tail
		// (a CancelRequest that arrives before the statement runs does
		// nothing, as in PostgreSQL).
		var err error
		deadline := time.Now().Add(30 * time.Second)
	wait:
		for {
			if time.Now().After(deadline) {
				t.Fatalf("fast path %s: cancel requests sent to the other tail did not end the SUBSCRIBE", path)
			}
			sendCancel(t, tail2.addr, c.PID(), c.SecretKey())
			select {
			case err = <-done:
				break wait
			case <-time.After(200 * time.Millisecond):
			}
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Fatalf("fast path %s: SUBSCRIBE canceled through the other tail ended with %v, want 57014", path, err)
		}
	}
}

// sendCancel sends a CancelRequest for (pid, secret) to addr.
func sendCancel(t *testing.T, addr string, pid uint32, secret []byte) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msg := bin.BigEndian.AppendUint32(nil, uint32(12+len(secret)))
	msg = bin.BigEndian.AppendUint32(msg, 80877102) // CancelRequest
	msg = bin.BigEndian.AppendUint32(msg, pid)
	msg = append(msg, secret...)
	if _, err := nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	nc.Read(make([]byte, 1)) // the server closes the connection when done
}

// tcpProxy forwards loopback TCP connections to target until cut, which
// closes every forwarded connection and refuses new ones until restore:
// a network partition between a process and one of its servers.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func startTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *tcpProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		// Checked again once the connection is made, under the lock cut
		// takes: a connection accepted before a cut and dialed after it
		// would otherwise outlive it, and the process keep part of its
		// storage through the outage.
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		for _, pair := range [][2]net.Conn{{c, s}, {s, c}} {
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				io.Copy(pair[0], pair[1])
				pair[0].Close()
				pair[1].Close()
				p.mu.Lock()
				delete(p.conns, pair[0])
				delete(p.conns, pair[1])
				p.mu.Unlock()
			}()
		}
	}
}

// cut closes every forwarded connection and refuses new ones.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

func (p *tcpProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// throughProxy returns the storage URL u (s3://...?endpoint=http://HOST:PORT
// or postgres://...@HOST:PORT/...) with its server reached through a new
// tcpProxy.
func throughProxy(t *testing.T, u string) (string, *tcpProxy) {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Scheme == "s3" {
		q := parsed.Query()
		ep, err := url.Parse(q.Get("endpoint"))
		if err != nil {
			t.Fatal(err)
		}
		p := startTCPProxy(t, ep.Host)
		ep.Host = p.ln.Addr().String()
		q.Set("endpoint", ep.String())
		parsed.RawQuery = q.Encode()
		return parsed.String(), p
	}
	p := startTCPProxy(t, parsed.Host)
	parsed.Host = p.ln.Addr().String()
	return parsed.String(), p
}

// TestProxyStorageOutage: a tail cut off from the shared storage (S3 and
// PostgreSQL both unreachable from it) keeps its fast-path subscribers
// connected and keeps proxying statements to the upstream, which still
// reaches the storage; when the storage comes back the subscribers go on
// with the writes made meanwhile, without an error, gap or duplicate.
func TestProxyStorageOutage(t *testing.T) {
	blob, cons := s3test.URL(t), pgtest.URL(t)
	up := startProc(t, "upstream", "--blob", blob, "--consensus", cons)
	pxBlob, blobProxy := throughProxy(t, blob)
	pxCons, consProxy := throughProxy(t, cons)
	px := startProc(t, "tail", "--blob", pxBlob, "--consensus", pxCons, "--upstream", up.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	admin := connect(t, up)
	exec1(t, admin, "CREATE TABLE t (k int8 NOT NULL, v text)")
	exec1(t, admin, "INSERT INTO t VALUES (1, 'one')")
	sub := newStream()
	subDone := make(chan error, 1)
	go func() { subDone <- subscribe(ctx, px.url(), "SUBSCRIBE t WITH (PROGRESS)", sub) }()
	waitRows(t, sub, "1")

	blobProxy.cut()
	consProxy.cut()
	// The tail still proxies what the upstream serves.
	c := connect(t, px)
	exec1(t, c, "INSERT INTO t VALUES (2, 'two')")
	if got, err := query(c, "SELECT k FROM t"); err != nil || strings.Join(got, " ") != "1 2" {
		t.Errorf("SELECT through the tail during the outage: %q, %v; want 1 2", got, err)
	}
	time.Sleep(time.Second) // the tail's listen meets the outage
	// A new fast-path subscribe cannot read the shard: it fails with an
	// error that says so (58000), and the session goes on.
	_, err := c.Exec(ctx, "SUBSCRIBE t").ReadAll()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "58000" || !strings.Contains(pe.Message, "storage unavailable") {
		t.Errorf("a new fast-path SUBSCRIBE during the outage: %v, want 58000 shared storage unavailable", err)
	}
	select {
	case err := <-subDone:
		t.Fatalf("the fast-path subscriber ended with the storage outage: %v", err)
	default:
	}

	blobProxy.restore()
	consProxy.restore()
	exec1(t, c, "INSERT INTO t VALUES (3, 'three')")
	waitRows(t, sub, "3")
	select {
	case err := <-subDone:
		t.Fatalf("the fast-path subscriber ended: %v", err)
	default:
	}
	_, rows := sub.state()
	var keys []string
	for _, r := range rows {
		keys = append(keys, strings.Fields(r)[2])
	}
	if strings.Join(keys, " ") != "1 2 3" {
		t.Errorf("rows across the outage: %q, want keys 1 2 3 once each", rows)
	}
}
