package adapter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
)

// blobCount counts the blobs under shard's prefix.
func blobCount(t *testing.T, b persist.Blob, shard string) int {
	t.Helper()
	n := 0
	if err := b.List(context.Background(), shard+"/", func(persist.BlobMeta) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// insertRows is an INSERT of n rows (i<rest>) into table.
func insertRows(table string, n int, rest string) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + table + " VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%d%s)", i, rest)
	}
	return b.String()
}

// finalizeUntil runs the finalizer until shard holds want blobs, failing
// after many passes (the background finalizer may do the work first).
func finalizeUntil(t *testing.T, s *testserver.Server, b persist.Blob, shard string, want int) {
	t.Helper()
	for range 200 {
		if _, err := s.Coordinator.FinalizeDropped(context.Background()); err != nil {
			t.Fatal(err)
		}
		if blobCount(t, b, shard) == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("shard %s holds %d blobs, want %d", shard, blobCount(t, b, shard), want)
}

// TestDropFinalizesShard checks that a dropped table's blobs go (all but
// the tombstone's rollup), but only once the readers still registered on
// it are gone, or its grace is over.
func TestDropFinalizesShard(t *testing.T) {
	b := blobmem.New()
	s := testserver.Start(t, testserver.Options{Blob: b})
	execAll(t, connect(t, s), "CREATE TABLE t (a int8 NOT NULL, b text)")
	for range 5 {
		execAll(t, connect(t, s), insertRows("t", 100, ", 'some text'"))
	}
	shard := shardOf(t, s, "t")
	if n := blobCount(t, b, shard); n < 3 {
		t.Fatalf("%d blobs before the drop: the test writes too little", n)
	}
	ctx := context.Background()
	// A reader that has not finished (a subscriber in a tail process).
	r, err := s.Persist.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "slow reader"})
	if err != nil {
		t.Fatal(err)
	}
	execAll(t, connect(t, s), "DROP TABLE t")
	for range 3 {
		if _, err := s.Coordinator.FinalizeDropped(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := blobCount(t, b, shard); n < 3 {
		t.Fatalf("finalized with a live reader and the grace not over: %d blobs left", n)
	}
	st, err := s.Persist.State(ctx, shard)
	if err != nil || !st.Tombstone {
		t.Fatalf("dropped shard not tombstoned: %v %v", st, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	finalizeUntil(t, s, b, shard, 1)
}

// TestDropFinalizedAfterRestart drops tables on a server whose finalizer
// does not run (a crash right after the DROP) and checks that the next
// start finalizes them.
func TestDropFinalizedAfterRestart(t *testing.T) {
	b, cons := blobmem.New(), consmem.New()
	opts := testserver.Options{Blob: b, Consensus: cons, Adapter: func(c *adapter.Config) { c.FinalizeGrace = -1 }}
	s := testserver.Start(t, opts)
	execAll(t, connect(t, s), "CREATE TABLE t (a int8 NOT NULL)", "CREATE TABLE u (a int8 NOT NULL)",
		insertRows("t", 100, ""), insertRows("u", 100, ""),
		"CREATE MATERIALIZED VIEW mv AS SELECT a FROM u")
	tshard, ushard, mvshard := shardOf(t, s, "t"), shardOf(t, s, "u"), shardOf(t, s, "mv")
	execAll(t, connect(t, s), "DROP TABLE t", "DROP TABLE u CASCADE")
	s.Stop()
	for _, sh := range []string{tshard, ushard} {
		if n := blobCount(t, b, sh); n < 2 {
			t.Fatalf("shard %s finalized with the finalizer off: %d blobs", sh, n)
		}
	}

	opts.Adapter = nil
	s = testserver.Start(t, opts)
	for _, sh := range []string{tshard, ushard, mvshard} {
		finalizeUntil(t, s, b, sh, 1)
		if st, err := s.Persist.State(context.Background(), sh); err != nil || !st.Finalized() {
			t.Errorf("shard %s after restart: finalized %v, err %v", sh, err == nil && st.Finalized(), err)
		}
	}
}

// TestRetentionReaderStable restarts a server many times on one storage
// and checks that each table keeps one retention policy reader, and that
// the policy readers an older version left behind are expired.
func TestRetentionReaderStable(t *testing.T) {
	b, cons := blobmem.New(), consmem.New()
	opts := testserver.Options{Blob: b, Consensus: cons}
	s := testserver.Start(t, opts)
	execAll(t, connect(t, s), "CREATE TABLE t (a int8 NOT NULL)")
	shard := shardOf(t, s, "t")
	ctx := context.Background()
	// Leftovers of an older version: one policy reader per start.
	for range 3 {
		if _, err := s.Persist.OpenReader(ctx, shard, persist.ReaderOptions{Critical: true, Purpose: "retention policy"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Stop()
	for i := range 5 {
		s = testserver.Start(t, opts)
		st, err := s.Persist.State(ctx, shard)
		if err != nil {
			t.Fatal(err)
		}
		critical := 0
		for _, r := range st.Readers {
			if r.LeaseMs == 0 {
				critical++
			}
		}
		if critical != 1 {
			t.Fatalf("start %d: %d critical readers, want 1: %v", i, critical, st.Readers)
		}
		s.Stop()
	}
}
