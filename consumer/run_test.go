package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/subscribe"
)

// mapTarget is a target that holds a multiset of rows (rendered as text)
// and its position, updated together under one lock: exactly once, like a
// database sink with its checkpoint in the same transaction.
type mapTarget struct {
	mu      sync.Mutex
	rows    map[string]int64
	pos     consumer.Position
	pending map[string]int64 // written, not yet committed
	replace bool             // pending is a new generation's snapshot
	batches []consumer.Batch
}

func newMapTarget() *mapTarget {
	return &mapTarget{rows: map[string]int64{}, pending: map[string]int64{}}
}

func (m *mapTarget) Write(_ context.Context, b consumer.Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batches = append(m.batches, b)
	if b.Generation != m.pos.Generation && b.Snapshot {
		// A re-snapshot replaces the target when it commits.
		m.replace = true
	}
	for _, u := range b.Updates {
		m.pending[fmt.Sprint(u.Values...)] += u.Diff
	}
	return nil
}

func (m *mapTarget) Abort(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.pending)
	m.replace = false
	return nil
}

func (m *mapTarget) Load(context.Context) (consumer.Position, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pos, nil
}

func (m *mapTarget) Commit(_ context.Context, expected, next consumer.Position) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.pos.Equal(expected) {
		return consumer.ErrFenced
	}
	if m.replace {
		clear(m.rows)
		m.replace = false
	}
	for k, d := range m.pending {
		m.rows[k] += d
		if m.rows[k] == 0 {
			delete(m.rows, k)
		}
	}
	clear(m.pending)
	m.pos = next
	return nil
}

func (m *mapTarget) snapshot() (map[string]int64, consumer.Position) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.rows), m.pos
}

func mustExec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// tableRows reads the source table as the multiset a mapTarget holds.
func tableRows(t *testing.T, conn *pgx.Conn, table string) map[string]int64 {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT * FROM "+table)
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	got := map[string]int64{}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		got[fmt.Sprint(vals...)]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// runUntil runs consumer.Run in the background until the target equals
// want, then cancels it and returns Run's error.
func runUntil(t *testing.T, cfg consumer.Config, target *mapTarget, want map[string]int64) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx, cfg, target) }()
	deadline := time.After(30 * time.Second)
	for {
		got, _ := target.snapshot()
		if maps.Equal(got, want) {
			cancel()
			return <-done
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("Run ended early: %v; target %v, want %v", err, got, want)
		case <-deadline:
			cancel()
			<-done
			t.Fatalf("target %v, want %v", got, want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestRunLandsAndResumes lands a table through Run, stops, changes the
// table, and resumes from the checkpoint: the target equals the table both
// times and the resume started where the first run committed.
func TestRunLandsAndResumes(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("FastPath=%v", fast), func(t *testing.T) {
			srv := testserver.Start(t, testserver.Options{FastPath: &fast, Tick: 20 * time.Millisecond})
			conn := connect(t, srv.URL())
			mustExec(t, conn, "CREATE TABLE t (id int, v text)")
			mustExec(t, conn, "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")

			target := newMapTarget()
			cfg := consumer.Config{
				URL:           srv.URL(),
				Sources:       []consumer.Source{{Name: "t"}},
				Checkpoint:    target,
				MaxBatchDelay: 10 * time.Millisecond,
				FetchTimeout:  10 * time.Millisecond,
			}
			if err := runUntil(t, cfg, target, tableRows(t, conn, "t")); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run = %v, want context.Canceled", err)
			}
			_, pos1 := target.snapshot()
			if pos1.Frontier == 0 {
				t.Fatalf("nothing committed")
			}
			if !target.batches[0].Snapshot {
				t.Errorf("first batch is not marked Snapshot")
			}

			mustExec(t, conn, "DELETE FROM t WHERE id = 2")
			mustExec(t, conn, "UPDATE t SET v = 'z' WHERE id = 3")
			mustExec(t, conn, "INSERT INTO t VALUES (4, 'd')")
			n := len(target.batches)
			if err := runUntil(t, cfg, target, tableRows(t, conn, "t")); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run = %v, want context.Canceled", err)
			}
			resumed := target.batches[n]
			if resumed.Lower != pos1.Frontier || resumed.Snapshot {
				t.Errorf("resumed batch [%d,%d) snapshot=%v, want lower %d and no snapshot",
					resumed.Lower, resumed.Upper, resumed.Snapshot, pos1.Frontier)
			}
		})
	}
}

// TestRunHistoryLost: a checkpoint below the collection's since is told
// apart from a resumable failure by the server's DETAIL; by default Run
// re-snapshots into a new generation that replaces the target, and with
// Stop it returns ErrHistoryLost.
func TestRunHistoryLost(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Tick: 10 * time.Millisecond})
	conn := connect(t, srv.URL())
	mustExec(t, conn, "CREATE TABLE t (id int, v text)")
	mustExec(t, conn, "ALTER TABLE t SET (RETAIN HISTORY FOR '0s')")
	mustExec(t, conn, "INSERT INTO t VALUES (1, 'a'), (2, 'b')")
	target := newMapTarget()
	cfg := consumer.Config{
		URL:           srv.URL(),
		Sources:       []consumer.Source{{Name: "t"}},
		Checkpoint:    target,
		MaxBatchDelay: time.Millisecond,
		FetchTimeout:  10 * time.Millisecond,
	}
	if err := runUntil(t, cfg, target, tableRows(t, conn, "t")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	_, pos := target.snapshot()

	// While the consumer is away the table changes and its since passes
	// the checkpoint.
	mustExec(t, conn, "DELETE FROM t WHERE id = 1")
	mustExec(t, conn, "INSERT INTO t VALUES (3, 'c')")
	waitSincePast(t, srv.URL(), consumer.Source{Name: "t"}, pos.Frontier)

	stop := cfg
	stop.OnHistoryLost = consumer.Stop
	if err := consumer.Run(context.Background(), stop, target); !errors.Is(err, consumer.ErrHistoryLost) {
		t.Fatalf("Run with Stop = %v, want ErrHistoryLost", err)
	}
	if err := runUntil(t, cfg, target, tableRows(t, conn, "t")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if _, pos := target.snapshot(); pos.Generation != 1 {
		t.Errorf("generation %d after the re-snapshot, want 1", pos.Generation)
	}
}

// waitSincePast waits until resuming src from f fails with history loss.
func waitSincePast(t *testing.T, url string, src consumer.Source, f consumer.Frontier) {
	t.Helper()
	conn := connect(t, url)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mustExec(t, conn, "INSERT INTO t VALUES (0, 'tick')")
		mustExec(t, conn, "DELETE FROM t WHERE id = 0")
		mustExec(t, conn, "BEGIN")
		mustExec(t, conn, "DECLARE c CURSOR FOR "+src.Statement(f))
		_, err := conn.Exec(context.Background(), "FETCH 1 c WITH (TIMEOUT = '0s')")
		conn.Exec(context.Background(), "ROLLBACK") //nolint:errcheck // ends the failed block
		if err != nil {
			if got := consumer.Classify(err); got != consumer.ClassHistoryLost {
				t.Fatalf("resume below since: %v classified %v, want history_lost", err, got)
			}
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Detail != subscribe.DetailHistoryLost {
				t.Fatalf("resume below since: %v, want DETAIL %q", err, subscribe.DetailHistoryLost)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("since never passed %d", f)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunSeveralCollections: two tables written in one transaction always
// land in the same batch, and one checkpoint resumes both.
func TestRunSeveralCollections(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Tick: 10 * time.Millisecond})
	conn := connect(t, srv.URL())
	mustExec(t, conn, "CREATE TABLE a (x int)")
	mustExec(t, conn, "CREATE TABLE b (y int)")
	mustExec(t, conn, "INSERT INTO a VALUES (0)")
	target := newMapTarget()
	cfg := consumer.Config{
		URL:           srv.URL(),
		Sources:       []consumer.Source{{Name: "a"}, {Name: "b"}},
		Checkpoint:    target,
		MaxBatchDelay: time.Millisecond,
		FetchTimeout:  5 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx, cfg, target) }()
	for i := 1; i <= 20; i++ {
		mustExec(t, conn, "BEGIN")
		mustExec(t, conn, fmt.Sprintf("INSERT INTO a VALUES (%d)", i))
		mustExec(t, conn, fmt.Sprintf("INSERT INTO b VALUES (%d)", -i))
		mustExec(t, conn, "COMMIT")
	}
	want := map[string]int64{}
	for i := 0; i <= 20; i++ {
		want[fmt.Sprint(i)] = 1
		if i > 0 {
			want[fmt.Sprint(-i)] = 1
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for got, _ := target.snapshot(); !maps.Equal(got, want); got, _ = target.snapshot() {
		if time.Now().After(deadline) {
			t.Fatalf("target %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	target.mu.Lock()
	defer target.mu.Unlock()
	where := map[string]int{} // value -> batch index
	for bi, b := range target.batches {
		for _, u := range b.Updates {
			if want := map[bool]int{true: 0, false: 1}[fmt.Sprint(u.Values...)[0] != '-']; u.Collection != want {
				t.Errorf("update %v from collection %d, want %d", u.Values, u.Collection, want)
			}
			where[fmt.Sprint(u.Values...)] = bi
		}
	}
	for i := 1; i <= 20; i++ {
		if a, b := where[fmt.Sprint(i)], where[fmt.Sprint(-i)]; a != b {
			t.Errorf("transaction %d split: a in batch %d, b in batch %d", i, a, b)
		}
	}
}

// TestRunObjectReplaced: the checkpoint records the collection's id; a
// drop and recreate under the same name, while Run is away or while it
// runs, is reported as ErrObjectReplaced, and with ResnapshotOnReplace the
// new object is landed as a new generation. A name that needs quoting is
// looked up as well as a plain one.
func TestRunObjectReplaced(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Tick: 10 * time.Millisecond})
	conn := connect(t, srv.URL())
	for _, name := range []string{"t", `"Order ""Lines"""`} {
		t.Run(name, func(t *testing.T) {
			testObjectReplaced(t, srv.URL(), conn, name)
		})
	}
}

func testObjectReplaced(t *testing.T, url string, conn *pgx.Conn, name string) {
	mustExec(t, conn, "CREATE TABLE "+name+" (id int)")
	mustExec(t, conn, "INSERT INTO "+name+" VALUES (1)")
	target := newMapTarget()
	cfg := consumer.Config{
		URL:           url,
		Sources:       []consumer.Source{{Name: name}},
		Checkpoint:    target,
		MaxBatchDelay: time.Millisecond,
		FetchTimeout:  5 * time.Millisecond,
	}
	if err := runUntil(t, cfg, target, tableRows(t, conn, name)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	if _, pos := target.snapshot(); len(pos.Objects) != 1 || pos.Objects[0][0] != 'u' {
		t.Fatalf("checkpoint objects %v, want the table's id", pos.Objects)
	}

	t.Run("WhileAway", func(t *testing.T) {
		mustExec(t, conn, "DROP TABLE "+name)
		mustExec(t, conn, "CREATE TABLE "+name+" (id int)")
		if err := consumer.Run(context.Background(), cfg, target); !errors.Is(err, consumer.ErrObjectReplaced) {
			t.Fatalf("Run = %v, want ErrObjectReplaced", err)
		}
	})
	t.Run("Resnapshot", func(t *testing.T) {
		mustExec(t, conn, "INSERT INTO "+name+" VALUES (2)")
		re := cfg
		re.OnObjectReplaced = consumer.ResnapshotOnReplace
		if err := runUntil(t, re, target, tableRows(t, conn, name)); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v", err)
		}
		if _, pos := target.snapshot(); pos.Generation != 1 {
			t.Errorf("generation %d, want 1", pos.Generation)
		}
	})
	t.Run("WhileRunning", func(t *testing.T) {
		done := make(chan error, 1)
		go func() { done <- consumer.Run(context.Background(), cfg, target) }()
		time.Sleep(100 * time.Millisecond) // subscribed (or not yet: either way the ids differ)
		mustExec(t, conn, "DROP TABLE "+name)
		mustExec(t, conn, "CREATE TABLE "+name+" (id int)")
		select {
		case err := <-done:
			if !errors.Is(err, consumer.ErrObjectReplaced) {
				t.Fatalf("Run = %v, want ErrObjectReplaced", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not notice the replacement")
		}
	})
}

// TestRunKeepsJSONBText: a jsonb value reaches the sink as the server's
// text, byte for byte (key order, every digit of a number), not as pgx's
// decoding into Go maps and float64s, which a sink could only re-encode
// with keys reordered and numbers rounded.
func TestRunKeepsJSONBText(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Tick: 20 * time.Millisecond})
	conn := connect(t, srv.URL())
	mustExec(t, conn, "CREATE TABLE docs (id int, doc jsonb)")
	mustExec(t, conn, `INSERT INTO docs VALUES
		(1, '{"b": 1.0, "aa": 12345678901234567890.5, "a": [0.1, 1e-7, 100000000000000000001]}'),
		(2, '{"z": "<é&>", "y": {"k": -0.000000000000000000001}}'),
		(3, NULL)`)
	want := map[int32]string{}
	rows, err := conn.Query(context.Background(), "SELECT id, doc FROM docs")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int32
		var doc *string // the server's text, as pgx scans jsonb into a string
		if err := rows.Scan(&id, &doc); err != nil {
			t.Fatal(err)
		}
		if doc != nil {
			want[id] = *doc
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	got := map[int32]any{}
	sink := consumer.SinkFunc(func(_ context.Context, b consumer.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, u := range b.Updates {
			got[u.Values[0].(int32)] = u.Values[1]
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var cp consumer.MemoryCheckpoint
	go func() {
		done <- consumer.Run(ctx, consumer.Config{URL: srv.URL(), Sources: []consumer.Source{{Name: "docs"}}, Checkpoint: &cp}, sink)
	}()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("landed %d of 3 rows", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for id := int32(1); id <= 3; id++ {
		v := got[id]
		if id == 3 {
			if v != nil {
				t.Errorf("row 3: doc = %#v, want nil (SQL NULL)", v)
			}
			continue
		}
		raw, ok := v.(json.RawMessage)
		if !ok {
			t.Errorf("row %d: doc is %T, want json.RawMessage", id, v)
			continue
		}
		if string(raw) != want[id] {
			t.Errorf("row %d: doc\ngot  %s\nwant %s", id, raw, want[id])
		}
	}
}
