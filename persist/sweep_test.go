package persist_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// fakeClock is a Config.Now that tests move by hand. It starts at the real
// time, so that the mem Blob's modification times (real) compare with it.
type fakeClock struct{ ms atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ms.Store(time.Now().UnixMilli())
	return c
}

func (c *fakeClock) Now() int64              { return c.ms.Load() }
func (c *fakeClock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// blobKeys returns every key under prefix.
func blobKeys(t testing.TB, b persist.Blob, prefix string) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	err := b.List(context.Background(), prefix, func(m persist.BlobMeta) error {
		keys[m.Key] = true
		return nil
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys
}

// referencedKeys returns the parts and rollups s references.
func referencedKeys(s *persist.State) map[string]bool {
	keys := map[string]bool{}
	for _, b := range s.Batches {
		for _, p := range b.Parts {
			keys[p.Key] = true
		}
	}
	for _, k := range s.Rollups {
		keys[k] = true
	}
	return keys
}

// appendRows appends n single-row batches from upper on and returns the new
// upper.
func appendRows(t testing.TB, ctx context.Context, w *persist.Writer, upper uint64, n int) uint64 {
	t.Helper()
	for range n {
		if err := w.CompareAndAppend(ctx, []row.Update{upd(int64(upper), "x", upper, 1)}, upper, upper+1); err != nil {
			t.Fatalf("append at %d: %v", upper, err)
		}
		upper++
	}
	return upper
}

func TestSweepDeletesOldOrphansOnly(t *testing.T) {
	e := newEnv(t)
	clock := newFakeClock()
	e.cfg.Now = clock.Now
	e.cfg.SweepInterval = -1 // only the explicit Sweep calls below
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	upper := appendRows(t, ctx, w, 0, 20) // several rollups (RollupEvery 8)

	// Orphans as a crash between upload and CAS leaves them: a part and a
	// rollup under the shard's prefix that no version references. A blob
	// of another shard is not this shard's to sweep.
	orphans := []string{shard + "/p" + uuid.NewString(), shard + "/v99/r" + uuid.NewString()}
	other := persist.NewShardID() + "/p" + uuid.NewString()
	for _, key := range append(slices.Clone(orphans), other) {
		if err := e.blob.Set(ctx, key, []byte("orphan")); err != nil {
			t.Fatal(err)
		}
	}
	before := blobKeys(t, e.blob, shard+"/")

	// Younger than the grace period: a write may still commit them.
	if got := must(c.Sweep(ctx, shard))(t); got != 0 {
		t.Fatalf("Sweep within the grace period deleted %d blobs, want 0", got)
	}
	if got := blobKeys(t, e.blob, shard+"/"); !maps.Equal(got, before) {
		t.Fatalf("Sweep within the grace period changed the blobs: got %d keys, want %d", len(got), len(before))
	}

	clock.Advance(persist.DefaultOrphanGrace + time.Minute)
	if got := must(c.Sweep(ctx, shard))(t); got != len(orphans) {
		t.Fatalf("Sweep after the grace period deleted %d blobs, want the %d orphans", got, len(orphans))
	}
	after := blobKeys(t, e.blob, shard+"/")
	for _, key := range orphans {
		if after[key] {
			t.Errorf("orphan %s survived the sweep", key)
		}
	}
	s := must(c.State(ctx, shard))(t)
	for key := range referencedKeys(s) {
		if !after[key] {
			t.Errorf("referenced blob %s was swept", key)
		}
	}
	if len(after) != len(before)-len(orphans) {
		t.Errorf("after the sweep: got %d keys, want %d (only the orphans gone)", len(after), len(before)-len(orphans))
	}
	if !blobKeys(t, e.blob, "")[other] {
		t.Errorf("the sweep of %s deleted another shard's blob %s", shard, other)
	}
	if got := testutil.ToFloat64(persist.BlobsSwept(c.Metrics())); got != float64(len(orphans)) {
		t.Errorf("BlobsSwept metric = %v, want %d", got, len(orphans))
	}
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer r.Close()
	if got := readSnapshot(t, ctx, r, upper-1); len(got) != int(upper) {
		t.Fatalf("after the sweep the snapshot has %d rows, want %d", len(got), upper)
	}
}

func TestSweepKeepsBlobsOfLiveVersions(t *testing.T) {
	// A reader holding an old version may still fetch the inputs of a later
	// compaction: GC keeps them, and so must the sweep.
	e := newEnv(t)
	clock := newFakeClock()
	e.cfg.Now = clock.Now
	e.cfg.SweepInterval = -1
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	upper := appendRows(t, ctx, w, 0, 6)
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer r.Close()
	held := referencedKeys(must(c.State(ctx, shard))(t))
	upper = appendRows(t, ctx, w, upper, 6)
	rep := must(c.Maintain(ctx, shard))(t)
	if rep.Compactions == 0 {
		t.Fatalf("Maintain compacted nothing; the test needs replaced batches")
	}
	clock.Advance(persist.DefaultOrphanGrace + time.Minute)
	if got := must(c.Sweep(ctx, shard))(t); got != 0 {
		t.Fatalf("Sweep deleted %d blobs, want 0: every blob is referenced by a live version", got)
	}
	after := blobKeys(t, e.blob, shard+"/")
	for key := range held {
		if !after[key] {
			t.Errorf("blob %s of the version the reader holds was swept", key)
		}
	}
	if got := readSnapshot(t, ctx, r, upper-1); len(got) != int(upper) {
		t.Fatalf("snapshot after the sweep has %d rows, want %d", len(got), upper)
	}
}

func TestMaintainSweepsEveryInterval(t *testing.T) {
	e := newEnv(t)
	clock := newFakeClock()
	e.cfg.Now = clock.Now
	e.cfg.OrphanGrace = time.Minute
	e.cfg.SweepInterval = time.Hour
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	orphan := func() string {
		t.Helper()
		key := shard + "/p" + uuid.NewString()
		if err := e.blob.Set(ctx, key, []byte("orphan")); err != nil {
			t.Fatal(err)
		}
		return key
	}
	first := orphan()
	clock.Advance(2 * time.Minute)
	if rep := must(c.Maintain(ctx, shard))(t); rep.BlobsSwept != 1 {
		t.Fatalf("first Maintain of the process swept %d blobs, want 1", rep.BlobsSwept)
	}
	if blobKeys(t, e.blob, shard+"/")[first] {
		t.Fatalf("orphan %s survived the first Maintain", first)
	}
	second := orphan()
	clock.Advance(2 * time.Minute)
	if rep := must(c.Maintain(ctx, shard))(t); rep.BlobsSwept != 0 {
		t.Fatalf("Maintain within SweepInterval swept %d blobs, want 0", rep.BlobsSwept)
	}
	clock.Advance(time.Hour)
	if rep := must(c.Maintain(ctx, shard))(t); rep.BlobsSwept != 1 {
		t.Fatalf("Maintain after SweepInterval swept %d blobs, want 1", rep.BlobsSwept)
	}
	if blobKeys(t, e.blob, shard+"/")[second] {
		t.Fatalf("orphan %s survived", second)
	}
}

// stallingBlob advances a clock by d on every Set of a part: an upload
// that takes (or a write that stalls after it for) that long.
type stallingBlob struct {
	persist.Blob
	clock *fakeClock
	d     time.Duration
}

func (b *stallingBlob) Set(ctx context.Context, key string, value []byte) error {
	err := b.Blob.Set(ctx, key, value)
	if strings.Contains(key, "/p") {
		b.clock.Advance(b.d)
	}
	return err
}

func TestSlowUploadIsNotCommitted(t *testing.T) {
	// A write whose parts are older than half the grace when it would commit
	// could race the sweep, which may already have taken them for orphans:
	// it must fail instead of committing possibly deleted parts.
	e := newEnv(t)
	clock := newFakeClock()
	e.cfg.Now = clock.Now
	e.cfg.SweepInterval = -1
	e.blob = &stallingBlob{Blob: e.blob, clock: clock, d: persist.DefaultOrphanGrace/2 + time.Second}
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	err := w.CompareAndAppend(ctx, []row.Update{upd(1, "slow", 0, 1)}, 0, 1)
	if !errors.Is(err, persist.ErrUploadExpired) || !persist.IsIndeterminate(err) {
		t.Fatalf("append of a slow upload: got %v, want ErrUploadExpired (indeterminate)", err)
	}
	s := must(c.State(ctx, shard))(t)
	if s.Upper != 0 {
		t.Fatalf("the expired append committed: upper %d, want 0", s.Upper)
	}
	parts := len(blobKeys(t, e.blob, shard+"/")) - len(s.Rollups)
	if parts == 0 {
		t.Fatalf("no part was uploaded; the test needs one")
	}
	clock.Advance(persist.DefaultOrphanGrace)
	if got := must(c.Sweep(ctx, shard))(t); got != parts {
		t.Fatalf("Sweep deleted %d blobs, want the expired append's %d parts", got, parts)
	}
	// A progress-only append has no uploads and is never refused.
	if err := w.CompareAndAppend(ctx, nil, 0, 5); err != nil {
		t.Fatalf("progress-only append: %v", err)
	}
}
