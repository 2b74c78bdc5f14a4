package persist_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// eofBlob is a blob whose Gets fail while down as an S3 GET does when its
// connection is closed before the response (a proxy or load balancer that
// accepts and hangs up): an error whose chain holds io.EOF,
// `Get "http://...": EOF`. It hides the inner blob's Lend, so that every
// part read is a Get.
type eofBlob struct {
	persist.Blob
	down atomic.Bool
	gets atomic.Int64 // Gets that failed
}

func (b *eofBlob) Get(ctx context.Context, key string) ([]byte, error) {
	if b.down.Load() {
		b.gets.Add(1)
		return nil, fmt.Errorf("s3 blob: get %s: %w", key, &url.Error{Op: "Get", URL: "http://127.0.0.1:9000/bucket/" + key, Err: io.EOF})
	}
	return b.Blob.Get(ctx, key)
}

// eofEnv is newEnv with its blob behind an eofBlob.
func eofEnv(t *testing.T) (*env, *eofBlob) {
	e := newEnv(t)
	b := &eofBlob{Blob: e.blob}
	e.blob = b
	return e, b
}

// TestBlobEOFIsNotTheEnd: a part read that fails with an error wrapping
// io.EOF is a failed read, not the end of the data: a listen returns the
// error and the same batch once the blob is back (not an empty batch with
// the frontier past it, the gap deploytest.TestProxyStorageOutage saw), a
// snapshot fails instead of ending early, and a compaction fails instead
// of replacing its inputs with what it read before the error.
func TestBlobEOFIsNotTheEnd(t *testing.T) {
	t.Run("Listen", func(t *testing.T) {
		e, blob := eofEnv(t)
		ctx := ctxT(t)
		c := e.client()
		shard := persist.NewShardID()
		must(c.CreateShard(ctx, shard, testSchema))(t)
		w := must(c.OpenWriter(ctx, shard))(t)
		r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "test"}))(t)
		defer r.Close()
		l := must(r.Listen(ctx, 0))(t)
		if err := w.CompareAndAppend(ctx, []row.Update{upd(1, "a", 1, 1)}, 0, 2); err != nil {
			t.Fatal(err)
		}
		blob.down.Store(true)
		ups, frontier, err := l.Next(ctx)
		if err == nil || errors.Is(err, io.EOF) {
			t.Fatalf("listen while the blob fails: updates %v, frontier %d, err %v; want an error that is not io.EOF", ups, frontier, err)
		}
		if l.Frontier() != 0 {
			t.Fatalf("the failed read moved the frontier to %d", l.Frontier())
		}
		blob.down.Store(false)
		ups, frontier, err = l.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := []row.Update{upd(1, "a", 1, 1)}; !reflect.DeepEqual(ups, want) || frontier != 2 {
			t.Fatalf("after the blob is back: %v up to %d, want %v up to 2", ups, frontier, want)
		}
	})
	t.Run("Snapshot", func(t *testing.T) {
		e, blob := eofEnv(t)
		ctx := ctxT(t)
		c := e.client()
		shard := persist.NewShardID()
		must(c.CreateShard(ctx, shard, testSchema))(t)
		w := must(c.OpenWriter(ctx, shard))(t)
		if err := w.CompareAndAppend(ctx, []row.Update{upd(1, "a", 1, 1), upd(2, "b", 1, 1)}, 0, 2); err != nil {
			t.Fatal(err)
		}
		r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "test"}))(t)
		defer r.Close()
		cur := must(r.Snapshot(ctx, 1))(t)
		defer cur.Close()
		blob.down.Store(true)
		chunk, err := cur.Next(ctx)
		if err == nil || errors.Is(err, io.EOF) {
			t.Fatalf("snapshot while the blob fails: %v, %v; want an error that is not io.EOF", chunk, err)
		}
	})
	t.Run("Compaction", func(t *testing.T) {
		e, blob := eofEnv(t) // no background compaction: Maintain merges every batch
		ctx := ctxT(t)
		c := e.client()
		shard := persist.NewShardID()
		must(c.CreateShard(ctx, shard, testSchema))(t)
		w := must(c.OpenWriter(ctx, shard))(t)
		var want []row.Update
		for i := range 4 {
			u := upd(int64(i), "v", uint64(i), 1)
			if err := w.CompareAndAppend(ctx, []row.Update{u}, uint64(i), uint64(i+1)); err != nil {
				t.Fatal(err)
			}
			want = append(want, upd(int64(i), "v", 3, 1))
		}
		blob.down.Store(true)
		rep, err := c.Maintain(ctx, shard)
		if blob.gets.Load() == 0 {
			t.Fatalf("maintenance read no part (%+v, %v): nothing was compacted", rep, err)
		}
		if err == nil || rep.Compactions > 0 {
			t.Errorf("maintenance while every part read failed: %+v, %v; want an error and no compaction", rep, err)
		}
		blob.down.Store(false)
		r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "test"}))(t)
		defer r.Close()
		if got := readSnapshot(t, ctx, r, 3); !reflect.DeepEqual(got, want) {
			t.Fatalf("after a compaction met a failing blob: %v, want %v", got, want)
		}
	})
}

// TestNotEOF: a failure whose chain holds io.EOF no longer matches io.EOF,
// and keeps its message and everything else it matches: a corrupt part is
// still permanent and still a *PartError.
func TestNotEOF(t *testing.T) {
	if persist.NotEOF(nil) != nil {
		t.Error("NotEOF(nil) is not nil")
	}
	plain := errors.New("consensus unreachable")
	if got := persist.NotEOF(plain); got != plain {
		t.Errorf("an error without io.EOF changed: %v", got)
	}
	get := fmt.Errorf("fetch part k: %w", &url.Error{Op: "Get", URL: "http://x/k", Err: io.EOF})
	got := persist.NotEOF(get)
	if errors.Is(got, io.EOF) || got.Error() != get.Error() {
		t.Errorf("NotEOF(%v) = %v, matches io.EOF: %v", get, got, errors.Is(got, io.EOF))
	}
	var ue *url.Error
	if !errors.As(got, &ue) {
		t.Error("the *url.Error is no longer found")
	}
	corrupt := &persist.PartError{Key: "k", Err: fmt.Errorf("decode part: batch 0: %w", io.EOF)}
	got = persist.NotEOF(corrupt)
	var pe *persist.PartError
	if errors.Is(got, io.EOF) || !persist.IsPermanent(got) || !errors.As(got, &pe) || pe.Key != "k" {
		t.Errorf("a corrupt part through NotEOF: %v (io.EOF %v, permanent %v)", got, errors.Is(got, io.EOF), persist.IsPermanent(got))
	}
	if got := persist.NotEOF(fmt.Errorf("%w: cas: %w", persist.ErrIndeterminate, io.EOF)); !persist.IsIndeterminate(got) || errors.Is(got, io.EOF) {
		t.Errorf("an indeterminate failure through NotEOF: %v", got)
	}
}
