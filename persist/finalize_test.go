package persist_test

import (
	"errors"
	"testing"
	"time"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// shardBlobs lists the keys of shard's blobs.
func shardBlobs(t testing.TB, e *env, shard string) []string {
	t.Helper()
	var keys []string
	if err := e.blob.List(ctxT(t), shard+"/", func(b persist.BlobMeta) error {
		keys = append(keys, b.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestFinalizeShard drops a shard with data, readers and compaction
// history, and checks that finalization leaves one blob (the tombstone's
// rollup) and consensus truncated to it, that readers of every kind end with
// ErrShardTombstoned (also one whose parts vanish mid-snapshot), and that a
// second call changes nothing.
func TestFinalizeShard(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	for i := range uint64(40) {
		if err := w.CompareAndAppend(ctx, []row.Update{upd(int64(i), "some text to fill a part", i, 1)}, i, i+1); err != nil {
			t.Fatal(err)
		}
	}
	must(c.Maintain(ctx, shard))(t)
	policy := must(c.OpenReader(ctx, shard, persist.ReaderOptions{Critical: true, ID: "c-policy"}))(t)
	// A reader in another process, in the middle of a snapshot.
	other := e.client()
	r := must(other.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer r.Close()
	cur := must(r.Snapshot(ctx, 39))(t)
	defer cur.Close()
	if _, err := cur.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(shardBlobs(t, e, shard)); n < 10 {
		t.Fatalf("%d blobs before the drop: the test writes too little", n)
	}

	if err := c.DropShard(ctx, shard); err != nil {
		t.Fatal(err)
	}
	if err := c.FinalizeShard(ctx, shard); err != nil {
		t.Fatal(err)
	}
	keys := shardBlobs(t, e, shard)
	if len(keys) != 1 {
		t.Fatalf("blobs after finalization: %v, want one rollup", keys)
	}
	s := must(c.State(ctx, shard))(t)
	if !s.Finalized() || s.Since != s.Upper || len(s.Readers) != 0 {
		t.Fatalf("state after finalization: finalized %v since %d upper %d readers %d", s.Finalized(), s.Since, s.Upper, len(s.Readers))
	}
	if vs := must(e.consensus.Scan(ctx, shard, 0, 100))(t); len(vs) > 3 {
		// The finalized state, its rollup's record, the old rollups' removal.
		t.Errorf("%d consensus versions after finalization, want at most 3", len(vs))
	}

	// The reader mid-snapshot: its next parts are gone.
	var err error
	for err == nil {
		_, err = cur.Next(ctx)
	}
	if !errors.Is(err, persist.ErrShardTombstoned) {
		t.Errorf("snapshot continued after finalization: %v, want ErrShardTombstoned", err)
	}
	if _, err := r.Snapshot(ctx, 39); !errors.Is(err, persist.ErrShardTombstoned) {
		t.Errorf("new snapshot after finalization: %v, want ErrShardTombstoned", err)
	}
	l := must(r.Listen(ctx, 10))(t)
	if _, _, err := l.Next(ctx); !errors.Is(err, persist.ErrShardTombstoned) {
		t.Errorf("listen after finalization: %v, want ErrShardTombstoned", err)
	}
	// A process that comes later loads the tombstone.
	if _, err := e.client().OpenReader(ctx, shard, persist.ReaderOptions{}); !errors.Is(err, persist.ErrShardTombstoned) {
		t.Errorf("open reader in a new process: %v, want ErrShardTombstoned", err)
	}
	if err := policy.Close(); err != nil {
		t.Errorf("close of the critical reader of a finalized shard: %v", err)
	}

	seq := s.SeqNo
	if err := e.client().FinalizeShard(ctx, shard); err != nil {
		t.Fatal(err)
	}
	if s := must(c.State(ctx, shard))(t); s.SeqNo != seq {
		t.Errorf("second finalization moved seqno %s to %s", seq, s.SeqNo)
	}
	if got := shardBlobs(t, e, shard); len(got) != 1 || got[0] != keys[0] {
		t.Errorf("blobs after second finalization: %v, want %v", got, keys)
	}
}

// TestFinalizeDeliversBeforeDrop checks that a tombstoned shard that is not
// yet finalized still serves what was written before the drop: a listener
// behind the upper reads the last batch, then ends with ErrShardTombstoned.
func TestFinalizeDeliversBeforeDrop(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	r := must(e.client().OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer r.Close()
	l := must(r.Listen(ctx, 0))(t)
	if err := w.CompareAndAppend(ctx, []row.Update{upd(1, "a", 1, 1)}, 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.DropShard(ctx, shard); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	if s := must(c.State(ctx, shard))(t); s.LiveLeasedReaders(now) != 1 {
		t.Fatalf("live leased readers %d, want the listener", s.LiveLeasedReaders(now))
	}
	got, frontier, err := l.Next(ctx)
	if err != nil || len(got) != 1 || frontier != 2 {
		t.Fatalf("listen after drop: %v %d %v, want the row written before it", got, frontier, err)
	}
	if _, _, err := l.Next(ctx); !errors.Is(err, persist.ErrShardTombstoned) {
		t.Fatalf("listen past the drop: %v, want ErrShardTombstoned", err)
	}
}

// TestStableCriticalReader checks that a critical reader opened with a
// fixed ID is one registration across reopens and processes, keeps its
// since over Close, and goes with ExpireReader.
func TestStableCriticalReader(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	if err := w.CompareAndAppend(ctx, nil, 0, 100); err != nil {
		t.Fatal(err)
	}
	const id persist.ReaderID = "c-test"
	for i := range 5 { // five "restarts", each from a new process
		p := must(e.client().OpenReader(ctx, shard, persist.ReaderOptions{Critical: true, ID: id}))(t)
		if i > 0 && p.Since() != 50 {
			t.Fatalf("reopen %d: since %d, want the 50 held before", i, p.Since())
		}
		if err := p.Downgrade(ctx, 50); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s := must(c.State(ctx, shard))(t)
	if len(s.Readers) != 1 || s.Readers[id].Since != 50 || s.Since != 50 {
		t.Fatalf("readers %v since %d, want one reader %s at 50", s.Readers, s.Since, id)
	}
	if err := c.ExpireReader(ctx, shard, id); err != nil {
		t.Fatal(err)
	}
	if s := must(c.State(ctx, shard))(t); len(s.Readers) != 0 {
		t.Fatalf("readers after ExpireReader: %v", s.Readers)
	}
}
