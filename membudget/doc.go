// Package membudget is the process's one memory budget (--memory-budget):
// every large holder of memory on both SUBSCRIBE paths charges its bytes to
// one Budget, which exports them as shardtail_memory_bytes{holder=...} and
// tells the holders' owners when the total is over the limit.
//
// A Budget does not allocate or refuse anything itself: enforcement is a
// policy that its holders' owners register and Enforce runs, after a holder
// grew, while the total is over the limit:
//
//  1. StageCache: persist's part cache (HolderPartCache) lets its least
//     recently used parts go, and keeps no new ones while the budget is
//     over. What it holds only saves later reads work.
//  2. StageShrink: what is retained for later (the fast path's windows,
//     its snapshot shares' pieces that every subscriber took, finished
//     shares kept for late joiners) is dropped. No client loses anything.
//  3. StageDetach: the largest fast-path queues are detached; their
//     subscribers resume from the shard, losing nothing but the catch-up.
//  4. Victims, largest first: dataflow-path subscribes, which cannot
//     resume by themselves, end with a *subscribe.MemoryBudgetError
//     (53200, naming the budget); the client resubscribes AS OF its last
//     progress.
//
// Each step runs only while the total is still over. A subscribe whose
// single timestamp is larger than the whole budget fails with 53200 on
// either path (formatter's result-size limit, set to the budget). The
// budget is accounted, not a hard cap: between a charge and the
// enforcement it triggers the total may pass the limit by what one step
// (a listen batch, a dataflow push) adds, and holders no stage can shrink
// (pgwire's buffers, pieces a slow subscriber of a share has yet to take)
// only make later steps free more. persist's writes and compactions in
// flight (HolderPersist) are a transient holder (TransientHolder): no
// stage sheds them (they take turns instead, bounded concurrency), what
// they hold makes the stages shrink and detach sooner, but no victim is
// ended for them.
//
// What no holder counts (parts decoded for a read, stacks, garbage not yet
// collected) is bounded by the Go runtime instead: the server applies
// ApplyRuntimeLimit, a soft memory limit of the budget + RuntimeHeadroom.
//
// Holders come in two kinds. Counters (Holder) are charged with Add by the
// code that allocates; sources (AddSource) are read when needed, for a
// package that already counts its own bytes (pgwire.Server.MemoryBytes)
// and exports its own gauge.
//
// The canonical use, from the server:
//
//	b := membudget.New(limit)
//	b.AddSource(membudget.HolderPGWire, pgwireServer.MemoryBytes)
//	if err := b.Register(registry); err != nil { ... }
//	window := b.Holder(membudget.HolderWindow)
//	window.Add(n)  // a batch entered the window
//	window.Add(-n) // and left it
//	b.Enforce()     // after the holder grew: runs the policy if over
//
// A nil *Budget is valid and unlimited: its holders count nothing, Over
// is always false and Enforce does nothing, so tests and tools need not
// make one.
package membudget
