package dataflow

import (
	"testing"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/subscribe"
)

// TestSubscribeChargesBudget: rows queued for the client are charged to
// the budget's dataflow holder while queued, and released as the client
// takes them and when the subscribe closes.
func TestSubscribeChargesBudget(t *testing.T) {
	ctx, p, shard, w := setup(t)
	budget := membudget.New(0)
	held := budget.Holder(membudget.HolderDataflow)
	if err := w.CompareAndAppend(ctx, ups(0, 1, 2, 3), 0, 1); err != nil {
		t.Fatal(err)
	}
	s := StartSubscribe(SubscribeConfig{Persist: p, Budget: budget, Request: subscribe.Request{Shard: shard, AsOf: 0, Snapshot: true,
		Output: &formatter.Options{Relation: schema}}})
	rows, err := s.Next(ctx, 1) // the snapshot is queued; one row taken
	if err != nil {
		t.Fatal(err)
	}
	if got, want := held.Bytes(), s.QueuedBytes(); got == 0 || got != want {
		t.Errorf("charged %d bytes with %d queued (took %d rows); want them equal and nonzero", got, want, len(rows))
	}
	s.Close()
	if got := held.Bytes(); got != 0 {
		t.Errorf("charged %d bytes after Close, want 0", got)
	}
}
