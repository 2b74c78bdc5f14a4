package redissink

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/consumer/contracttest"
	"github.com/shardtail/shardtail/internal/testsupport/redistest"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/row"
)

// sqlLiteral renders d of type t as a SQL literal: its Postgres text output
// quoted and cast, or NULL.
func sqlLiteral(t row.Type, d row.Datum) string {
	if d == nil {
		return "NULL"
	}
	text := string(pgrepr.AppendText(nil, t, d))
	return "'" + strings.ReplaceAll(text, "'", "''") + "'::" + t.String()
}

// TestRunLandsGoldenRows lands the golden rows end to end: inserted into a
// real shardtail table with SQL, read by consumer.Run over pgx (the driver
// decodes every type its own way), landed by the Sink in a real Redis. The
// stored keys and values must be byte for byte what KeyJSON and ValueJSON
// render from the golden rows: the sink's decoding loses nothing the
// contract shows. Then an update and a delete land too.
func TestRunLandsGoldenRows(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Tick: 20 * time.Millisecond})
	rs := redistest.Start(t)
	rdb := newClient(t, rs)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	cols := contracttest.Columns
	var defs []string
	for _, c := range cols {
		defs = append(defs, fmt.Sprintf(`"%s" %s`, strings.ReplaceAll(c.Name, `"`, `""`), c.Type))
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE TABLE golden (" + strings.Join(defs, ", ") + ")")
	for _, g := range contracttest.Rows() {
		var lits []string
		for i, c := range cols {
			lits = append(lits, sqlLiteral(c.Type, g.Row[i]))
		}
		exec("INSERT INTO golden VALUES (" + strings.Join(lits, ", ") + ")")
	}

	sink, err := New(ctx, Config{Client: rdb, Namespace: ns, Key: contracttest.Key})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- consumer.Run(runCtx, consumer.Config{
			URL: srv.URL(), Sources: []consumer.Source{{Name: "golden"}}, Checkpoint: sink,
			MaxBatchDelay: 10 * time.Millisecond,
		}, sink)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()

	key, err := consumer.KeyColumns(cols, contracttest.Key)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, g := range contracttest.Rows() {
		want[string(consumer.KeyJSON(nil, "", cols, key, g.Row))] = string(consumer.ValueJSON(nil, cols, g.Row))
	}
	waitFor(t, rdb, want, done)

	// The row "typical" changes its qty; "nulls" is deleted.
	exec(`UPDATE golden SET qty = 4 WHERE id = 1`)
	exec(`DELETE FROM golden WHERE id = 2`)
	rows := contracttest.Rows()
	rows[0].Row[4] = int16(4)
	want[string(consumer.KeyJSON(nil, "", cols, key, rows[0].Row))] = string(consumer.ValueJSON(nil, cols, rows[0].Row))
	delete(want, string(consumer.KeyJSON(nil, "", cols, key, rows[1].Row)))
	waitFor(t, rdb, want, done)
}

// TestRunLandsJSONBExactly pins jsonb values end to end against golden
// bytes: a document lands as the server's jsonb text (its canonical key
// order, every digit of its numbers), not re-encoded from a decoding into
// Go maps and float64s, which rounds 12345678901234567890.5 and
// 100000000000000000001.
func TestRunLandsJSONBExactly(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Tick: 20 * time.Millisecond})
	rs := redistest.Start(t)
	rdb := newClient(t, rs)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range []string{
		"CREATE TABLE docs (id int, doc jsonb)",
		`INSERT INTO docs VALUES
			(1, '{"b": 1.0, "aa": 12345678901234567890.5, "a": [0.1, 1e-7, 100000000000000000001]}'),
			(2, '{"z": "<é&>", "y": {"k": -0.000000000000000000001}}'),
			(3, 'null'),
			(4, NULL)`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	sink, err := New(ctx, Config{Client: rdb, Namespace: ns, Key: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- consumer.Run(runCtx, consumer.Config{
			URL: srv.URL(), Sources: []consumer.Source{{Name: "docs"}}, Checkpoint: sink,
			MaxBatchDelay: 10 * time.Millisecond,
		}, sink)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}()
	waitFor(t, rdb, map[string]string{
		`[1]`: `{"id":1,"doc":{"a": [0.1, 0.0000001, 100000000000000000001], "b": 1, "aa": 12345678901234567890.5}}`,
		`[2]`: `{"id":2,"doc":{"y": {"k": -0.000000000000000000001}, "z": "<é&>"}}`,
		`[3]`: `{"id":3,"doc":null}`,
		`[4]`: `{"id":4,"doc":null}`,
	}, done)
}

// waitFor waits until the active generation holds exactly want (key JSON →
// value JSON), failing with the difference if it does not within a
// minute or if Run ends first.
func waitFor(t *testing.T, client *redis.Client, want map[string]string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var got map[string]string
	for time.Now().Before(deadline) {
		got = map[string]string{}
		if client.Exists(context.Background(), ns+keyActive).Val() == 1 {
			for k, h := range active(t, client) {
				got[k] = h["v"]
			}
		}
		if maps.Equal(got, want) {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("Run ended: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %s:\ngot  %s\nwant %s", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("extra key %s = %s", k, got[k])
		}
	}
	t.FailNow()
}

// TestRunResnapshotsAfterHistoryLoss: the sink is away while a row is
// deleted and the collection's since passes its checkpoint. On its return
// Run finds the history lost and re-snapshots; the sink loads generation 2
// and switches readers to it in the commit: the deleted row is not there
// (nothing resurrects it), the rest is the source, and generation 1 is
// gone from Redis and from the durable list.
func TestRunResnapshotsAfterHistoryLoss(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Tick: 10 * time.Millisecond})
	rs := redistest.Start(t)
	rdb := newClient(t, rs)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE TABLE t (k text, v int)")
	exec("ALTER TABLE t SET (RETAIN HISTORY FOR '0s')")
	exec("INSERT INTO t VALUES ('a', 1), ('b', 2)")

	run := func(want map[string]string) {
		t.Helper()
		sink, err := New(ctx, Config{Client: rdb, Namespace: ns, Key: []string{"k"}})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- consumer.Run(runCtx, consumer.Config{
				URL: srv.URL(), Sources: []consumer.Source{{Name: "t"}}, Checkpoint: sink,
				MaxBatchDelay: time.Millisecond, FetchTimeout: 10 * time.Millisecond,
			}, sink)
		}()
		waitFor(t, rdb, want, done)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	}
	run(map[string]string{`["a"]`: `{"k":"a","v":1}`, `["b"]`: `{"k":"b","v":2}`})
	reader, err := New(ctx, Config{Client: rdb, Namespace: ns, Key: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	pos, err := reader.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Away: a is deleted, c inserted, and the since passes the checkpoint.
	exec("DELETE FROM t WHERE k = 'a'")
	exec("INSERT INTO t VALUES ('c', 3)")
	deadline := time.Now().Add(30 * time.Second)
	for {
		exec("INSERT INTO t VALUES ('tick', 0)")
		exec("DELETE FROM t WHERE k = 'tick'")
		exec("BEGIN")
		exec("DECLARE c CURSOR FOR " + consumer.Source{Name: "t"}.Statement(pos.Frontier))
		_, err := conn.Exec(ctx, "FETCH 1 c WITH (TIMEOUT = '0s')")
		conn.Exec(ctx, "ROLLBACK") //nolint:errcheck // ends the failed block
		if consumer.Classify(err) == consumer.ClassHistoryLost {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the since never passed %d (last: %v)", pos.Frontier, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	run(map[string]string{`["b"]`: `{"k":"b","v":2}`, `["c"]`: `{"k":"c","v":3}`})
	// Run's cancellation may cut the deletion of generation 1 short
	// (it follows the switch); the next start finishes it.
	if _, err := reader.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := rdb.Get(ctx, ns+keyActive).Val(), GenerationPrefix(ns, 2); got != want {
		t.Errorf("active generation = %q, want %q", got, want)
	}
	if keys := rdb.Keys(ctx, globEscape(GenerationPrefix(ns, 1))+"*").Val(); len(keys) != 0 {
		t.Errorf("generation 1 still holds %v", keys)
	}
	if gens := rdb.LRange(ctx, ns+keyGenerations, 0, -1).Val(); len(gens) != 1 || gens[0] != "2" {
		t.Errorf("generations list = %v, want [2]", gens)
	}
}
