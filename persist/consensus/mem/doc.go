// Package mem is an in-memory persist.Consensus for unit tests: a map from
// key to a slice of versions, behind one mutex. It forgets everything on
// Close, shares nothing between instances, and is linearizable because
// every operation runs entirely under the mutex.
//
// It makes the same argument checks as the SQL backends (package
// internal/validate), copies data in and out so that callers and the log
// never share a byte slice, and honours the context only on entry: an
// operation that starts always completes, so its only errors are
// determinate ones (a done context, a closed Consensus, a bad argument).
//
// Watch (the persist.Watcher shape) rings on every committed CompareAndSet
// of this instance:
//
//	c := mem.New()
//	ch, _ := c.Watch(ctx)
//	c.CompareAndSet(ctx, "shard", nil, persist.VersionedData{SeqNo: 1, Data: b})
//	key := <-ch // "shard"
package mem
