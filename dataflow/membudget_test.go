package dataflow

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestBudgetEndsLargestSubscribe: over the process's budget, once the
// earlier stages (here a stand-in for the fast path's) have run, the
// largest dataflow subscribe ends with 53200 naming the budget and its
// bytes are released; a smaller one goes on.
func TestBudgetEndsLargestSubscribe(t *testing.T) {
	ctx, p, shard, w := setup(t)
	budget := membudget.New(0)
	keys := make([]int64, 2000)
	for i := range keys {
		keys[i] = int64(i)
	}
	if err := w.CompareAndAppend(ctx, ups(0, keys...), 0, 1); err != nil {
		t.Fatal(err)
	}
	start := func(snapshot bool) *Subscribe {
		s := StartSubscribe(SubscribeConfig{Persist: p, Budget: budget, Request: subscribe.Request{Shard: shard, AsOf: 0, Snapshot: snapshot,
			Output: &formatter.Options{Relation: schema, Progress: true}}})
		t.Cleanup(s.Close)
		for s.Frontier() < 1 { // the snapshot is queued
			time.Sleep(time.Millisecond)
		}
		return s
	}
	big, small := start(true), start(false)
	fast := budget.Holder("fast")
	fast.Add(1000)
	var stages []string
	budget.AddStage(membudget.StageDetach, func() { stages = append(stages, "fast"); fast.Add(-fast.Bytes()) })

	// Over by 1 byte more than the stage frees: one victim is enough.
	limit := budget.Total() - 1001
	budget.SetLimit(limit)
	if err := w.CompareAndAppend(ctx, ups(1, 5000), 1, 2); err != nil { // a push enforces
		t.Fatal(err)
	}
	// The push that enforces follows the write: wait for it without
	// reading (reading big would bring the total under the budget).
	for budget.Ended() == 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	_, err := big.Next(ctx, 0)
	var me *subscribe.MemoryBudgetError
	if !errors.As(err, &me) {
		t.Fatalf("largest subscribe: Next = %v, want a *subscribe.MemoryBudgetError", err)
	}
	if msg := me.Error(); me.SQLState() != "53200" || !strings.Contains(msg, membudget.FormatSize(limit)) || !strings.Contains(msg, "--memory-budget") {
		t.Errorf("error %s %q; want 53200 naming the budget of %s", me.SQLState(), msg, membudget.FormatSize(limit))
	}
	if got, want := stages, []string{"fast"}; !slices.Equal(got, want) || budget.Ended() != 1 {
		t.Errorf("stages %v, ended %d; want %v before one victim", got, budget.Ended(), want)
	}
	rows, err := small.Next(ctx, 0)
	for err == nil && !slices.ContainsFunc(rows, func(r formatter.Row) bool { return r.Progressed && r.Time >= 2 }) {
		rows, err = small.Next(ctx, 0)
	}
	if err != nil {
		t.Fatalf("the smaller subscribe failed: %v", err)
	}
	if got, want := budget.Holder(membudget.HolderDataflow).Bytes(), small.MemoryBytes(); got != want {
		t.Errorf("dataflow holder %d bytes, want the smaller subscribe's %d (the ended one's released)", got, want)
	}
}
