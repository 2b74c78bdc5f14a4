package deploytest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/internal/pgtest"
	"github.com/shardtail/shardtail/internal/s3test"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// buildBinary builds cmd/shardtail once per test binary.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shardtail-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "shardtail")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/shardtail/shardtail/cmd/shardtail").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is one running shardtail process.
type proc struct {
	name string
	addr string
	cmd  *exec.Cmd
	log  *strings.Builder
	mu   sync.Mutex
}

func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, addr: freePort(t), log: &strings.Builder{}}
	args = append([]string{"serve", "--listen", p.addr, "--http-listen", freePort(t), "--tick", "100ms"}, args...)
	p.cmd = exec.Command(binary(t), args...)
	p.cmd.Stdout = &lockedWriter{p: p}
	p.cmd.Stderr = &lockedWriter{p: p}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		if t.Failed() {
			t.Logf("%s log:\n%s", p.name, p.logText())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := pgconn.Connect(context.Background(), p.url())
		if err == nil {
			c.Close(context.Background())
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start: %v\n%s", name, err, p.logText())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type lockedWriter struct{ p *proc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.log.Write(b)
}

func (p *proc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
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

// TestTailProcesses is the scaled deployment: one role-all server and two
// tail processes on shared S3 (over HTTP) and PostgreSQL. Writes go through
// a tail's proxy; subscribers on both tails and on the upstream see the
// same stream; a tail killed with SIGKILL mid-stream loses its clients,
// which resume on the other tail from their last progress with no gap and
// no duplicate.
func TestTailProcesses(t *testing.T) {
	storage := []string{"--blob", s3test.URL(t), "--consensus", pgtest.URL(t)}
	up := startProc(t, "upstream", storage...)
	tail1 := startProc(t, "tail1", append(storage, "--upstream", up.addr)...)
	tail2 := startProc(t, "tail2", append(storage, "--upstream", up.addr)...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	w := connect(t, tail1) // writes through a tail's proxy
	exec1(t, w, "CREATE TABLE t (k int8 NOT NULL, v text)")
	exec1(t, w, "INSERT INTO t VALUES (0, 'initial')")

	// The first subscriber fixes AS OF; the others start at the same time
	// so that all streams are comparable row for row.
	onUp := newStream()
	go subscribe(ctx, up.url(), "SUBSCRIBE t WITH (PROGRESS)", onUp)
	waitProgress(t, 0, onUp)
	asOf := onUp.asOf
	q := fmt.Sprintf("SUBSCRIBE t WITH (PROGRESS) AS OF %d", asOf)
	onTail2 := newStream()
	go subscribe(ctx, tail2.url(), q, onTail2)
	moving := newStream() // starts on tail1, moves to tail2
	movingDone := make(chan error, 1)
	go func() { movingDone <- subscribe(ctx, tail1.url(), q, moving) }()
	waitProgress(t, asOf, onTail2, moving)

	w2 := connect(t, tail2)
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
			// Kill tail1 mid-stream; its client resumes on tail2 from the
			// last progress it saw.
			tail1.cmd.Process.Signal(syscall.SIGKILL)
			<-movingDone
			f, _ := moving.state()
			resume := fmt.Sprintf("SUBSCRIBE t WITH (SNAPSHOT = false, PROGRESS) AS OF %d", f-1)
			go subscribe(ctx, tail2.url(), resume, moving)
			// The write path moves to tail2 too.
			w = w2
		}
	}
	// The last write's time: every stream must pass it.
	final := newStream()
	go subscribe(ctx, up.url(), "SUBSCRIBE t WITH (PROGRESS)", final)
	waitProgress(t, 0, final)
	last := final.asOf
	waitProgress(t, last, onUp, onTail2, moving)

	_, upRows := onUp.state()
	_, t2Rows := onTail2.state()
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
