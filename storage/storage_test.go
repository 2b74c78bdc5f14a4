package storage_test

import (
	"context"
	"testing"

	"github.com/shardtail/shardtail/catalog"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/storage"
)

// TestAppendRetriesAboveAnotherWriter has two Storages (two role-`all`
// processes) own one shard and write it in turn: each write finds the
// upper moved by the other, retries above it, and every write is kept.
func TestAppendRetriesAboveAnotherWriter(t *testing.T) {
	ctx := context.Background()
	blob, cons := blobmem.New(), consmem.New()
	// A persist client per process: one client's writers see each other's
	// appends through its state cache, another's only by a mismatch.
	var clients [2]*persist.Client
	for i := range clients {
		pc, err := persist.NewClient(blob, cons, persist.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		clients[i] = pc
	}
	pc := clients[0]
	schema := row.Schema{Columns: []row.Column{{Name: "n", Type: row.TypeInt8}}}
	if _, err := pc.CreateShard(ctx, "s", schema); err != nil {
		t.Fatal(err)
	}
	oracle, err := catalog.OpenOracle(ctx, cons, nil)
	if err != nil {
		t.Fatal(err)
	}
	var writers [2]*storage.Storage
	for i := range writers {
		writers[i] = storage.New(clients[i], oracle, nil)
		defer writers[i].Close()
		if err := writers[i].Own(ctx, "s", 1000, false); err != nil {
			t.Fatal(err)
		}
	}
	const writes = 6
	var last uint64
	for i := range writes {
		w := writers[i%2]
		ts, err := w.Append(ctx, "s", []row.Update{{Row: row.Row{int64(i)}, Diff: 1}})
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if ts <= last {
			t.Errorf("write %d at %d, want above the previous write's %d", i, ts, last)
		}
		if got := w.LastWrite("s"); got != ts {
			t.Errorf("write %d: LastWrite = %d, want %d", i, got, ts)
		}
		last = ts
	}
	r, err := pc.OpenReader(ctx, "s", persist.ReaderOptions{Purpose: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := storage.ReadAll(ctx, r, last)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != writes {
		t.Fatalf("read %d rows back, want %d: %v", len(got), writes, got)
	}
}
