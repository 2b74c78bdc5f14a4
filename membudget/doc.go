// Package membudget is the process's one memory budget (--memory-budget):
// every large holder of memory on both SUBSCRIBE paths charges its bytes to
// one Budget, which exports them as shardtail_memory_bytes{holder=...} and
// tells the holders' owners when the total is over the limit.
//
// A Budget does not allocate or refuse anything itself: enforcement is a
// policy of the holders' owners, run when Over reports true. The fast path
// (package tail) shrinks its retained windows and snapshot shares first and
// then detaches the largest subscriber queues (they resume from the shard);
// a subscribe whose single timestamp is larger than the whole budget fails
// with a *subscribe.MemoryBudgetError (53200). The budget is accounted, not
// a hard cap: between a charge and the enforcement it triggers the total
// may pass the limit by what one step (a listen batch) adds.
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
//	if b.Over() { enforce() }
//
// A nil *Budget is valid and unlimited: its holders count nothing and Over
// is always false, so tests and tools need not make one.
package membudget
