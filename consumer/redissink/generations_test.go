package redissink

import (
	"context"
	"errors"
	"testing"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/internal/testsupport/redistest"
)

// generationKeys returns every data key of generation n.
func generationKeys(t *testing.T, w *worker, n int64) []string {
	t.Helper()
	keys, err := w.sink.rdb.Keys(context.Background(), globEscape(GenerationPrefix(ns, n))+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestStaleWorkerCannotResurrect is the resurrection scenario: worker A is
// paused with a write of k in hand; k is deleted upstream; worker B
// re-snapshots (a history loss) into a new generation and switches readers
// to it. When A resumes, its write is refused whole, and the active
// generation never holds k — with tombstones or without.
func TestStaleWorkerCannotResurrect(t *testing.T) {
	for _, tombstones := range []bool{false, true} {
		t.Run(map[bool]string{false: "NoTombstones", true: "Tombstones"}[tombstones], func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := newClient(t, srv)
			a := newWorker(t, rdb, tombstones)
			a.mustWrite(kvBatch(1, 2, kvColumns, kv{"k", 1, 1, 1}, kv{"j", 1, 1, 1}))

			// A has written (staged) k's update and pauses before its
			// commit.
			paused := kvBatch(2, 3, kvColumns, kv{"k", 1, 2, -1}, kv{"k", 2, 2, 1})
			paused.Generation = a.gen
			if err := a.sink.Write(context.Background(), paused); err != nil {
				t.Fatal(err)
			}

			// k is deleted upstream at 5; B finds its history lost and
			// re-snapshots at 7, where k does not exist.
			b := newWorker(t, rdb, tombstones)
			b.gen++
			snap := kvBatch(7, 7, kvColumns, kv{"j", 1, 7, 1})
			snap.Partial = true
			b.mustWrite(snap)
			b.mustWrite(kvBatch(7, 8, kvColumns))

			// A resumes: its commit, and any chunk after it, is fenced.
			err := a.sink.Commit(context.Background(), a.pos, consumer.Position{Frontier: 3, Generation: a.gen})
			if !errors.Is(err, consumer.ErrFenced) {
				t.Fatalf("A's commit after B's re-snapshot: err = %v, want ErrFenced", err)
			}
			late := kvBatch(3, 3, kvColumns, kv{"k", 3, 3, 1})
			late.Partial = true
			if err := a.write(late); !errors.Is(err, consumer.ErrFenced) {
				t.Fatalf("A's partial chunk after B's re-snapshot: err = %v, want ErrFenced", err)
			}
			if got, want := values(t, rdb), `[["j"]={"k":"j","v":1}@7]`; got != want {
				t.Errorf("active generation = %s, want %s (no k)", got, want)
			}
			if got := generationKeys(t, a, 1); len(got) != 0 {
				t.Errorf("old generation 1 still holds %v", got)
			}
		})
	}
}

// TestSupersededLoaderIsFenced: two workers re-snapshot from one
// checkpoint; the later claim wins, the earlier loader's chunks and commit
// are refused, and its half-loaded generation is deleted.
func TestSupersededLoaderIsFenced(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv)
	first := newWorker(t, rdb, false)
	first.mustWrite(kvBatch(1, 2, kvColumns, kv{"a", 1, 1, 1}))

	x, y := newWorker(t, rdb, false), newWorker(t, rdb, false)
	x.gen++
	y.gen++
	// Snapshot chunks: written by loadChunk's MULTI/EXEC, fenced by WATCH.
	chunk := func(ts uint64, k string) consumer.Batch {
		b := kvBatch(ts, ts, kvColumns, kv{k, 1, ts, 1})
		b.Partial, b.Snapshot = true, true
		return b
	}
	// A snapshot chunk loads in the background: its error comes with the
	// next call (or Close).
	landed := func(w *worker, b consumer.Batch) error {
		t.Helper()
		if err := w.write(b); err != nil {
			return err
		}
		return w.sink.Close()
	}
	if err := landed(x, chunk(10, "x1")); err != nil { // claims generation 2
		t.Fatal(err)
	}
	if err := landed(y, chunk(12, "y1")); err != nil { // claims generation 3, superseding x
		t.Fatal(err)
	}
	if err := landed(x, chunk(10, "x2")); !errors.Is(err, consumer.ErrFenced) {
		t.Fatalf("superseded loader's chunk: err = %v, want ErrFenced", err)
	}
	if err := x.write(kvBatch(10, 11, kvColumns)); !errors.Is(err, consumer.ErrFenced) {
		t.Fatalf("superseded loader's commit: err = %v, want ErrFenced", err)
	}
	y.mustWrite(kvBatch(12, 13, kvColumns, kv{"y2", 1, 12, 1}))
	if got, want := values(t, rdb), `[["y1"]={"k":"y1","v":1}@12 ["y2"]={"k":"y2","v":1}@12]`; got != want {
		t.Errorf("active generation = %s, want %s", got, want)
	}
	for _, n := range []int64{1, 2} {
		if got := generationKeys(t, y, n); len(got) != 0 {
			t.Errorf("generation %d still holds %v", n, got)
		}
	}
	gens := rdb.LRange(context.Background(), ns+keyGenerations, 0, -1).Val()
	if len(gens) != 1 || gens[0] != "3" {
		t.Errorf("generations list = %v, want [3]", gens)
	}
}

// TestAbandonedGenerationDeletedOnLoad: a sink that dies while loading a
// generation leaves its keys listed; the next sink's Load deletes them and
// its own snapshot claims a new generation.
func TestAbandonedGenerationDeletedOnLoad(t *testing.T) {
	srv := redistest.Start(t)
	rdb := newClient(t, srv)
	a := newWorker(t, rdb, false)
	b := kvBatch(1, 1, kvColumns, kv{"a", 1, 1, 1})
	b.Partial = true
	a.mustWrite(b) // generation 1, never committed; then a dies
	// A restart of Redis in between keeps the list and the keys.
	srv.Restart(t)
	c := newWorker(t, rdb, false) // a claim by a dead worker still stands: Load leaves it
	c.mustWrite(kvBatch(2, 3, kvColumns, kv{"b", 1, 2, 1}))
	if got := generationKeys(t, c, 1); len(got) != 0 {
		t.Errorf("abandoned generation 1 still holds %v", got)
	}
	if got, want := values(t, rdb), `[["b"]={"k":"b","v":1}@2]`; got != want {
		t.Errorf("active generation = %s, want %s", got, want)
	}
	if got := c.sink.Stats().Generations; got != 1 {
		t.Errorf("generations switched = %d, want 1", got)
	}
}
