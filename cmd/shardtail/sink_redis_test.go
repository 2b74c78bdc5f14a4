package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/internal/testsupport/redistest"
	"github.com/shardtail/shardtail/internal/testsupport/testbin"
	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/row"
)

var redisSinkFull = flag.Bool("redis-sink-full", false,
	"TestRedisSinkSurvivesKills at full size: 1,000 keys at up to 1,000 changes/s, 30 sink kills, 3 Redis and 3 server restarts")

// redisProof sizes TestRedisSinkSurvivesKills.
type redisProof struct {
	keys           int
	rate           int // changes/s across all writers, at most
	sinkKills      int
	redisRestarts  int
	serverRestarts int
}

// kvCols is the relation of the proof: kv (id int, n bigint, s text).
var kvCols = []row.Column{{Name: "id", Type: row.TypeInt4}, {Name: "n", Type: row.TypeInt8}, {Name: "s", Type: row.TypeText}}

// TestRedisSinkSurvivesKills is the Redis sink's proof: writers change a
// table's keys while `shardtail sink redis` lands it; the sink is SIGKILLed
// at random moments and restarted, Redis (appendonly) and the shardtail
// server are SIGKILLed and restarted, and stale writes are injected past the
// sink straight into Redis. At the end the active generation holds exactly
// the source's rows rendered by the key contract (no key missing, none
// extra, every value equal), and the timestamp guard (or the fence) refused
// every injected write. Reduced in make test; -redis-sink-full for the
// issue's sizes.
func TestRedisSinkSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it repeatedly")
	}
	p := redisProof{keys: 200, rate: 400, sinkKills: 5, redisRestarts: 1, serverRestarts: 1}
	if *redisSinkFull {
		p = redisProof{keys: 1000, rate: 1000, sinkKills: 30, redisRestarts: 3, serverRestarts: 3}
	}
	bin := testbin.Build(t)
	dataDir := t.TempDir()
	srv := startBinary(t, bin, dataDir)
	addr := srv.addr // restarts listen here again, where the sink and writers reconnect
	url := "postgres://materialize@" + addr + "/materialize?sslmode=disable"
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, MaxRetries: -1})
	defer rdb.Close()

	ctx := context.Background()
	setup := srv.connect(t)
	if _, err := setup.Exec(ctx, "CREATE TABLE kv (id int NOT NULL, n bigint, s text) WITH (RETAIN HISTORY FOR '1h')"); err != nil {
		t.Fatal(err)
	}
	var vals []string
	for id := range p.keys {
		vals = append(vals, fmt.Sprintf("(%d, 0, 'k%d')", id, id))
	}
	if _, err := setup.Exec(ctx, "INSERT INTO kv VALUES "+strings.Join(vals, ", ")); err != nil {
		t.Fatal(err)
	}
	setup.Close(ctx)

	sink := startSinkSupervisor(t, bin, "sink", "redis", "--source", url, "--collection", "kv", "--key", "id",
		"--target", rs.URL(), "--max-batch-delay", "20ms", "--progress-interval", "0")
	defer sink.stop(t)

	w := startKVWriters(t, url, p.keys, p.rate)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var injected, refused atomic.Int64
	events := make([]string, 0, p.sinkKills+p.redisRestarts+p.serverRestarts)
	for range p.sinkKills {
		events = append(events, "sink")
	}
	for range p.redisRestarts {
		events = append(events, "redis")
	}
	for range p.serverRestarts {
		events = append(events, "server")
	}
	rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	for _, ev := range events {
		time.Sleep(time.Duration(200+rng.IntN(500)) * time.Millisecond)
		injectStale(t, rdb, rng, &injected, &refused)
		switch ev {
		case "sink":
			sink.kill()
		case "redis":
			rs.Restart(t)
		case "server":
			srv.kill(t)
			srv = startBinary(t, bin, dataDir, "--listen", addr)
		}
	}
	time.Sleep(300 * time.Millisecond)
	injectStale(t, rdb, rng, &injected, &refused)
	changes, elapsed := w.stop()
	t.Logf("writers: %d changes in %v (%.0f/s); sink: %d kills, %d exits of its own; %d Redis and %d server restarts",
		changes, elapsed.Round(time.Millisecond), float64(changes)/elapsed.Seconds(), p.sinkKills, sink.selfExits.Load(), p.redisRestarts, p.serverRestarts)

	want := sourceRows(t, url)
	waitForRedis(t, rdb, want, sink)
	if got, want := refused.Load(), injected.Load(); got != want || want == 0 {
		t.Errorf("stale writes refused = %d of %d injected (want all, and some)", got, want)
	}
	t.Logf("stale writes injected and refused: %d", injected.Load())
	for _, line := range strings.Split(sink.log(), "\n") {
		if strings.HasPrefix(line, "shardtail:") {
			t.Logf("a sink run ended with: %s", line) // its exit of its own, restarted
		}
	}
	if code := sink.term(t); code != 0 {
		t.Errorf("sink exit status after SIGTERM = %d, want 0\n%s", code, sink.log())
	}
}

// sourceRows reads kv from the server and renders it by the key contract:
// key JSON array → value JSON. The simple protocol returns Postgres text,
// which pgrepr parses: independent of how the sink decodes values.
func sourceRows(t *testing.T, url string) map[string]string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT id, n, s FROM kv", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		r := make(row.Row, len(kvCols))
		for i, raw := range rows.RawValues() {
			if raw == nil {
				continue
			}
			d, err := pgrepr.ParseText(kvCols[i].Type, string(raw))
			if err != nil {
				t.Fatal(err)
			}
			r[i] = d
		}
		out[string(consumer.KeyJSON(nil, "", kvCols, []int{0}, r))] = string(consumer.ValueJSON(nil, kvCols, r))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// activeRows reads the active generation of namespace kv: as sourceRows.
func activeRows(ctx context.Context, rdb *redis.Client) (map[string]string, error) {
	prefix, err := rdb.Get(ctx, "kv:active").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	iter := rdb.Scan(ctx, 0, strings.ReplaceAll(prefix, "[", `\[`)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		v, err := rdb.HGet(ctx, k, "v").Result()
		if err != nil {
			return nil, fmt.Errorf("HGET %s v: %w", k, err)
		}
		out[k[len(prefix):]] = v
	}
	return out, iter.Err()
}

// waitForRedis waits until the active generation equals want, and fails
// with the difference if it does not within two minutes.
func waitForRedis(t *testing.T, rdb *redis.Client, want map[string]string, sink *sinkSupervisor) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var got map[string]string
	var err error
	for time.Now().Before(deadline) {
		if got, err = activeRows(context.Background(), rdb); err == nil && maps.Equal(got, want) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("the active generation did not converge to the source (%d keys, want %d; last error %v)", len(got), len(want), err)
	n := 0
	for k, v := range want {
		if got[k] != v && n < 10 {
			t.Errorf("key %s: got %q, want %q", k, got[k], v)
			n++
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && n < 20 {
			t.Errorf("extra key %s", k)
			n++
		}
	}
	t.Fatalf("sink log:\n%s", sink.log())
}

// injectStale sends, past the sink, a write older than a stored row of the
// active generation straight to shardtail_apply, as a late worker would:
// the current checkpoint (so the fence lets it through), a partial chunk
// (so it does not move the checkpoint), the stored timestamp minus one.
// Each injection must be refused: by the timestamp guard, or by the fence
// if the checkpoint moved in between; never applied.
func injectStale(t *testing.T, rdb *redis.Client, rng *rand.Rand, injected, refused *atomic.Int64) {
	t.Helper()
	ctx := context.Background()
	vals, err := rdb.MGet(ctx, "kv:checkpoint", "kv:active").Result()
	if err != nil {
		return // Redis restarting: nothing to inject into
	}
	cp, _ := vals[0].(string)
	prefix, _ := vals[1].(string)
	if cp == "" || prefix == "" {
		return
	}
	for range 5 {
		key := prefix + "[" + strconv.Itoa(rng.IntN(50)) + "]"
		ts, err := rdb.HGet(ctx, key, "ts").Uint64()
		if err != nil || ts == 0 {
			continue
		}
		op := []any{"u" + strconv.FormatUint(ts-1, 10), `{"stale":true}`}
		if rng.IntN(2) == 0 {
			op = []any{"d" + strconv.FormatUint(ts-1, 10)}
		}
		args := append([]any{cp, "", "", prefix, "0"}, op...)
		res, err := rdb.FCall(ctx, "shardtail_apply", []string{"kv:checkpoint", "kv:active", "kv:loading", key}, args...).Int64Slice()
		injected.Add(1)
		switch {
		case err != nil && strings.HasPrefix(err.Error(), "FENCED"):
			refused.Add(1)
		case err != nil:
			t.Errorf("inject a stale write of %s: %v", key, err)
		case res[0] == 0 && res[1] == 1:
			refused.Add(1)
		default:
			t.Errorf("a stale write of %s at %d was applied: %v", key, ts-1, res)
		}
	}
}

// kvWriters change kv's rows from several connections until stop.
type kvWriters struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	changes atomic.Int64
	start   time.Time
}

// startKVWriters starts writers (4, or 8 above 500 changes/s), each owning
// the ids i mod writers, updating
// (mostly), deleting and re-inserting rows at up to rate changes/s in all,
// several rows per statement (one statement commits in about a tick); they
// reconnect after a server restart.
func startKVWriters(t *testing.T, url string, keys, rate int) *kvWriters {
	t.Helper()
	writers := 4
	if rate > 500 {
		writers = 8
	}
	const statementsPerSecond = 5 // per writer, about what the server commits on this machine
	perStatement := max(1, rate/(writers*statementsPerSecond))
	ctx, cancel := context.WithCancel(context.Background())
	w := &kvWriters{cancel: cancel, start: time.Now()}
	for i := range writers {
		w.wg.Add(1)
		go func() { // owned by w: ends when stop cancels ctx
			defer w.wg.Done()
			w.write(ctx, url, i, writers, keys, perStatement)
		}()
	}
	return w
}

// write is writer i's loop: ids i, i+n, i+2n, … below keys, k of them per
// statement.
func (w *kvWriters) write(ctx context.Context, url string, i, n, keys, k int) {
	rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
	// present is this writer's view of its ids; an id whose statement
	// failed (a server restart) is unknown and left alone from then on:
	// the end compares with the source, not with this view.
	present := map[int]bool{}
	for id := i; id < keys; id += n {
		present[id] = true
	}
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for ctx.Err() == nil {
		if conn == nil {
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			conn = c
		}
		// Pick k known ids of one kind: absent ones to insert, or
		// present ones to delete (one in ten) or update.
		kind := "update"
		if rng.IntN(10) == 0 {
			kind = "delete"
		}
		var ids []string
		var picked []int
		for range 4 * k {
			id := i + n*rng.IntN((keys-i+n-1)/n)
			p, known := present[id]
			if !known || slices.Contains(picked, id) {
				continue
			}
			if !p {
				if kind != "insert" && len(picked) > 0 {
					continue
				}
				kind = "insert"
			} else if kind == "insert" {
				continue
			}
			picked = append(picked, id)
			ids = append(ids, strconv.Itoa(id))
			if len(picked) == k {
				break
			}
		}
		if len(picked) == 0 {
			continue
		}
		var sql string
		switch kind {
		case "insert":
			var rows []string
			for _, id := range picked {
				rows = append(rows, fmt.Sprintf("(%d, %d, 'back %d')", id, rng.Int64(), id))
			}
			sql = "INSERT INTO kv VALUES " + strings.Join(rows, ", ")
		case "delete":
			sql = "DELETE FROM kv WHERE id IN (" + strings.Join(ids, ", ") + ")"
		default:
			sql = fmt.Sprintf("UPDATE kv SET n = n + 1, s = 'ü%d' WHERE id IN (%s)", rng.IntN(1000), strings.Join(ids, ", "))
		}
		if _, err := conn.Exec(ctx, sql); err != nil {
			conn.Close(context.Background())
			conn = nil
			for _, id := range picked {
				delete(present, id)
			}
			continue
		}
		for _, id := range picked {
			present[id] = kind != "delete"
		}
		w.changes.Add(int64(len(picked)))
	}
}

// stop stops the writers and returns how many changes they made, in how
// long.
func (w *kvWriters) stop() (int64, time.Duration) {
	w.cancel()
	w.wg.Wait()
	return w.changes.Load(), time.Since(w.start)
}

// sinkSupervisor runs a sink process and restarts it whenever it exits,
// until stop or term: the process supervisor a deployment would have.
type sinkSupervisor struct {
	bin  string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd     // mu must be held.
	done chan struct{} // mu must be held. Closed when cmd has exited.
	logs bytes.Buffer  // mu must be held. Every run's stderr.

	stopping  atomic.Bool
	selfExits atomic.Int64
	loopDone  chan struct{}
}

func startSinkSupervisor(t *testing.T, bin string, args ...string) *sinkSupervisor {
	t.Helper()
	s := &sinkSupervisor{bin: bin, args: args, loopDone: make(chan struct{})}
	if err := s.startLocked(); err != nil {
		t.Fatal(err)
	}
	go s.loop() // owned by s: ends on stop or term
	return s
}

// startLocked starts one run of the sink.
func (s *sinkSupervisor) startLocked() error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stderr = &lockedBuf{s: s}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }() // owned by s: ends when the process exits
	s.cmd, s.done = cmd, done
	return nil
}

// loop restarts the sink after every exit.
func (s *sinkSupervisor) loop() {
	defer close(s.loopDone)
	for {
		s.mu.Lock()
		done, cmd := s.done, s.cmd
		s.mu.Unlock()
		<-done
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			s.selfExits.Add(1)
		}
		time.Sleep(50 * time.Millisecond)
		s.mu.Lock()
		// stopping is set under mu, so a stop that comes later kills
		// the run started here.
		if s.stopping.Load() {
			s.mu.Unlock()
			return
		}
		err := s.startLocked()
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// kill SIGKILLs the running sink; loop restarts it.
func (s *sinkSupervisor) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cmd.Process.Signal(syscall.SIGKILL)
}

// term SIGTERMs the sink and returns its exit status, without restarting.
func (s *sinkSupervisor) term(t *testing.T) int {
	t.Helper()
	s.mu.Lock()
	s.stopping.Store(true)
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Errorf("sink did not exit within 30s of SIGTERM")
	}
	<-s.loopDone
	return cmd.ProcessState.ExitCode()
}

// stop kills the sink for good (test cleanup).
func (s *sinkSupervisor) stop(*testing.T) {
	s.mu.Lock()
	if s.stopping.Swap(true) {
		s.mu.Unlock()
		return
	}
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	cmd.Process.Kill()
	<-done
	<-s.loopDone
}

// log returns the stderr of every run so far.
func (s *sinkSupervisor) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// lockedBuf appends a child's stderr to its supervisor's log.
type lockedBuf struct{ s *sinkSupervisor }

func (b *lockedBuf) Write(p []byte) (int, error) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	return b.s.logs.Write(p)
}
