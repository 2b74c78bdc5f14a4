package persist_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/shardtail/shardtail/persist"
)

// lendingBlob is a Blob that lends values (persist.BlobLender) and counts
// the loans not yet released. A released loan's bytes are overwritten, so
// that a read of them after release decodes garbage instead of passing.
type lendingBlob struct {
	persist.Blob
	mu    sync.Mutex
	out   int // loans not released
	lends int
}

func (b *lendingBlob) Lend(ctx context.Context, key string) ([]byte, func(), error) {
	v, err := b.Get(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	v = bytes.Clone(v)
	b.mu.Lock()
	b.out++
	b.lends++
	b.mu.Unlock()
	var once sync.Once
	return v, func() {
		once.Do(func() {
			clear(v)
			b.mu.Lock()
			b.out--
			b.mu.Unlock()
		})
	}, nil
}

func (b *lendingBlob) loans() (out, lends int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out, b.lends
}

// TestLentPartsReleased: parts read from a lending blob are read through
// Lend and each loan is released once its reader is done with it: after a
// drained snapshot, a snapshot closed after its first chunk, a listen
// batch and a compaction; the updates read are those of a copying blob.
func TestLentPartsReleased(t *testing.T) {
	e := newEnv(t) // no compaction in the background: its loans would be counted too
	lb := &lendingBlob{Blob: e.blob}
	e.blob = lb
	c, shard := loadRows(t, e, 400, 100)
	ctx := ctxT(t)
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer r.Close()
	check := func(what string) {
		t.Helper()
		if out, lends := lb.loans(); out != 0 || lends == 0 {
			t.Fatalf("%s: %d loans of %d not released, want 0 of some", what, out, lends)
		}
	}

	got := readSnapshot(t, ctx, r, 3)
	check("drained snapshot")
	copying := must(persist.NewClient(lb.Blob, e.consensus, e.cfg))(t)
	defer copying.Close()
	cr := must(copying.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer cr.Close()
	if want := readSnapshot(t, ctx, cr, 3); len(got) != 400 || !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot of %d rows differs from the copying blob's %d (want 400)", len(got), len(want))
	}

	cur := must(r.Snapshot(ctx, 3))(t)
	if _, err := cur.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if out, _ := lb.loans(); out == 0 {
		t.Fatal("no part on loan while a cursor reads it")
	}
	cur.Close()
	check("closed cursor")

	l := must(r.Listen(ctx, 0))(t)
	for range 2 { // the first batch is at AS OF: no data
		if _, _, err := l.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check("listen")

	e.cfg.CompactionMinInputs = 2
	compactor := e.client()
	if rep := must(compactor.Maintain(ctx, shard))(t); fmt.Sprint(rep) == fmt.Sprint(persist.MaintenanceReport{}) {
		t.Fatalf("maintenance did nothing: %+v", rep)
	}
	check("compaction")
}
