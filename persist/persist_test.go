package persist_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

func TestAppendSnapshotListen(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	if err := w.CompareAndAppend(ctx, []row.Update{upd(1, "a", 0, 1), upd(2, "b", 1, 1), upd(1, "a", 1, 1)}, 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := w.CompareAndAppend(ctx, []row.Update{upd(2, "b", 3, -1)}, 2, 5); err != nil {
		t.Fatal(err)
	}
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "test"}))(t)
	defer r.Close()

	got := readSnapshot(t, ctx, r, 1)
	want := []row.Update{upd(1, "a", 1, 2), upd(2, "b", 1, 1)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot at 1:\n got %v\nwant %v", got, want)
	}
	if got := readSnapshot(t, ctx, r, 4); !reflect.DeepEqual(got, []row.Update{upd(1, "a", 4, 2)}) {
		t.Fatalf("snapshot at 4: %v", got)
	}

	l := must(r.Listen(ctx, 0))(t)
	var events []row.Update
	var frontiers []uint64
	for l.Frontier() < 5 {
		u, f, err := l.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, u...)
		frontiers = append(frontiers, f)
	}
	wantEvents := []row.Update{upd(1, "a", 1, 1), upd(2, "b", 1, 1), upd(2, "b", 3, -1)}
	if !reflect.DeepEqual(events, wantEvents) || !reflect.DeepEqual(frontiers, []uint64{2, 5}) {
		t.Fatalf("listen: got %v %v, want %v [2 5]", events, frontiers, wantEvents)
	}

	// A listener in the same process wakes on an append.
	done := make(chan []row.Update)
	go func() {
		u, _, err := l.Next(ctx)
		if err != nil {
			t.Error(err)
		}
		done <- u
	}()
	time.Sleep(5 * time.Millisecond)
	if err := w.CompareAndAppend(ctx, []row.Update{upd(3, "c", 6, 1)}, 5, 7); err != nil {
		t.Fatal(err)
	}
	if got := <-done; !reflect.DeepEqual(got, []row.Update{upd(3, "c", 6, 1)}) {
		t.Fatalf("woken listen: %v", got)
	}
}

func TestUpperMismatch(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	if err := w.CompareAndAppend(ctx, nil, 0, 10); err != nil {
		t.Fatal(err)
	}
	// A second process whose writer has a stale idea of the upper.
	w2 := must(e.client().OpenWriter(ctx, shard))(t)
	err := w2.CompareAndAppend(ctx, []row.Update{upd(1, "x", 5, 1)}, 5, 11)
	var mm *persist.UpperMismatchError
	if !errors.As(err, &mm) || mm.Current != 10 {
		t.Fatalf("got %v, want upper mismatch with current 10", err)
	}
	if err := w.CompareAndAppend(ctx, []row.Update{upd(1, "x", 9, 1)}, 10, 11); err == nil {
		t.Fatal("update below expected upper accepted")
	}
}

// flakyConsensus fails CompareAndSet with an indeterminate error after it
// succeeded, once per arm.
type flakyConsensus struct {
	persist.Consensus
	mu  sync.Mutex
	arm bool
}

func (f *flakyConsensus) CompareAndSet(ctx context.Context, key string, exp *persist.SeqNo, v persist.VersionedData) (bool, error) {
	ok, err := f.Consensus.CompareAndSet(ctx, key, exp, v)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil && ok && f.arm {
		f.arm = false
		return false, fmt.Errorf("%w: connection reset after commit", persist.ErrIndeterminate)
	}
	return ok, err
}

func TestAppendIdempotentAfterIndeterminate(t *testing.T) {
	e := newEnv(t)
	flaky := &flakyConsensus{Consensus: e.consensus}
	e.consensus = flaky
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	flaky.arm = true
	if err := w.CompareAndAppend(ctx, []row.Update{upd(1, "a", 0, 1)}, 0, 1); err != nil {
		t.Fatal(err)
	}
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer r.Close()
	if got := readSnapshot(t, ctx, r, 0); !reflect.DeepEqual(got, []row.Update{upd(1, "a", 0, 1)}) {
		t.Fatalf("after an indeterminate commit the append applied %v, want exactly once", got)
	}
	s := must(c.State(ctx, shard))(t)
	if s.Upper != 1 || len(s.Batches) != 1 {
		t.Fatalf("upper %d batches %d, want 1 and 1", s.Upper, len(s.Batches))
	}
}

// leasedShard opens an environment whose readers hold a one-minute lease
// on a clock of the test's, a client of it, and a new shard with its
// writer; expire moves the clock past the lease.
func leasedShard(t *testing.T) (e *env, ctx context.Context, c *persist.Client, shard string, w *persist.Writer, expire func()) {
	e = newEnv(t)
	var now atomic.Int64
	now.Store(1_000_000)
	e.cfg.Now = now.Load
	e.cfg.ReaderLease = time.Minute
	ctx = ctxT(t)
	c = e.client()
	shard = persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w = must(c.OpenWriter(ctx, shard))(t)
	return e, ctx, c, shard, w, func() { now.Add(2 * time.Minute.Milliseconds()) }
}

func TestReaderLeaseExpires(t *testing.T) {
	e, ctx, c, shard, w, expire := leasedShard(t)
	if err := w.CompareAndAppend(ctx, nil, 0, 100); err != nil {
		t.Fatal(err)
	}
	// A "crashed" reader: registered, never heartbeats or closes.
	crashed := must(e.client().OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "crashed"}))(t)
	policy := must(c.OpenReader(ctx, shard, persist.ReaderOptions{Critical: true}))(t)
	if err := policy.Downgrade(ctx, 50); err != nil {
		t.Fatal(err)
	}
	if s := must(c.State(ctx, shard))(t); s.Since != 0 {
		t.Fatalf("since %d advanced past a live reader", s.Since)
	}
	expire()
	rep := must(c.Maintain(ctx, shard))(t)
	if len(rep.ExpiredReaders) != 1 || rep.ExpiredReaders[0] != crashed.ID() {
		t.Fatalf("expired %v, want the crashed reader %s", rep.ExpiredReaders, crashed.ID())
	}
	if s := must(c.State(ctx, shard))(t); s.Since != 50 || len(s.Readers) != 1 {
		t.Fatalf("since %d readers %d, want 50 and 1", s.Since, len(s.Readers))
	}
	if _, err := crashed.Snapshot(ctx, 60); !errors.Is(err, persist.ErrReaderExpired) {
		t.Fatalf("expired reader read: %v", err)
	}
	late := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer late.Close()
	if _, err := late.Snapshot(ctx, 10); !persist.ErrIsSince(err) {
		t.Fatalf("snapshot below since: %v", err)
	}
}

func TestSnapshotWaitsForUpper(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	r := must(e.client().OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer r.Close()
	got := make(chan []row.Update)
	go func() {
		cur, err := r.Snapshot(ctx, 3)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		chunk, _ := cur.Next(ctx)
		cur.Close()
		got <- chunk
	}()
	w := must(c.OpenWriter(ctx, shard))(t)
	if err := w.CompareAndAppend(ctx, []row.Update{upd(7, "x", 2, 1)}, 0, 4); err != nil {
		t.Fatal(err)
	}
	// The reader is in another client: it sees the append by polling.
	if chunk := <-got; !reflect.DeepEqual(chunk, []row.Update{upd(7, "x", 3, 1)}) {
		t.Fatalf("got %v", chunk)
	}
}

func TestTombstone(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer r.Close()
	l := must(r.Listen(ctx, 0))(t)
	errc := make(chan error)
	go func() { _, _, err := l.Next(ctx); errc <- err }()
	if err := c.DropShard(ctx, shard); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, persist.ErrShardTombstoned) {
		t.Fatalf("listen on a dropped shard: %v", err)
	}
	w := must(c.OpenWriter(ctx, shard))(t)
	if err := w.CompareAndAppend(ctx, nil, 0, 1); !errors.Is(err, persist.ErrShardTombstoned) {
		t.Fatalf("append to dropped shard: %v", err)
	}
}

// TestBytesPerCASFlat registers 2,000 readers on one shard and shows that
// the diff written per CAS does not grow with the number of readers.
func TestBytesPerCASFlat(t *testing.T) {
	e := newEnv(t)
	e.cfg.RollupEvery = 128
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	readers := 2000
	if testing.Short() {
		readers = 500
	}
	const window = 100 // readers whose CASes are averaged
	var first, last casBytes
	for i := range readers {
		switch i {
		case 0:
			first.start(c.Metrics())
		case window:
			first.stop(c.Metrics())
		case readers - window:
			last.start(c.Metrics())
		}
		r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "storm"}))(t)
		_ = r // left registered on purpose
	}
	last.stop(c.Metrics())
	s := must(c.State(ctx, shard))(t)
	if len(s.Readers) != readers {
		t.Fatalf("%d readers registered, want %d", len(s.Readers), readers)
	}
	f, l := first.perCAS(t), last.perCAS(t)
	t.Logf("bytes per CAS: %.0f for the first %d readers, %.0f for the last %d of %d (state seqno %s, %d rollups)", f, window, l, window, readers, s.SeqNo, len(s.Rollups))
	if l > 2*f {
		t.Fatalf("bytes per CAS grew from %.0f to %.0f", f, l)
	}
	// A cold process loads the same state from rollup + diffs.
	s2 := must(e.client().CachedState(ctx, shard))(t)
	if len(s2.Readers) != readers || s2.SeqNo != s.SeqNo {
		t.Fatalf("cold load: %d readers at %s, want %d at %s", len(s2.Readers), s2.SeqNo, readers, s.SeqNo)
	}
}

// casBytes measures the mean bytes per committed compare-and-set between
// start and stop, from the client's metrics.
type casBytes struct {
	committed, bytes float64 // at start, then the differences at stop
}

func (b *casBytes) start(m *persist.Metrics) { b.committed, b.bytes = casTotals(m) }

func (b *casBytes) stop(m *persist.Metrics) {
	committed, bytes := casTotals(m)
	b.committed, b.bytes = committed-b.committed, bytes-b.bytes
}

func (b *casBytes) perCAS(t *testing.T) float64 {
	t.Helper()
	if b.committed <= 0 {
		t.Fatalf("no compare-and-set committed in the window")
	}
	return b.bytes / b.committed
}

// casTotals returns how many compare-and-sets committed and their bytes.
func casTotals(m *persist.Metrics) (committed, bytes float64) {
	attempts, conflicts, errs, b := persist.CASCounters(m)
	return testutil.ToFloat64(attempts) - testutil.ToFloat64(conflicts) - testutil.ToFloat64(errs), testutil.ToFloat64(b)
}

// TestBatchBuilder: a large write built in bounded memory commits all its
// runs at once at the chosen time, and a mismatched one changes nothing.
func TestBatchBuilder(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	if err := w.CompareAndAppend(ctx, nil, 0, 5); err != nil {
		t.Fatal(err)
	}
	b := w.NewBatch()
	var want []row.Update
	for i := range 300 {
		k := int64((i * 7919) % 300)
		if err := b.Add(ctx, row.Update{Row: row.Row{k, "v"}, Diff: 1}); err != nil {
			t.Fatal(err)
		}
		want = append(want, upd(k, "v", 9, 1))
	}
	if b.Parts() < 2 {
		t.Fatalf("%d parts uploaded while adding, want several runs", b.Parts())
	}
	if err := b.Append(ctx, 9, 5); err != nil {
		t.Fatal(err)
	}
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer r.Close()
	got := readSnapshot(t, ctx, r, 9)
	if want = row.Consolidate(want); !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot after batch: %d rows, want %d", len(got), len(want))
	}
	l := must(r.Listen(ctx, 8))(t)
	ups, f, err := l.Next(ctx)
	if err != nil || f != 10 || len(ups) != 300 || ups[0].T != 9 {
		t.Fatalf("listen: %d updates, frontier %d, err %v", len(ups), f, err)
	}
	b2 := w.NewBatch()
	b2.Add(ctx, row.Update{Row: row.Row{int64(1), "x"}, Diff: 1})
	var mm *persist.UpperMismatchError
	if err := b2.Append(ctx, 20, 7); !errors.As(err, &mm) {
		t.Fatalf("stale batch: %v", err)
	}
	b2.Abort(ctx)
}

// silentConsensus hides the backend's doorbell, as SQLite's has none
// across processes: other clients see changes only by polling.
type silentConsensus struct{ persist.Consensus }

// TestShortWaitsStillPoll: a caller that waits in short slices (a reader
// that checks something else between waits) still sees another process's
// write within the poll interval: the poll timer runs from the last
// consensus read, not from each wait.
func TestShortWaitsStillPoll(t *testing.T) {
	e := newEnv(t)
	e.consensus = silentConsensus{e.consensus}
	e.cfg.PollInterval = 100 * time.Millisecond
	ctx := ctxT(t)
	writer, waiter := e.client(), e.client()
	shard := persist.NewShardID()
	must(writer.CreateShard(ctx, shard, testSchema))(t)
	must(waiter.State(ctx, shard))(t) // load the shard in the waiting process
	w := must(writer.OpenWriter(ctx, shard))(t)
	defer w.Close()
	if err := w.CompareAndAppend(ctx, []row.Update{upd(1, "a", 0, 1)}, 0, 1); err != nil {
		t.Fatal(err)
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, err := waiter.WaitForUpper(wctx, shard, 0)
		cancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("short waits never saw the other process's write")
		}
	}
}

// TestSnapshotAfter checks that a snapshot whose caller read the shard's
// state linearizably (fresh) takes a read of consensus begun since then
// for its own refresh, and that a read begun before does not serve: a
// reader expired by another process after it must still fail.
func TestSnapshotAfter(t *testing.T) {
	e, ctx, c, shard, w, expire := leasedShard(t)
	if err := w.CompareAndAppend(ctx, []row.Update{upd(1, "a", 1, 1)}, 0, 100); err != nil {
		t.Fatal(err)
	}
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	refreshes := func() float64 { return testutil.ToFloat64(persist.Refreshes(c.Metrics())) }

	fresh := time.Now()
	must(c.ReadState(ctx, shard))(t)
	before := refreshes()
	cur := must(r.SnapshotAfter(ctx, 50, fresh))(t)
	if got := must(cur.All(ctx))(t); len(got) != 1 {
		t.Fatalf("snapshot: %v, want one update", got)
	}
	if n := refreshes() - before; n != 0 {
		t.Errorf("SnapshotAfter read consensus %v times after a read begun since fresh, want 0", n)
	}
	cur = must(r.Snapshot(ctx, 50))(t)
	cur.Close()
	if n := refreshes() - before; n != 1 {
		t.Errorf("Snapshot read consensus %v times, want 1", n)
	}

	// Another process expires r: a snapshot fresh as of later must see it.
	expire()
	other := e.client()
	if rep := must(other.Maintain(ctx, shard))(t); len(rep.ExpiredReaders) != 1 {
		t.Fatalf("expired %v, want r", rep.ExpiredReaders)
	}
	if _, err := r.SnapshotAfter(ctx, 50, time.Now()); !errors.Is(err, persist.ErrReaderExpired) {
		t.Fatalf("SnapshotAfter of an expired reader fresh after the expiry: %v, want ErrReaderExpired", err)
	}
}
