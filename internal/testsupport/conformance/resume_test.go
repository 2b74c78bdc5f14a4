package conformance_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/internal/testsupport/conformance"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// resumeSeeds are the seeds of TestResumeContract, each a table of its own
// on one server per path.
var resumeSeeds = []uint64{1, 2, 3, 4}

// TestResumeContract checks SUBSCRIBE-SPEC.md's resume contract with
// random writes, on both paths: a subscriber with PROGRESS is killed (its
// connection closed) at a random point; re-subscribing AS OF F - 1 WITH
// (SNAPSHOT = false, PROGRESS) from its last progress F, the rows it had
// below F followed by the new subscriber's rows must equal, timestamp by
// timestamp as multisets, the stream of a subscriber that was never
// interrupted: no gap, no duplicate.
func TestResumeContract(t *testing.T) {
	for _, p := range conformance.Paths {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			fast := p.Fast
			srv := testserver.Start(t, testserver.Options{FastPath: &fast, Tick: 20 * time.Millisecond})
			for _, seed := range resumeSeeds {
				t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					checkResume(ctx, t, srv, seed)
				})
			}
		})
	}
}

func checkResume(ctx context.Context, t *testing.T, srv *testserver.Server, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	table := fmt.Sprintf("r%d", seed)
	admin := dial(ctx, t, srv)
	mustExec(ctx, t, admin, fmt.Sprintf("CREATE TABLE %s (k int NOT NULL, v int NOT NULL)", table))
	// The contract holds while F - 1 >= since: keep a history longer than
	// the test, so that a slow run under -race cannot lose it.
	mustExec(ctx, t, admin, fmt.Sprintf("ALTER TABLE %s SET (RETAIN HISTORY FOR '1 minute')", table))
	mustExec(ctx, t, admin, fmt.Sprintf("INSERT INTO %s VALUES (1, 1), (2, 2), (2, 2)", table))

	// A: the reference, never interrupted. B: the same AS OF, killed at a
	// random point.
	a := newFollower(ctx, t, srv, fmt.Sprintf("SUBSCRIBE %s WITH (PROGRESS)", table))
	a.fetchUntil(ctx, t, func() bool { return a.seen })
	b := newFollower(ctx, t, srv, fmt.Sprintf("SUBSCRIBE %s WITH (PROGRESS) AS OF %d", table, a.asOf))

	// The writer: random inserts, deletes and updates with small pauses.
	writes := 20 + rng.IntN(20)
	var wg sync.WaitGroup
	wg.Add(1)
	writeErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		wrng := rand.New(rand.NewPCG(seed, 0x3717e))
		w, err := pgconn.Connect(ctx, srv.URL())
		if err != nil {
			writeErr <- err
			return
		}
		defer w.Close(context.Background())
		for range writes {
			k := wrng.IntN(6)
			var q string
			switch wrng.IntN(4) {
			case 0, 1:
				q = fmt.Sprintf("INSERT INTO %s VALUES (%d, %d), (%d, %d)", table, k, wrng.IntN(3), wrng.IntN(6), wrng.IntN(3))
			case 2:
				q = fmt.Sprintf("DELETE FROM %s WHERE k = %d", table, k)
			case 3:
				q = fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE k = %d", table, k)
			}
			if _, err := w.Exec(ctx, q).ReadAll(); err != nil {
				writeErr <- fmt.Errorf("%s: %w", q, err)
				return
			}
			time.Sleep(time.Duration(wrng.IntN(8)) * time.Millisecond)
		}
	}()

	// B reads for a random number of FETCHes (at least until it has seen a
	// progress row after its snapshot), then its connection dies.
	kills := 1 + rng.IntN(12)
	for i := 0; i < kills || b.progress <= b.asOf; i++ {
		b.fetch(ctx, t, fmt.Sprintf("FETCH %d c WITH (TIMEOUT '15ms')", 1+rng.IntN(8)))
		a.fetch(ctx, t, "FETCH ALL c WITH (TIMEOUT '1ms')")
	}
	b.conn.Conn().Close() // no Terminate: the client just disappears
	f := b.progress

	// C resumes from B's last progress.
	c := newFollower(ctx, t, srv, fmt.Sprintf("SUBSCRIBE %s WITH (SNAPSHOT = false, PROGRESS) AS OF %d", table, f-1))
	c.fetch(ctx, t, "FETCH ALL c WITH (TIMEOUT '1ms')") // the first FETCH starts it
	wg.Wait()
	select {
	case err := <-writeErr:
		t.Fatal(err)
	default:
	}
	// Every write is below the AS OF a new subscribe picks now, plus one.
	probe := newFollower(ctx, t, srv, fmt.Sprintf("SUBSCRIBE %s WITH (SNAPSHOT = false, PROGRESS)", table))
	probe.fetchUntil(ctx, t, func() bool { return probe.seen })
	end := probe.asOf + 1
	a.fetchUntil(ctx, t, func() bool { return a.progress >= end })
	c.fetchUntil(ctx, t, func() bool { return c.progress >= end })

	want := a.updates(0, end)
	got := b.updates(0, f)
	for ts, rows := range c.updates(0, end) {
		if ts < f {
			t.Errorf("resumed subscriber sent a row at %d, below its AS OF + 1 = %d", ts, f)
		}
		if _, dup := got[ts]; dup {
			t.Errorf("timestamp %d delivered by both the killed and the resumed subscriber", ts)
		}
		got[ts] = rows
	}
	if !maps.EqualFunc(got, want, maps.Equal) {
		for _, ts := range slices.Sorted(maps.Keys(want)) {
			if !maps.Equal(got[ts], want[ts]) {
				t.Errorf("at %d (F = %d): resumed stream %v, uninterrupted stream %v", ts, f, got[ts], want[ts])
			}
		}
		for ts := range got {
			if _, ok := want[ts]; !ok {
				t.Errorf("at %d (F = %d): resumed stream %v, uninterrupted stream has nothing", ts, f, got[ts])
			}
		}
	}
	t.Logf("seed %d: %d writes, killed after %d fetches at F = AS OF + %d, %d timestamps compared", seed, writes, kills, f-b.asOf, len(want))
}

// follower is a SUBSCRIBE cursor read with FETCH, checking the stream's
// ordering invariants as it goes.
type follower struct {
	conn     *pgconn.PgConn
	rows     []update // data rows in order
	seen     bool     // a progress row was seen
	asOf     uint64   // the first progress row
	progress uint64   // the last progress row
	last     uint64   // the last timestamp
}

type update struct {
	ts   uint64
	row  string
	diff int64
}

func newFollower(ctx context.Context, t *testing.T, srv *testserver.Server, subscribe string) *follower {
	t.Helper()
	c := dial(ctx, t, srv)
	mustExec(ctx, t, c, "BEGIN")
	mustExec(ctx, t, c, "DECLARE c CURSOR FOR "+subscribe)
	return &follower{conn: c}
}

func (f *follower) fetch(ctx context.Context, t *testing.T, sql string) {
	t.Helper()
	res, err := f.conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	for _, r := range res[0].Rows {
		ts, err := strconv.ParseUint(string(r[0]), 10, 64)
		if err != nil {
			t.Fatalf("mz_timestamp %q: %v", r[0], err)
		}
		if ts < f.last {
			t.Fatalf("timestamp went backwards: %d after %d", ts, f.last)
		}
		f.last = ts
		if string(r[1]) == "t" {
			if f.seen && ts <= f.progress {
				t.Fatalf("progress did not advance: %d after %d", ts, f.progress)
			}
			if !f.seen {
				f.asOf = ts
			}
			f.seen, f.progress = true, ts
			continue
		}
		if f.seen && ts < f.progress {
			t.Fatalf("row at %d below the progress frontier %d", ts, f.progress)
		}
		diff, err := strconv.ParseInt(string(r[2]), 10, 64)
		if err != nil {
			t.Fatalf("mz_diff %q: %v", r[2], err)
		}
		f.rows = append(f.rows, update{ts: ts, row: string(r[3]) + "," + string(r[4]), diff: diff})
	}
}

func (f *follower) fetchUntil(ctx context.Context, t *testing.T, done func() bool) {
	t.Helper()
	for !done() {
		if ctx.Err() != nil {
			t.Fatalf("gave up waiting: %v (progress %d)", ctx.Err(), f.progress)
		}
		f.fetch(ctx, t, "FETCH ALL c WITH (TIMEOUT '20ms')")
	}
}

// updates returns the data rows with lo <= ts < hi, by timestamp: row ->
// diff. Within a timestamp a row appears once (consolidated).
func (f *follower) updates(lo, hi uint64) map[uint64]map[string]int64 {
	out := map[uint64]map[string]int64{}
	for _, u := range f.rows {
		if u.ts < lo || u.ts >= hi {
			continue
		}
		if out[u.ts] == nil {
			out[u.ts] = map[string]int64{}
		}
		out[u.ts][u.row] += u.diff
	}
	return out
}

func dial(ctx context.Context, t *testing.T, srv *testserver.Server) *pgconn.PgConn {
	t.Helper()
	c, err := pgconn.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func mustExec(ctx context.Context, t *testing.T, c *pgconn.PgConn, sql string) {
	t.Helper()
	if _, err := c.Exec(ctx, sql).ReadAll(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
