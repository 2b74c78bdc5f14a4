package persist_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/codec"
	"github.com/shardtail/shardtail/row"
)

// headShard writes n rows of (int8, 64-byte text) at time 1 in one append
// of parts of about 64 KiB (several parts, each of a short first record
// batch and a longer second one) and returns the rows and a reader.
func headShard(t *testing.T, e *env, n int) (*persist.Client, string, []row.Update, *persist.Reader) {
	t.Helper()
	ctx := ctxT(t)
	e.cfg.PartTargetBytes = 64 << 10
	e.cfg.SnapshotChunkRows = 1000
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	want := make([]row.Update, n)
	for i := range want {
		want[i] = upd(int64(i), fmt.Sprintf("%064d", i), 1, 1)
	}
	if err := w.CompareAndAppend(ctx, want, 0, 2); err != nil {
		t.Fatal(err)
	}
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	t.Cleanup(func() { r.Close() })
	if s := must(c.State(ctx, shard))(t); len(s.Batches) != 1 || len(s.Batches[0].Parts) < 2 {
		t.Fatalf("want one batch of several parts, got %d batches", len(s.Batches))
	}
	return c, shard, want, r
}

// readChunks drains a snapshot at asOf with NextChunk and returns its
// updates.
func readChunks(t *testing.T, ctx context.Context, r *persist.Reader, asOf uint64) []row.Update {
	t.Helper()
	cur := must(r.Snapshot(ctx, asOf))(t)
	var all []row.Update
	for {
		ch, err := cur.NextChunk(ctx)
		if errors.Is(err, io.EOF) {
			return all
		}
		if err != nil {
			t.Fatal(err)
		}
		if ch.Columns == nil {
			t.Fatal("a chunk of a single run at one time did not pass through as columns")
		}
		all = append(all, ch.Decoded()...)
	}
}

func checkUpdates(t *testing.T, got, want []row.Update, asOf uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d updates, want %d", len(got), len(want))
	}
	for i := range got {
		if row.CompareUpdate(got[i], row.Update{Row: want[i].Row, T: asOf}) != 0 || got[i].Diff != want[i].Diff {
			t.Fatalf("update %d: got %v, want %v at %d", i, got[i], want[i], asOf)
		}
	}
}

// TestPartCache checks that a cursor reads a part cached whole without
// fetching it, with the same updates as the first read, also a part whose
// head alone a FETCH 10 cached before, and that the cache's bytes are
// charged and given back on Close.
func TestPartCache(t *testing.T) {
	e := newEnv(t)
	holder := membudget.New(0).Holder(membudget.HolderPersist)
	e.cfg.Memory = holder
	c, _, want, r := headShard(t, e, 5000)
	ctx := ctxT(t)

	// A FETCH 10: the first part's head is cached, not the part.
	cur := must(r.Snapshot(ctx, 1))(t)
	must(cur.NextChunk(ctx))(t)
	cur.Close()

	fetched := partFetches(c)
	checkUpdates(t, readChunks(t, ctx, r, 1), want, 1)
	parts := partFetches(c) - fetched
	if held := holder.Bytes(); held <= 0 || held > persist.DefaultPartCacheBytes {
		t.Fatalf("the cache holds %d bytes after a read, want some, at most the default bound", held)
	}

	// A second read: every part from the cache, none fetched.
	fetched = partFetches(c)
	for range 2 {
		checkUpdates(t, readChunks(t, ctx, r, 1), want, 1)
	}
	if got := partFetches(c) - fetched; got != 0 {
		t.Errorf("reads through the cache fetched %d parts, want none", got)
	}
	if got := testutil.ToFloat64(persist.PartCache(c.Metrics(), "whole")); got != float64(2*parts) {
		t.Errorf("%v whole-part hits, want %d", got, 2*parts)
	}
	if got := testutil.ToFloat64(persist.PartCache(c.Metrics(), "head")); got != 1 {
		t.Errorf("%v first-batch hits, want 1 (the first read's, of the part the FETCH read)", got)
	}
	c.Close()
	if held := holder.Bytes(); held != 0 {
		t.Errorf("the cache holds %d bytes after Close, want 0", held)
	}
}

// headsOnly is a part cache bound under which headShard's parts are kept
// by their first batch only (an entry is at most an eighth of it).
const headsOnly = 512 << 10

// TestPartHeadCache checks that, where parts are too large to keep whole,
// a new cursor takes a part's first rows from the cache of its first
// batch, without fetching the part, and that a whole read through the
// cache returns the same updates as the first read.
func TestPartHeadCache(t *testing.T) {
	e := newEnv(t)
	e.cfg.PartCacheBytes = headsOnly
	c, _, want, r := headShard(t, e, 5000)
	ctx := ctxT(t)

	fetched := partFetches(c)
	checkUpdates(t, readChunks(t, ctx, r, 1), want, 1)
	parts := partFetches(c) - fetched

	// A FETCH 10: the first chunk comes from the cache, no part is fetched.
	fetched = partFetches(c)
	cur := must(r.Snapshot(ctx, 1))(t)
	ch := must(cur.NextChunk(ctx))(t)
	cur.Close()
	if got := partFetches(c) - fetched; got != 0 {
		t.Errorf("a new cursor's first chunk fetched %d parts, want none", got)
	}
	checkUpdates(t, ch.Decoded(), want[:ch.Len()], 1)

	// A whole read through the cache: the same rows, every part fetched
	// once still for its second batch (the last part may have none).
	fetched = partFetches(c)
	checkUpdates(t, readChunks(t, ctx, r, 1), want, 1)
	if got := partFetches(c) - fetched; got != parts && got != parts-1 {
		t.Errorf("a read through the cache fetched %d parts, want each of %d once (but the last)", got, parts)
	}
	if got := testutil.ToFloat64(persist.PartCache(c.Metrics(), "head")); got < float64(parts) {
		t.Errorf("%v first-batch hits, want at least %d", got, parts)
	}
	if got := testutil.ToFloat64(persist.PartCache(c.Metrics(), "whole")); got > 1 {
		t.Errorf("%v whole-part hits under a bound of %d, want at most the last part's", got, headsOnly)
	}
}

// TestPartCacheBound checks that the cache stays within PartCacheBytes,
// and that a cache too small for any head leaves reads as they were.
func TestPartCacheBound(t *testing.T) {
	for _, limit := range []int64{headsOnly, 1} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			e := newEnv(t)
			holder := membudget.New(0).Holder(membudget.HolderPersist)
			e.cfg.Memory, e.cfg.PartCacheBytes = holder, limit
			c, _, want, r := headShard(t, e, 5000)
			ctx := ctxT(t)
			for range 3 {
				checkUpdates(t, readChunks(t, ctx, r, 1), want, 1)
				if held := holder.Bytes(); held < 0 || held > limit {
					t.Fatalf("the cache holds %d bytes, bound %d", held, limit)
				}
			}
			hits := testutil.ToFloat64(persist.PartCache(c.Metrics(), "head")) + testutil.ToFloat64(persist.PartCache(c.Metrics(), "whole"))
			if limit == 1 && hits != 0 {
				t.Error("a cache too small for any head had hits")
			}
		})
	}
}

// TestPartHeadCacheCorruptRest checks that a part whose first batch is
// cached is still checked where it is read: a part corrupted after its head
// was cached fails the read with a *PartError naming it once the cursor
// reaches its second batch (a *PartError, or ErrTooLarge where the
// damage is in a buffer's size).
func TestPartHeadCacheCorruptRest(t *testing.T) {
	e := newEnv(t)
	e.cfg.PartCacheBytes = headsOnly
	c, shard, want, r := headShard(t, e, 5000)
	ctx := ctxT(t)
	checkUpdates(t, readChunks(t, ctx, r, 1), want, 1)
	s := must(c.State(ctx, shard))(t)
	key := s.Batches[0].Parts[0].Key
	data := must(e.blob.Get(ctx, key))(t)
	bad := append([]byte(nil), data...)
	for i := len(bad) / 2; i < len(bad)*3/4; i++ {
		bad[i] ^= 0x5a
	}
	if err := e.blob.Set(ctx, key, bad); err != nil {
		t.Fatal(err)
	}
	cur := must(r.Snapshot(ctx, 1))(t)
	defer cur.Close()
	for {
		_, err := cur.NextChunk(ctx)
		if err == nil {
			continue
		}
		var pe *persist.PartError
		if errors.As(err, &pe) && pe.Key == key || errors.Is(err, codec.ErrTooLarge) && strings.Contains(err.Error(), key) {
			return
		}
		t.Fatalf("got %v, want a *PartError for part %s", err, key)
	}
}

// TestPartCacheFill checks that the batches a cursor collects for the
// cache while it reads a part count as they are collected, and are given
// back when the cursor leaves the part unfinished (only the part's cached
// first batch stays).
func TestPartCacheFill(t *testing.T) {
	e := newEnv(t)
	holder := membudget.New(0).Holder(membudget.HolderPersist)
	e.cfg.Memory = holder
	_, _, _, r := headShard(t, e, 5000)
	ctx := ctxT(t)

	cur := must(r.Snapshot(ctx, 1))(t)
	must(cur.NextChunk(ctx))(t)
	reading := holder.Bytes()
	cur.Close()
	left := holder.Bytes()
	if left <= 0 || left >= reading {
		t.Fatalf("the cache counts %d bytes while a cursor reads a part's first batch and %d once it left: want the first batch cached, and the collected batch counted until the cursor left", reading, left)
	}
}

// TestPartCacheBudget checks the cache under a memory budget: it is
// charged to HolderPartCache, it is what the policy lets go of first
// (least recently used entries, only as many as the budget needs), and
// while the budget is over a read keeps nothing, neither entries nor
// the batches it would collect for them.
func TestPartCacheBudget(t *testing.T) {
	e := newEnv(t)
	b := membudget.New(0)
	e.cfg.Budget = b
	cache, other := b.Holder(membudget.HolderPartCache), b.Holder("other")
	c, _, want, r := headShard(t, e, 5000)
	ctx := ctxT(t)

	checkUpdates(t, readChunks(t, ctx, r, 1), want, 1)
	full := cache.Bytes()
	if full <= 0 {
		t.Fatal("a read cached nothing")
	}
	other.Add(1)
	b.SetLimit(full) // over by one byte: the cache gives up some entries
	b.Enforce()
	if n := cache.Bytes(); b.Over() || n <= 0 || n >= full {
		t.Fatalf("after Enforce over by 1 byte: the cache holds %d of %d bytes, budget over: %v; want part of it let go, and within the budget", n, full, b.Over())
	}

	other.Add(full) // over by more than the cache holds: it is emptied
	b.Enforce()
	if n := cache.Bytes(); n != 0 {
		t.Fatalf("the cache holds %d bytes after Enforce over by more than it, want 0", n)
	}
	fetched := partFetches(c)
	cur := must(r.Snapshot(ctx, 1))(t)
	for {
		if _, err := cur.NextChunk(ctx); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if n := cache.Bytes(); n != 0 {
			t.Fatalf("while the budget is over, a read holds %d bytes for the cache, want none", n)
		}
	}
	parts := partFetches(c) - fetched

	other.Add(-other.Bytes()) // within the budget again: reads cache
	checkUpdates(t, readChunks(t, ctx, r, 1), want, 1)
	fetched = partFetches(c)
	checkUpdates(t, readChunks(t, ctx, r, 1), want, 1)
	if got := partFetches(c) - fetched; cache.Bytes() <= 0 || got >= parts {
		t.Errorf("within the budget again: the cache holds %d bytes and a read fetched %d of %d parts, want the parts cached", cache.Bytes(), got, parts)
	}
}
