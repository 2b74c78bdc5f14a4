package pgsink_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/consumer/checkpointtest"
	"github.com/shardtail/shardtail/consumer/pgsink"
	"github.com/shardtail/shardtail/internal/testsupport/pgtest"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func mustExec(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// rowsText reads a query's rows in text format, one string per row, sorted.
func rowsText(t *testing.T, conn *pgx.Conn, query string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), query, pgx.QueryExecModeSimpleProtocol)
	if err != nil && strings.HasSuffix(query, " WHERE true") && strings.Contains(err.Error(), "does not exist") {
		return nil
	}
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	if strings.HasSuffix(query, " WHERE true") {
		// A target that may not exist yet reads as empty.
		var out []string
		for rows.Next() {
			out = append(out, rowText(rows))
		}
		if err := rows.Err(); err != nil && !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("%s: %v", query, err)
		}
		slices.Sort(out)
		return out
	}
	var out []string
	for rows.Next() {
		out = append(out, rowText(rows))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	slices.Sort(out)
	return out
}

// rowText renders the current row's text-format values.
func rowText(rows pgx.Rows) string {
	var fields []string
	for _, raw := range rows.RawValues() {
		if raw == nil {
			fields = append(fields, "NULL")
		} else {
			fields = append(fields, string(raw))
		}
	}
	return strings.Join(fields, "|")
}

func newSink(t *testing.T, cfg pgsink.Config) *pgsink.Sink {
	t.Helper()
	s, err := pgsink.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgsink.New: %v", err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// runUntilEqual runs the consumer until the target table equals the source
// (or fails after a deadline), then stops it with a drain.
func runUntilEqual(t *testing.T, cfg consumer.Config, sink *pgsink.Sink, src, dst *pgx.Conn, table string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx, cfg, sink) }()
	// Run uses the sink until it returns: a failing check below must
	// stop it before the sink's cleanup closes the sink.
	finished := false
	defer func() {
		if !finished {
			cancel()
			<-done
		}
	}()
	q := "SELECT * FROM " + table
	deadline := time.Now().Add(30 * time.Second)
	for {
		want := rowsText(t, src, q)
		got := rowsText(t, dst, q+" WHERE true") // the target may not exist yet
		if slices.Equal(got, want) {
			break
		}
		select {
		case err := <-done:
			finished = true
			t.Fatalf("Run ended: %v; target %v, want %v", err, got, want)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("target %v, want %v", got, want)
		}
	}
	cancel()
	err := <-done
	finished = true
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
}

// TestSinkLandsTable lands a shardtail table into PostgreSQL through Run:
// snapshot, then inserts, updates and deletes; after a restart it resumes
// from the checkpoint in the target.
func TestSinkLandsTable(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Tick: 20 * time.Millisecond})
	src := connect(t, srv.URL())
	targetURL := pgtest.URL(t)
	dst := connect(t, targetURL)
	mustExec(t, dst, "CREATE TABLE orders (placeholder int)") // replaced by the snapshot
	mustExec(t, src, "CREATE TABLE orders (id int, name text, amount numeric, paid bool, at timestamptz)")
	mustExec(t, src, "INSERT INTO orders VALUES (1, 'a', 1.5, true, '2026-01-02 03:04:05+00'), (2, 'b', NULL, false, NULL), (3, 'c', 100, NULL, NULL)")
	mustExec(t, dst, "SET TimeZone = 'UTC'")
	mustExec(t, src, "SET TimeZone = 'UTC'")

	table := pgsink.Table{Name: "orders", Key: []string{"id"}}
	sink := newSink(t, pgsink.Config{URL: targetURL, Name: "test", Tables: []pgsink.Table{table}})
	cfg := consumer.Config{
		URL:           srv.URL(),
		Sources:       []consumer.Source{{Name: "orders", Envelope: table.Envelope()}},
		Checkpoint:    sink,
		MaxBatchDelay: 5 * time.Millisecond,
		FetchTimeout:  10 * time.Millisecond,
	}
	runUntilEqual(t, cfg, sink, src, dst, "orders")

	mustExec(t, src, "UPDATE orders SET name = 'z', amount = 2 WHERE id = 1")
	mustExec(t, src, "DELETE FROM orders WHERE id = 2")
	mustExec(t, src, "INSERT INTO orders VALUES (4, 'd', 4, true, NULL)")
	runUntilEqual(t, cfg, sink, src, dst, "orders")

	// A second sink process with the same name starts from the stored
	// position.
	sink2 := newSink(t, pgsink.Config{URL: targetURL, Name: "test", Tables: []pgsink.Table{table}})
	cfg.Checkpoint = sink2
	mustExec(t, src, "INSERT INTO orders VALUES (5, 'e', 5, false, NULL)")
	runUntilEqual(t, cfg, sink2, src, dst, "orders")
	var gen int64
	if err := dst.QueryRow(context.Background(), "SELECT generation FROM "+pgsink.CheckpointTable+" WHERE sink = 'test'").Scan(&gen); err != nil || gen != 0 {
		t.Fatalf("generation %d, %v: want 0 (no re-snapshot)", gen, err)
	}
}

// TestSinkLeavesOtherSinksTable: a sink's snapshot does not replace a
// table another sink lands (it would drop that sink's rows, and the other
// would then dead-letter every update of its keys): Run fails with
// ErrOtherSinksTable and the table keeps its rows.
func TestSinkLeavesOtherSinksTable(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Tick: 20 * time.Millisecond})
	src := connect(t, srv.URL())
	targetURL := pgtest.URL(t)
	dst := connect(t, targetURL)
	mustExec(t, src, "CREATE TABLE a (id int, v text)")
	mustExec(t, src, "INSERT INTO a VALUES (1, 'a'), (2, 'b')")
	mustExec(t, src, "CREATE TABLE b (id int, v text)")
	mustExec(t, src, "INSERT INTO b VALUES (9, 'z')")
	table := pgsink.Table{Name: "a", Key: []string{"id"}}
	first := newSink(t, pgsink.Config{URL: targetURL, Name: "first", Tables: []pgsink.Table{table}})
	cfg := consumer.Config{
		URL:           srv.URL(),
		Sources:       []consumer.Source{{Name: "a", Envelope: table.Envelope()}},
		Checkpoint:    first,
		MaxBatchDelay: 5 * time.Millisecond,
		FetchTimeout:  10 * time.Millisecond,
	}
	runUntilEqual(t, cfg, first, src, dst, "a")

	second := newSink(t, pgsink.Config{URL: targetURL, Name: "second", Tables: []pgsink.Table{table}})
	cfg.Sources[0].Name, cfg.Checkpoint = "b", second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := consumer.Run(ctx, cfg, second); !errors.Is(err, pgsink.ErrOtherSinksTable) {
		t.Fatalf("second sink's Run = %v, want ErrOtherSinksTable", err)
	}
	if got := rowsText(t, dst, "SELECT * FROM a"); !slices.Equal(got, []string{"1|a", "2|b"}) {
		t.Errorf("first sink's table after the second's attempt: %v", got)
	}
}

// TestSinkLandsJSONBExactly: jsonb documents land as the source renders
// them, in the snapshot's COPY and in a batch's upserts alike: every digit
// of a number, and a jsonb null as a jsonb null, not SQL NULL (a decoding
// into Go maps and float64s rounded the one and lost the other).
func TestSinkLandsJSONBExactly(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Tick: 20 * time.Millisecond})
	src := connect(t, srv.URL())
	targetURL := pgtest.URL(t)
	dst := connect(t, targetURL)
	mustExec(t, src, "CREATE TABLE docs (id int, doc jsonb)")
	mustExec(t, src, `INSERT INTO docs VALUES
		(1, '{"b": 1.0, "aa": 12345678901234567890.5, "a": [0.1, 1e-7, 100000000000000000001]}'),
		(2, 'null'), (3, NULL)`)

	table := pgsink.Table{Name: "docs", Key: []string{"id"}}
	sink := newSink(t, pgsink.Config{URL: targetURL, Name: "test", Tables: []pgsink.Table{table}})
	cfg := consumer.Config{
		URL:           srv.URL(),
		Sources:       []consumer.Source{{Name: "docs", Envelope: table.Envelope()}},
		Checkpoint:    sink,
		MaxBatchDelay: 5 * time.Millisecond,
		FetchTimeout:  10 * time.Millisecond,
	}
	runUntilEqual(t, cfg, sink, src, dst, "docs")
	mustExec(t, src, `UPDATE docs SET doc = '{"k": -0.000000000000000000001, "z": 98765432109876543210}' WHERE id = 3`)
	mustExec(t, src, `INSERT INTO docs VALUES (4, '[null, 1.5e30]')`)
	runUntilEqual(t, cfg, sink, src, dst, "docs")
}

var cols = [][]consumer.Column{{{Name: "id", TypeName: "int4"}, {Name: "v", TypeName: "text"}}}

func up(ts uint64, id int32, v string) consumer.Update {
	return consumer.Update{Timestamp: ts, State: "upsert", Values: []any{id, v}}
}

func del(ts uint64, id int32) consumer.Update {
	return consumer.Update{Timestamp: ts, State: "delete", Values: []any{id, nil}}
}

// land writes and commits one batch the way Run does.
func land(t *testing.T, s *pgsink.Sink, pos *consumer.Position, b consumer.Batch) error {
	t.Helper()
	b.Columns = cols
	if err := s.Write(context.Background(), b); err != nil {
		s.Abort(context.Background())
		return err
	}
	if b.Partial {
		return nil
	}
	next := consumer.Position{Frontier: b.Upper, Generation: b.Generation}
	if err := s.Commit(context.Background(), *pos, next); err != nil {
		s.Abort(context.Background())
		return err
	}
	*pos = next
	return nil
}

func mustLand(t *testing.T, s *pgsink.Sink, pos *consumer.Position, b consumer.Batch) {
	t.Helper()
	if err := land(t, s, pos, b); err != nil {
		t.Fatalf("land [%d,%d): %v", b.Lower, b.Upper, err)
	}
}

// TestSinkBatches drives the sink with hand-made batches: consolidation by
// key within a batch, partial snapshot chunks that only appear at commit,
// and a re-snapshot in a new generation that replaces the table at once.
func TestSinkBatches(t *testing.T) {
	url := pgtest.URL(t)
	dst := connect(t, url)
	s := newSink(t, pgsink.Config{URL: url, Name: "b", Tables: []pgsink.Table{{Name: "t", Key: []string{"id"}}}})
	pos, err := s.Load(context.Background())
	if err != nil || pos.Frontier != 0 {
		t.Fatalf("Load = %+v, %v; want zero", pos, err)
	}
	mustLand(t, s, &pos, consumer.Batch{Lower: 10, Upper: 10, Partial: true, Snapshot: true,
		Updates: []consumer.Update{up(10, 1, "a"), up(10, 2, "b")}})
	if got := rowsText(t, dst, "SELECT count(*) FROM pg_tables WHERE tablename = 't'"); !slices.Equal(got, []string{"0"}) {
		t.Errorf("target visible before the snapshot committed")
	}
	mustLand(t, s, &pos, consumer.Batch{Lower: 10, Upper: 12, Snapshot: true,
		Updates: []consumer.Update{up(10, 3, "c"), up(11, 1, "a2"), del(11, 2)}})
	want := []string{"1|a2", "3|c"}
	if got := rowsText(t, dst, "SELECT * FROM t"); !slices.Equal(got, want) {
		t.Errorf("after snapshot: %v, want %v", got, want)
	}
	// Within one batch, the last state of a key wins, whatever came before.
	mustLand(t, s, &pos, consumer.Batch{Lower: 12, Upper: 15, Updates: []consumer.Update{
		del(12, 1), up(13, 1, "again"), up(13, 4, "d"), up(14, 4, "d2"), del(14, 3), up(14, 5, "e"), del(14, 5)}})
	want = []string{"1|again", "4|d2"}
	if got := rowsText(t, dst, "SELECT * FROM t"); !slices.Equal(got, want) {
		t.Errorf("after changes: %v, want %v", got, want)
	}
	// A timestamp cut into Partial chunks lands in one transaction: the
	// second chunk's delete and upsert must not replay the first's rows.
	mustLand(t, s, &pos, consumer.Batch{Lower: 15, Upper: 15, Partial: true, Updates: []consumer.Update{up(15, 6, "f")}})
	mustLand(t, s, &pos, consumer.Batch{Lower: 15, Upper: 16, Updates: []consumer.Update{del(15, 6), up(15, 7, "g")}})
	want = []string{"1|again", "4|d2", "7|g"}
	if got := rowsText(t, dst, "SELECT * FROM t"); !slices.Equal(got, want) {
		t.Errorf("after a chunked timestamp: %v, want %v", got, want)
	}
	// A new generation replaces the table.
	mustLand(t, s, &pos, consumer.Batch{Lower: 30, Upper: 31, Snapshot: true, Generation: 1,
		Updates: []consumer.Update{up(30, 9, "new")}})
	want = []string{"9|new"}
	if got := rowsText(t, dst, "SELECT * FROM t"); !slices.Equal(got, want) {
		t.Errorf("after re-snapshot: %v, want %v", got, want)
	}
	if got := rowsText(t, dst, "SELECT frontier, generation FROM "+pgsink.CheckpointTable+" WHERE sink = 'b'"); !slices.Equal(got, []string{"31|1"}) {
		t.Errorf("checkpoint %v, want 31|1", got)
	}
}

// TestSinkFenced: two sinks with one name; the one whose position is stale
// is fenced before it writes, and the table holds only the other's rows.
func TestSinkFenced(t *testing.T) {
	url := pgtest.URL(t)
	dst := connect(t, url)
	cfg := pgsink.Config{URL: url, Name: "f", Tables: []pgsink.Table{{Name: "t", Key: []string{"id"}}}}
	a, b := newSink(t, cfg), newSink(t, cfg)
	var pa, pb consumer.Position
	for _, s := range []*pgsink.Sink{a, b} {
		if _, err := s.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	mustLand(t, a, &pa, consumer.Batch{Lower: 1, Upper: 2, Snapshot: true, Updates: []consumer.Update{up(1, 1, "a")}})
	err := land(t, b, &pb, consumer.Batch{Lower: 1, Upper: 2, Snapshot: true, Updates: []consumer.Update{up(1, 1, "stale")}})
	if !errors.Is(err, consumer.ErrFenced) {
		t.Fatalf("stale sink: %v, want ErrFenced", err)
	}
	mustLand(t, a, &pa, consumer.Batch{Lower: 2, Upper: 3, Updates: []consumer.Update{up(2, 2, "b")}})
	want := []string{"1|a", "2|b"}
	if got := rowsText(t, dst, "SELECT * FROM t"); !slices.Equal(got, want) {
		t.Errorf("target %v, want %v", got, want)
	}
}

// TestSinkRejects: a row the target refuses (a CHECK added on the target)
// goes to the dead-letter table with its reason; the rest of the batch
// lands; with Stall the batch fails instead.
func TestSinkRejects(t *testing.T) {
	url := pgtest.URL(t)
	dst := connect(t, url)
	s := newSink(t, pgsink.Config{URL: url, Name: "r", Tables: []pgsink.Table{{Name: "t", Key: []string{"id"}}}})
	var pos consumer.Position
	if _, err := s.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustLand(t, s, &pos, consumer.Batch{Lower: 1, Upper: 2, Snapshot: true, Updates: []consumer.Update{up(1, 1, "a")}})
	mustExec(t, dst, "ALTER TABLE t ADD CONSTRAINT short CHECK (length(v) < 5)")
	mustLand(t, s, &pos, consumer.Batch{Lower: 2, Upper: 3, Updates: []consumer.Update{
		up(2, 2, "ok"), up(2, 3, "far too long"), {Timestamp: 2, State: "key_violation", Values: []any{int32(4), nil}}}})
	want := []string{"1|a", "2|ok"}
	if got := rowsText(t, dst, "SELECT * FROM t"); !slices.Equal(got, want) {
		t.Errorf("target %v, want %v", got, want)
	}
	got := rowsText(t, dst, "SELECT table_name, frontier, row_json, reason LIKE '%short%' FROM "+pgsink.DeadLetterTable)
	want = []string{`t|3|[3,"far too long"]|t`, `t|3|[4,null]|f`}
	if !slices.Equal(got, want) {
		t.Errorf("dead letters %v, want %v", got, want)
	}

	stall := newSink(t, pgsink.Config{URL: url, Name: "r", OnReject: pgsink.Stall, Tables: []pgsink.Table{{Name: "t", Key: []string{"id"}}}})
	if _, err := stall.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := land(t, stall, &pos, consumer.Batch{Lower: 3, Upper: 4, Updates: []consumer.Update{up(3, 5, "too long again")}})
	if !errors.Is(err, pgsink.ErrRejected) {
		t.Fatalf("stall: %v, want ErrRejected", err)
	}
	if got := rowsText(t, dst, "SELECT frontier FROM "+pgsink.CheckpointTable+" WHERE sink = 'r'"); !slices.Equal(got, []string{"3"}) {
		t.Errorf("checkpoint moved past a stalled batch: %v", got)
	}
}

// TestSinkCheckpoint runs the Checkpoint acceptance suite on the sink (a
// Commit without a Write commits an empty transaction).
func TestSinkCheckpoint(t *testing.T) {
	url := pgtest.URL(t)
	checkpointtest.Run(t, func(t *testing.T, key string) consumer.Checkpoint {
		s := newSink(t, pgsink.Config{URL: url, Name: key, Tables: []pgsink.Table{{Name: "t", Key: []string{"id"}}}})
		if _, err := s.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestSinkHistoryLost: the sink is away longer than the collection's
// RETAIN HISTORY; on return it re-snapshots into a new table swapped in at
// commit, and the target converges to the source in generation 1.
func TestSinkHistoryLost(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Tick: 10 * time.Millisecond})
	src := connect(t, srv.URL())
	targetURL := pgtest.URL(t)
	dst := connect(t, targetURL)
	mustExec(t, src, "CREATE TABLE h (id int, v text)")
	mustExec(t, src, "ALTER TABLE h SET (RETAIN HISTORY FOR '0s')")
	mustExec(t, src, "INSERT INTO h VALUES (1, 'a'), (2, 'b')")
	table := pgsink.Table{Name: "h", Key: []string{"id"}}
	sink := newSink(t, pgsink.Config{URL: targetURL, Name: "h", Tables: []pgsink.Table{table}})
	cfg := consumer.Config{
		URL:           srv.URL(),
		Sources:       []consumer.Source{{Name: "h", Envelope: table.Envelope()}},
		Checkpoint:    sink,
		MaxBatchDelay: time.Millisecond,
		FetchTimeout:  5 * time.Millisecond,
	}
	runUntilEqual(t, cfg, sink, src, dst, "h")
	pos, err := sink.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, src, "DELETE FROM h WHERE id = 1")
	mustExec(t, src, "INSERT INTO h VALUES (3, 'c')")
	// The since, as mz_internal.mz_storage_shards reports it, passes the
	// checkpoint while the sink is away.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mustExec(t, src, "UPDATE h SET v = v WHERE id = 3")
		var since string
		if err := src.QueryRow(context.Background(), "SELECT since::text FROM mz_internal.mz_storage_shards WHERE name = 'h'").Scan(&since); err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.ParseUint(since, 10, 64); n >= uint64(pos.Frontier) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("since %s never passed the checkpoint %d", since, pos.Frontier)
		}
		time.Sleep(20 * time.Millisecond)
	}
	runUntilEqual(t, cfg, sink, src, dst, "h")
	if got := rowsText(t, dst, "SELECT generation FROM "+pgsink.CheckpointTable+" WHERE sink = 'h'"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("generation %v after the history loss, want 1", got)
	}
}
