package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/childproc"
	"github.com/shardtail/shardtail/internal/localpg"
	"github.com/shardtail/shardtail/internal/testsupport/testbin"
)

var (
	sinkKills   = flag.Int("sink-kills", 10, "TestSinkPostgresSurvivesKills: SIGKILLs of the sink process (the full proof is 50)")
	serverKills = flag.Int("sink-server-kills", 1, "TestSinkPostgresSurvivesKills: SIGKILL restarts of the shardtail server (the full proof is 5)")
	targetKills = flag.Int("sink-target-kills", 1, "TestSinkPostgresSurvivesKills: crashes (immediate shutdown) and restarts of the target PostgreSQL")
)

// sinkProcess is a running `shardtail sink postgres`.
type sinkProcess struct {
	proc *childproc.Process
}

func startSink(t *testing.T, bin string, args ...string) *sinkProcess {
	t.Helper()
	log := filepath.Join(t.TempDir(), "sink.log")
	proc, err := childproc.Start(bin, append([]string{"sink", "postgres"}, args...), childproc.Options{LogPath: log, StopTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &sinkProcess{proc: proc}
}

// log is what the sink wrote to stdout and stderr.
func (p *sinkProcess) log() string { return p.proc.Log() }

// sigkill kills the sink, which must still be running.
func (p *sinkProcess) sigkill(t *testing.T) {
	t.Helper()
	if exited, err := p.proc.Exited(); exited {
		t.Fatalf("sink exited before the kill: %v\n%s", err, p.log())
	}
	p.proc.Kill()
}

// kill SIGKILLs the process if it still runs and reports whether it did.
func (p *sinkProcess) kill() bool {
	if exited, _ := p.proc.Exited(); exited {
		return false
	}
	p.proc.Kill()
	return true
}

// sinkWriter changes the source table (inserts, updates, deletes over a
// small key space) until stopped, reconnecting across server restarts.
type sinkWriter struct {
	addr    func() string
	changes atomic.Int64
	stop    chan struct{}
	done    chan struct{}
}

func (w *sinkWriter) run(seed uint64) {
	defer close(w.done)
	rng := rand.New(rand.NewPCG(seed, 3))
	var c *pgx.Conn
	defer func() {
		if c != nil {
			c.Close(context.Background())
		}
	}()
	live := map[int]bool{} // the ids in the table, reloaded on reconnect
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		if c == nil {
			var err error
			if c, err = w.connect(live); err != nil {
				c = nil
				time.Sleep(50 * time.Millisecond)
				continue
			}
		}
		// Each statement changes up to forty rows: a few statements per
		// tick write hundreds of changes a second.
		var ids []string
		var picked []int
		op := rng.IntN(3)
		for range 1 + rng.IntN(40) {
			id := rng.IntN(500)
			if live[id] == (op == 0) || slices.Contains(picked, id) {
				continue
			}
			picked = append(picked, id)
			ids = append(ids, fmt.Sprint(id))
		}
		if len(ids) == 0 {
			continue
		}
		var q string
		switch op {
		case 0:
			q = "INSERT INTO items VALUES (" + strings.Join(ids, ", 0), (") + ", 0)"
		case 1:
			q = "UPDATE items SET v = v + 1 WHERE id IN (" + strings.Join(ids, ", ") + ")"
		default:
			q = "DELETE FROM items WHERE id IN (" + strings.Join(ids, ", ") + ")"
		}
		if _, err := c.Exec(context.Background(), q); err != nil {
			// Applied or not: the reconnect reloads what is live.
			c.Close(context.Background())
			c = nil
			continue
		}
		for _, id := range picked {
			live[id] = op != 2
		}
		w.changes.Add(int64(len(picked)))
	}
}

// connect connects to the current server and reloads the live ids.
func (w *sinkWriter) connect(live map[int]bool) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, "postgres://materialize@"+w.addr()+"/materialize?sslmode=disable")
	if err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, "SELECT id FROM items")
	if err != nil {
		c.Close(ctx)
		return nil, err
	}
	clear(live)
	for rows.Next() {
		var id int32
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			c.Close(ctx)
			return nil, err
		}
		live[int(id)] = true
	}
	if err := rows.Err(); err != nil {
		c.Close(ctx)
		return nil, err
	}
	return c, nil
}

// TestSinkPostgresSurvivesKills is the sink's proof, reduced (flags give
// the full one): a writer changes a shardtail table while the sink process
// is SIGKILLed at random moments and the server is SIGKILLed and
// restarted; for a while a second sink process with the same name runs
// alongside. At the end the target table equals the source row for row,
// and SIGTERM ends the sink with status 0.
func TestSinkPostgresSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the binary repeatedly")
	}
	bin := testbin.Build(t)
	dataDir := t.TempDir()
	pg, err := localpg.Start(context.Background(), localpg.Options{})
	if err != nil {
		t.Fatalf("target PostgreSQL: %v", err)
	}
	defer pg.Stop()
	target := pg.URL
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	var mu sync.Mutex
	srv := startBinary(t, bin, dataDir)
	addr := srv.addr
	c := srv.connect(t)
	// An hour of history, as a deployment that lands a collection keeps:
	// a sink killed and restarted resumes where it was (with the default
	// 1 s, a restart on a loaded machine re-snapshots every time, which
	// consumer's history-loss tests cover on their own).
	if _, err := c.Exec(context.Background(), "CREATE TABLE items (id int, v int) WITH (RETAIN HISTORY FOR '1h')"); err != nil {
		t.Fatal(err)
	}
	c.Close(context.Background())

	w := &sinkWriter{addr: func() string { mu.Lock(); defer mu.Unlock(); return addr }, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run(rng.Uint64())
	defer func() {
		select {
		case <-w.stop:
		default:
			close(w.stop)
		}
		<-w.done
	}()

	args := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return []string{"--source", "postgres://materialize@" + addr + "/materialize?sslmode=disable", "--target", target,
			"--collection", "items", "--key", "id", "--name", "proof",
			"--max-batch-delay", "20ms", "--progress-interval", "0", "--max-attempts", "1000"}
	}
	kills := *sinkKills + *serverKills + *targetKills
	var serverKillAt, targetKillAt []int
	for range *serverKills {
		serverKillAt = append(serverKillAt, rng.IntN(kills))
	}
	for range *targetKills {
		targetKillAt = append(targetKillAt, rng.IntN(kills))
	}
	twin := rng.IntN(kills)
	// The sink is killed at least kills times, and until the writer has
	// made enough changes under the kills for the check to mean something
	// (a loaded machine writes fewer per cycle).
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; i < kills || w.changes.Load() < 500; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("only %d changes written in %d kill cycles", w.changes.Load(), i)
		}
		p := startSink(t, bin, args()...)
		var second *sinkProcess
		if i == twin {
			second = startSink(t, bin, args()...)
		}
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		if slices.Contains(serverKillAt, i) {
			srv.kill(t)
			srv = startBinary(t, bin, dataDir)
			mu.Lock()
			addr = srv.addr
			mu.Unlock()
			// The sink retries on its old address, which is gone: it
			// is killed below and restarted on the new one.
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		}
		if slices.Contains(targetKillAt, i) {
			if err := pg.Crash(context.Background()); err != nil {
				t.Fatalf("restart target: %v", err)
			}
			mu.Lock()
			target = pg.URL
			mu.Unlock()
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		}
		if second == nil {
			p.sigkill(t)
			continue
		}
		// Two sinks with one name: one may have been fenced, and that
		// is the only way either may have ended.
		for _, q := range []*sinkProcess{p, second} {
			if !q.kill() && !strings.Contains(q.log(), "fenced") {
				t.Fatalf("twin sink exited:\n%s", q.log())
			}
		}
	}
	close(w.stop)
	<-w.done

	p := startSink(t, bin, args()...)
	src := srv.connect(t)
	defer src.Close(context.Background())
	dst, err := pgx.Connect(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close(context.Background())
	want := tableText(t, src, "SELECT id, v FROM items")
	deadline = time.Now().Add(60 * time.Second)
	for {
		got := tableText(t, dst, "SELECT id, v FROM items WHERE true")
		if slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("target differs from source after %d changes:\ntarget %v\nsource %v\nsink log:\n%s", w.changes.Load(), got, want, p.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := p.proc.Stop(); err != nil {
		t.Fatalf("sink SIGTERM: %v\n%s", err, p.log())
	}
	if _, err := p.proc.Exited(); err != nil {
		t.Fatalf("sink after SIGTERM: %v\n%s", err, p.log())
	}
	if !strings.Contains(p.log(), "updates landed") {
		t.Errorf("no progress line on stderr:\n%s", p.log())
	}
	t.Logf("%d changes, %d sink kills, %d server kills, %d target crashes; %d rows at the end", w.changes.Load(), *sinkKills, *serverKills, *targetKills, len(want))
}

// tableText reads rows as sorted text lines; a missing table reads as
// empty.
func tableText(t *testing.T, c *pgx.Conn, q string) []string {
	t.Helper()
	rows, err := c.Query(context.Background(), q, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return nil
		}
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var f []string
		for _, raw := range rows.RawValues() {
			f = append(f, string(raw))
		}
		out = append(out, strings.Join(f, "|"))
	}
	if err := rows.Err(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("%s: %v", q, err)
	}
	slices.Sort(out)
	return out
}
