package persist_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// gatedBlob holds every Set of a part until the test lets it go: entered
// receives the part's key, and the Set returns once release is read.
type gatedBlob struct {
	persist.Blob
	entered chan string
	release chan struct{}
}

func (b *gatedBlob) Set(ctx context.Context, key string, value []byte) error {
	if strings.Contains(key, "/p") {
		select {
		case b.entered <- key:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-b.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return b.Blob.Set(ctx, key, value)
}

// bigUpdates returns n updates at t of values large enough that a part's
// encoding is worth charging.
func bigUpdates(n int, t uint64) []row.Update {
	var ups []row.Update
	for i := range n {
		ups = append(ups, upd(int64(i)+int64(t)*1000, strings.Repeat("v", 4<<10), t, 1))
	}
	return ups
}

// TestWritesChargedToMemory: an append's encoded part is charged to
// Config.Memory until it is uploaded, and so is a compaction's (with its
// buffered updates); nothing stays charged once they are done.
func TestWritesChargedToMemory(t *testing.T) {
	e := newEnv(t)
	e.cfg.PartTargetBytes = 1 << 20
	holder := membudget.New(0).Holder(membudget.HolderPersist)
	e.cfg.Memory = holder
	gate := &gatedBlob{Blob: e.blob, entered: make(chan string), release: make(chan struct{})}
	e.blob = gate
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)

	for i := range uint64(2) {
		done := make(chan error, 1)
		go func() { done <- w.CompareAndAppend(ctx, bigUpdates(8, i), i, i+1) }()
		<-gate.entered
		if got := holder.Bytes(); got <= 0 {
			t.Errorf("append %d: %d bytes charged while its part uploads, want > 0 (the encoded part)", i, got)
		}
		gate.release <- struct{}{}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := holder.Bytes(); got != 0 {
			t.Fatalf("append %d: %d bytes charged once it committed, want 0", i, got)
		}
	}

	done := make(chan error, 1)
	go func() {
		rep, err := c.Maintain(ctx, shard)
		if err == nil && rep.Compactions == 0 {
			err = errors.New("maintenance compacted nothing")
		}
		done <- err
	}()
	<-gate.entered
	// The merged updates (16 rows of 4 KiB) and the part's encoding.
	if got, min := holder.Bytes(), int64(16*4<<10); got < min {
		t.Errorf("%d bytes charged while a compaction uploads its part, want at least %d (its buffered updates)", got, min)
	}
	gate.release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := holder.Bytes(); got != 0 {
		t.Fatalf("%d bytes charged once the compaction committed, want 0", got)
	}
}

// TestCompactionsTakeSlots: a compaction waits for one of the process's
// compaction slots; while another shard's compaction holds the only one,
// it merges nothing.
func TestCompactionsTakeSlots(t *testing.T) {
	e := newEnv(t)
	e.cfg.MaxConcurrentCompactions = 1
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	for i := range uint64(2) {
		if err := w.CompareAndAppend(ctx, []row.Update{upd(int64(i), "v", i, 1)}, i, i+1); err != nil {
			t.Fatal(err)
		}
	}

	release := persist.HoldCompactionSlot(c)
	// With the slot held, maintenance can only wait for it until its
	// context ends: it must not compact.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	rep, err := c.Maintain(short, shard)
	cancel()
	if rep.Compactions != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("maintenance with every compaction slot held: %d compactions, err %v; want 0 and %v", rep.Compactions, err, context.DeadlineExceeded)
	}
	if got := len(must(c.State(ctx, shard))(t).Batches); got != 2 {
		t.Fatalf("%d batches after maintenance without a slot, want 2", got)
	}

	release()
	rep = must(c.Maintain(ctx, shard))(t)
	if rep.Compactions == 0 {
		t.Fatal("maintenance with a free slot compacted nothing")
	}
}

// TestListenSplitsLargeBatches: a listen behind compaction reads a merged
// batch of several times; past Config.ListenChunkBytes, Next returns it
// over several calls, whole times each, with each frontier the first time
// it did not return, and nothing lost or repeated.
func TestListenSplitsLargeBatches(t *testing.T) {
	e := newEnv(t)
	e.cfg.ListenChunkBytes = 1 // one time per call
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	const times = 4
	var want []row.Update
	for i := range uint64(times) {
		ups := []row.Update{upd(int64(i), "a", i, 1), upd(int64(i)+100, "b", i, 1)}
		if err := w.CompareAndAppend(ctx, ups, i, i+1); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			want = append(want, ups...)
		}
	}
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "test"}))(t)
	if rep := must(c.Maintain(ctx, shard))(t); rep.Compactions == 0 {
		t.Fatal("maintenance compacted nothing")
	}
	if got := len(must(c.State(ctx, shard))(t).Batches); got != 1 {
		t.Fatalf("%d batches after compaction, want 1 (merged)", got)
	}
	l := must(r.Listen(ctx, 0))(t)
	var got []row.Update
	for want := uint64(2); want <= times; want++ {
		ups, frontier, err := l.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if frontier != want || len(ups) != 2 || ups[0].T != want-1 || ups[1].T != want-1 {
			t.Fatalf("Next: %v at frontier %d; want the 2 updates at time %d, frontier %d", ups, frontier, want-1, want)
		}
		got = append(got, ups...)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listen returned %v, want %v", got, want)
	}
}

// TestListenBoundsCompactedBatch: a listen that resumes inside a merged
// batch of many times, stored in (row, time) order over many parts, gets
// every update after its AS OF once, in time order, whole times per call,
// while one read never holds much more than its chunk bound
// (Listen.SetChunkBytes, else Config.ListenChunkBytes) — not the batch.
func TestListenBoundsCompactedBatch(t *testing.T) {
	e := newEnv(t)
	const limit = 256 << 10 // SetChunkBytes's, under the default config's
	e.cfg.PartTargetBytes = 128 << 10
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	const times, perTime, asOf = 64, 8, 5
	var want []row.Update
	for i := range uint64(times) {
		ups := bigUpdates(perTime, i)
		if err := w.CompareAndAppend(ctx, ups, i, i+1); err != nil {
			t.Fatal(err)
		}
		if i > asOf {
			want = append(want, ups...)
		}
	}
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "test"}))(t)
	for range 16 {
		if len(must(c.State(ctx, shard))(t).Batches) == 1 {
			break
		}
		must(c.Maintain(ctx, shard))(t)
	}
	s := must(c.State(ctx, shard))(t)
	if len(s.Batches) != 1 || len(s.Batches[0].Parts) < 4 {
		t.Fatalf("%d batches after compaction (first of %d parts), want 1 of several parts", len(s.Batches), len(s.Batches[0].Parts))
	}
	var timeBytes int64 // one time's updates
	for _, u := range want[:perTime] {
		timeBytes += u.Size()
	}
	l := must(r.Listen(ctx, asOf))(t)
	l.SetChunkBytes(limit)
	var got []row.Update
	calls := 0
	for frontier := uint64(asOf + 1); frontier < times; {
		ups, next, err := l.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		calls++
		var n int64
		for _, u := range ups {
			n += u.Size()
			if u.T < frontier || u.T >= next {
				t.Fatalf("Next returned an update at %d, outside [%d, %d)", u.T, frontier, next)
			}
		}
		if n > limit+timeBytes {
			t.Errorf("Next returned %d bytes, want at most the limit %d + one time's %d", n, limit, timeBytes)
		}
		got = append(got, ups...)
		frontier = next
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listen returned %d updates, want the %d after its AS OF, in time order", len(got), len(want))
	}
	if calls < 4 {
		t.Errorf("%d calls returned the batch, want it cut into several chunks", calls)
	}
	if peak, max := persist.ListenPeakBytes(l), int64(2*limit)+2*timeBytes; peak > max {
		t.Errorf("a read of the batch held %d bytes at its peak, want at most %d (the batch is %d)", peak, max, int64(len(want))*want[0].Size())
	}
}
