package redissink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/consumer/contracttest"
	"github.com/shardtail/shardtail/internal/testsupport/redistest"
	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/row"
)

const ns = "orders:"

// kvColumns is a two-column relation (k text KEY, v int4) for the rule
// tests.
var kvColumns = []row.Column{{Name: "k", Type: row.TypeText}, {Name: "v", Type: row.TypeInt4}}

// wire describes cols as the driver reports them.
func wire(cols []row.Column) [][]consumer.Column {
	out := make([]consumer.Column, len(cols))
	for i, c := range cols {
		out[i] = consumer.Column{Name: c.Name, TypeOID: pgrepr.OID(c.Type), TypeName: c.Type.String()}
	}
	return [][]consumer.Column{out}
}

// worker is one sink process: a Sink and the position Run would hold.
type worker struct {
	t    *testing.T
	sink *Sink
	pos  consumer.Position
	gen  int64 // the consumer's generation of the batches it writes
}

func newWorker(t *testing.T, rdb *redis.Client, tombstones bool, key ...string) *worker {
	t.Helper()
	if len(key) == 0 {
		key = []string{"k"}
	}
	s, err := New(context.Background(), Config{Client: rdb, Namespace: ns, Key: key, Tombstones: tombstones})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	pos, err := s.Load(context.Background())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return &worker{t: t, sink: s, pos: pos, gen: pos.Generation}
}

func newClient(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// kv is one update of the kv relation.
type kv struct {
	k    string
	v    int32
	ts   uint64
	diff int64
}

func kvBatch(lower, upper uint64, cols []row.Column, ups ...kv) consumer.Batch {
	b := consumer.Batch{Lower: consumer.Frontier(lower), Upper: consumer.Frontier(upper), Columns: wire(cols)}
	for _, u := range ups {
		b.Updates = append(b.Updates, consumer.Update{Timestamp: u.ts, Diff: u.diff, Values: []any{u.k, u.v}})
	}
	return b
}

// write writes b and, unless it is Partial, commits its upper, as Run does.
func (w *worker) write(b consumer.Batch) error {
	w.t.Helper()
	b.Generation = w.gen
	ctx := context.Background()
	if err := w.sink.Write(ctx, b); err != nil {
		return err
	}
	if b.Partial {
		return nil
	}
	next := consumer.Position{Frontier: b.Upper, Generation: b.Generation}
	if err := w.sink.Commit(ctx, w.pos, next); err != nil {
		return err
	}
	w.pos = next
	return nil
}

func (w *worker) mustWrite(b consumer.Batch) {
	w.t.Helper()
	if err := w.write(b); err != nil {
		w.t.Fatalf("write [%d, %d): %v", b.Lower, b.Upper, err)
	}
}

// active returns the active generation's rows: key JSON → hash fields.
func active(t *testing.T, rdb *redis.Client) map[string]map[string]string {
	t.Helper()
	ctx := context.Background()
	prefix, err := rdb.Get(ctx, ns+keyActive).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", ns+keyActive, err)
	}
	keys, err := rdb.Keys(ctx, globEscape(prefix)+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, k := range keys {
		h, err := rdb.HGetAll(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[k[len(prefix):]] = h
	}
	return out
}

// values renders active's rows as "key=value@ts" (tombstones "key=†@ts"),
// sorted, for got/want comparisons.
func values(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	var out []string
	for k, h := range active(t, rdb) {
		v, ok := h["v"]
		if !ok {
			v = "†"
		}
		out = append(out, fmt.Sprintf("%s=%s@%s", k, v, h["ts"]))
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

// TestGoldenRowsLand proves the sink and the library's functions agree:
// every golden row of the key contract lands under exactly
// KeyJSON(prefix, …) with exactly ValueJSON(…) as its value, and a reader's
// shardtail_get finds it by the key's JSON array.
func TestGoldenRowsLand(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv)
	w := newWorker(t, rdb, false, contracttest.Key...)
	b := consumer.Batch{Lower: 5, Upper: 6, Columns: wire(contracttest.Columns)}
	for _, g := range contracttest.Rows() {
		b.Updates = append(b.Updates, consumer.Update{Timestamp: 5, Diff: 1, Values: g.Row})
	}
	w.mustWrite(b)

	ctx := context.Background()
	key, err := consumer.KeyColumns(contracttest.Columns, contracttest.Key)
	if err != nil {
		t.Fatal(err)
	}
	prefix := rdb.Get(ctx, ns+keyActive).Val()
	if want := GenerationPrefix(ns, 1); prefix != want {
		t.Fatalf("active generation = %q, want %q", prefix, want)
	}
	got := active(t, rdb)
	if len(got) != len(contracttest.Rows()) {
		t.Errorf("active generation holds %d keys, want %d", len(got), len(contracttest.Rows()))
	}
	for _, g := range contracttest.Rows() {
		k := string(consumer.KeyJSON(nil, "", contracttest.Columns, key, g.Row))
		want := string(consumer.ValueJSON(nil, contracttest.Columns, g.Row))
		h, ok := got[k]
		if !ok {
			t.Errorf("%s: no key %s", g.Name, prefix+k)
			continue
		}
		if h["v"] != want || h["ts"] != "5" {
			t.Errorf("%s: stored v=%s ts=%s, want v=%s ts=5", g.Name, h["v"], h["ts"], want)
		}
		read, err := rdb.FCallRO(ctx, FunctionGet, []string{ns + keyActive}, k).Text()
		if err != nil || read != want {
			t.Errorf("%s: %s = %q, %v; want %s", g.Name, FunctionGet, read, err, want)
		}
	}
}

// TestUpsertRule walks the rule through inserts, updates (retraction and
// insertion in either order), deletes, stale writes and tombstones.
func TestUpsertRule(t *testing.T) {
	for _, tombstones := range []bool{false, true} {
		t.Run(fmt.Sprintf("Tombstones=%v", tombstones), func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := newClient(t, srv)
			w := newWorker(t, rdb, tombstones)
			w.mustWrite(kvBatch(10, 11, kvColumns, kv{"a", 1, 10, 1}, kv{"b", 1, 10, 1}, kv{"c", 1, 10, 1}))
			// An update of a (retraction first), of b (insertion
			// first), a delete of c, and a key inserted and deleted in
			// one batch.
			w.mustWrite(kvBatch(11, 14, kvColumns,
				kv{"a", 1, 12, -1}, kv{"a", 2, 12, 1},
				kv{"b", 2, 12, 1}, kv{"b", 1, 12, -1},
				kv{"c", 1, 13, -1},
				kv{"d", 1, 12, 1}, kv{"d", 1, 13, -1}))
			want := `[["a"]={"k":"a","v":2}@12 ["b"]={"k":"b","v":2}@12]`
			if tombstones {
				want = `[["a"]={"k":"a","v":2}@12 ["b"]={"k":"b","v":2}@12 ["c"]=†@13 ["d"]=†@13]`
			}
			if got := values(t, rdb); got != want {
				t.Errorf("after updates and deletes:\ngot  %s\nwant %s", got, want)
			}
			// A re-insert after a delete is newer than the tombstone.
			w.mustWrite(kvBatch(14, 15, kvColumns, kv{"c", 3, 14, 1}))
			if got := values(t, rdb); !strings.Contains(got, `["c"]={"k":"c","v":3}@14`) {
				t.Errorf("re-insert after delete: got %s", got)
			}
		})
	}
}

// TestStaleWritesRejected injects writes older than the stored rows past
// the checkpoint (what a late writer without a checkpoint, or a bug, would
// send): the timestamp guard rejects every one and no key moves backwards.
func TestStaleWritesRejected(t *testing.T) {
	for _, tombstones := range []bool{false, true} {
		t.Run(fmt.Sprintf("Tombstones=%v", tombstones), func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := newClient(t, srv)
			w := newWorker(t, rdb, tombstones)
			w.mustWrite(kvBatch(20, 21, kvColumns, kv{"a", 2, 20, 1}, kv{"b", 2, 20, 1}))
			before := values(t, rdb)
			stale := w.sink.Stats().Stale
			// An older value of a, an older delete of b, a value of
			// a at the stored timestamp.
			w.mustWrite(kvBatch(21, 30, kvColumns, kv{"a", 1, 10, 1}, kv{"b", 2, 15, -1}))
			w.mustWrite(kvBatch(30, 31, kvColumns, kv{"a", 9, 20, 1}))
			if got := values(t, rdb); got != before {
				t.Errorf("stale writes changed the store:\ngot  %s\nwant %s", got, before)
			}
			if got := w.sink.Stats().Stale - stale; got != 3 {
				t.Errorf("stale writes rejected = %d, want 3", got)
			}
		})
	}
}

// TestReplayedChunkIsIdempotent: a sink killed after writing a Partial
// chunk, before the closing batch committed, is replaced by one that
// replays the whole timestamp from the checkpoint; the store ends as if
// the chunk had been written once.
func TestReplayedChunkIsIdempotent(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv)
	a := newWorker(t, rdb, true)
	a.mustWrite(kvBatch(1, 2, kvColumns, kv{"x", 1, 1, 1}, kv{"y", 1, 1, 1}))
	chunk1 := kvBatch(2, 2, kvColumns, kv{"x", 1, 5, -1}, kv{"y", 2, 5, 1}, kv{"z", 1, 5, 1})
	chunk1.Partial = true
	chunk2 := kvBatch(2, 6, kvColumns, kv{"x", 2, 5, 1}, kv{"y", 1, 5, -1})
	a.mustWrite(chunk1) // then a dies

	b := newWorker(t, rdb, true)
	b.mustWrite(chunk1)
	b.mustWrite(chunk2)
	want := `[["x"]={"k":"x","v":2}@5 ["y"]={"k":"y","v":2}@5 ["z"]={"k":"z","v":1}@5]`
	if got := values(t, rdb); got != want {
		t.Errorf("after the replay:\ngot  %s\nwant %s", got, want)
	}
	// The replayed chunk's writes are at the timestamps already stored.
	// The replayed chunk's three writes are at timestamps already
	// stored, and so is chunk 2's retraction of y (its insertion won).
	if got := b.sink.Stats().Stale; got != 4 {
		t.Errorf("replayed writes rejected = %d, want 4", got)
	}
}

// TestCommitIsFenced: two sinks from one checkpoint; once one commits, the
// other's batch is refused whole (no key of it lands) with ErrFenced.
func TestCommitIsFenced(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv)
	a := newWorker(t, rdb, false)
	a.mustWrite(kvBatch(1, 2, kvColumns, kv{"x", 1, 1, 1}))
	b := newWorker(t, rdb, false)
	b.mustWrite(kvBatch(2, 4, kvColumns, kv{"x", 2, 3, 1}))
	err := a.write(kvBatch(2, 3, kvColumns, kv{"x", 9, 2, 1}, kv{"w", 9, 2, 1}))
	if !errors.Is(err, consumer.ErrFenced) {
		t.Fatalf("stale commit: err = %v, want ErrFenced", err)
	}
	partial := kvBatch(4, 4, kvColumns, kv{"w", 9, 4, 1})
	partial.Partial = true
	if err := a.write(partial); !errors.Is(err, consumer.ErrFenced) {
		t.Fatalf("stale partial chunk: err = %v, want ErrFenced", err)
	}
	if got, want := values(t, rdb), `[["x"]={"k":"x","v":2}@3]`; got != want {
		t.Errorf("store = %s, want %s", got, want)
	}
}

// TestCommitSurvivesRedisRestart: Redis is SIGKILLed between a batch's
// Write and its Commit and comes back (appendonly); the Commit retries
// until it can tell whether its call happened, and the store holds the
// batch once.
func TestCommitSurvivesRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv)
	w := newWorker(t, rdb, false)
	retrying := make(chan struct{}, 1)
	w.sink.log = slog.New(signalHandler{retrying})
	w.mustWrite(kvBatch(1, 2, kvColumns, kv{"a", 1, 1, 1}))
	srv.Kill(t)
	done := make(chan error, 1)
	go func() { done <- w.write(kvBatch(2, 3, kvColumns, kv{"a", 2, 2, 1}, kv{"b", 1, 2, 1})) }()
	<-retrying // the commit failed at least once
	srv.Restart(t)
	if err := <-done; err != nil {
		t.Fatalf("commit across a Redis restart: %v", err)
	}
	if got, want := values(t, rdb), `[["a"]={"k":"a","v":2}@2 ["b"]={"k":"b","v":1}@2]`; got != want {
		t.Errorf("store = %s, want %s", got, want)
	}
	pos, err := w.sink.Load(context.Background())
	if err != nil || pos.Frontier != 3 {
		t.Errorf("Load after restart = %+v, %v; want frontier 3", pos, err)
	}
}

// TestRepeatedCommitIsDone: a commit whose first call happened but whose
// reply was lost is sent again (by the client's own retry, or by another
// worker with the same batch); it is refused by the fence, and the Sink
// recognises its own batch in the checkpoint and reports success.
func TestRepeatedCommitIsDone(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv)
	a := newWorker(t, rdb, false)
	a.mustWrite(kvBatch(1, 2, kvColumns, kv{"a", 1, 1, 1}))
	b := newWorker(t, rdb, false)
	batch := kvBatch(2, 3, kvColumns, kv{"a", 2, 2, 1})
	a.mustWrite(batch)
	if err := b.write(batch); err != nil {
		t.Fatalf("the same commit again: %v, want success", err)
	}
	if got, want := values(t, rdb), `[["a"]={"k":"a","v":2}@2]`; got != want {
		t.Errorf("store = %s, want %s", got, want)
	}
}

// signalHandler is a slog.Handler that signals c (without blocking) on
// every warning: a test waits on it for the Sink's first retry.
type signalHandler struct{ c chan struct{} }

func (h signalHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h signalHandler) Handle(context.Context, slog.Record) error {
	select {
	case h.c <- struct{}{}:
	default:
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

// TestOneCollection: a batch of two collections is refused, not landed
// under one namespace.
func TestOneCollection(t *testing.T) {
	srv := redistest.Start(t)
	w := newWorker(t, newClient(t, srv), false)
	b := kvBatch(1, 2, kvColumns, kv{"a", 1, 1, 1})
	b.Columns = append(b.Columns, b.Columns[0])
	if err := w.write(b); !errors.Is(err, ErrSeveralCollections) {
		t.Fatalf("write of two collections: %v, want ErrSeveralCollections", err)
	}
}

// TestSnapshotInChunks: a snapshot in Partial chunks, one of them empty,
// loads through loadChunk (in the background, the next chunk converted
// meanwhile) and is what readers see once the closing batch commits.
func TestSnapshotInChunks(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv)
	w := newWorker(t, rdb, false)
	chunk := func(ups ...kv) consumer.Batch {
		b := kvBatch(5, 5, kvColumns, ups...)
		b.Partial, b.Snapshot = true, true
		return b
	}
	w.mustWrite(chunk(kv{"a", 1, 5, 1}, kv{"b", 2, 5, 1}))
	w.mustWrite(chunk())
	w.mustWrite(chunk(kv{"c", 3, 5, 1}))
	closing := kvBatch(5, 6, kvColumns)
	closing.Snapshot = true
	w.mustWrite(closing)
	want := `[["a"]={"k":"a","v":1}@5 ["b"]={"k":"b","v":2}@5 ["c"]={"k":"c","v":3}@5]`
	if got := values(t, rdb); got != want {
		t.Errorf("after the snapshot:\ngot  %s\nwant %s", got, want)
	}
	if got := w.sink.Stats().Applied; got != 3 {
		t.Errorf("applied = %d, want 3", got)
	}
}

// snapshotChunk is a Partial batch of the snapshot at 5.
func snapshotChunk(ups ...kv) consumer.Batch {
	b := kvBatch(5, 5, kvColumns, ups...)
	b.Partial, b.Snapshot = true, true
	return b
}

// TestSnapshotChunkConnectionAuthenticates: snapshot chunks load on the
// Sink's own connection, which authenticates and selects the database as
// the Client does: the keys land in the Client's database of a Redis that
// requires a password, and nowhere else.
func TestSnapshotChunkConnectionAuthenticates(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	if err := newClient(t, srv).ConfigSet(ctx, "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	client := func(db int) *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: "s3cret", DB: db})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	rdb := client(3)
	w := newWorker(t, rdb, false)
	w.mustWrite(snapshotChunk(kv{"a", 1, 5, 1}, kv{"b", 2, 5, 1}))
	closing := kvBatch(5, 6, kvColumns)
	closing.Snapshot = true
	w.mustWrite(closing)
	if got, want := values(t, rdb), `[["a"]={"k":"a","v":1}@5 ["b"]={"k":"b","v":2}@5]`; got != want {
		t.Errorf("database 3 = %s, want %s", got, want)
	}
	if n := client(0).DBSize(ctx).Val(); n != 0 {
		t.Errorf("database 0 holds %d keys, want none", n)
	}
}

// TestSnapshotChunkSurvivesRedisRestart: a chunk whose connection Redis
// dropped is retried on a new one once Redis is back.
func TestSnapshotChunkSurvivesRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv)
	w := newWorker(t, rdb, false)
	retrying := make(chan struct{}, 1)
	w.sink.log = slog.New(signalHandler{retrying})
	w.mustWrite(snapshotChunk(kv{"a", 1, 5, 1}))
	if err := w.sink.wait(); err != nil { // the first chunk is in Redis
		t.Fatal(err)
	}
	srv.Kill(t)
	w.mustWrite(snapshotChunk(kv{"b", 2, 5, 1})) // loads in the background
	<-retrying                                   // and failed at least once
	srv.Restart(t)
	closing := kvBatch(5, 6, kvColumns)
	closing.Snapshot = true
	w.mustWrite(closing)
	if got, want := values(t, rdb), `[["a"]={"k":"a","v":1}@5 ["b"]={"k":"b","v":2}@5]`; got != want {
		t.Errorf("store = %s, want %s", got, want)
	}
}
