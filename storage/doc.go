// Package storage is the owned (writable) side of collections, in the
// processes of role `all`: the writers of table, source and
// materialized-view shards, the tick that advances their uppers, the
// retention policy that moves their since, and the finalization of the
// shards of dropped collections. Readers of collections (both SUBSCRIBE
// paths, SELECT) use persist directly; tail processes own nothing.
//
// # Owned shards
//
// Storage holds one ownedShard per shard this process writes, from Own (at
// CREATE, and for every collection at start) to Release (at DROP). Each has
//
//   - a persist.Writer, and a mutex that serializes this process's appends
//     to the shard, so a read-modify-write (UPDATE, DELETE) sees no write of
//     its own process interleave;
//   - a critical reader with the fixed id retentionReaderID whose since the
//     tick moves to upper-1-RETAIN HISTORY: the retention policy. Reopening
//     it by id at every start, instead of registering a new one, means no
//     forgotten hold ever pins compaction;
//   - whether the tick advances it: tables and sources advance with the
//     clock, materialized views with their input (AppendAt).
//
// Tables (OwnTable) are data shards of the txns shard (package
// persist/txnwal): Append, AppendMulti, AppendBatch and ReadModifyWrite
// upload their batches and commit them in one compare-and-set of the txns
// shard, so a transaction over any number of tables is atomic whatever
// crashes after; the commit is applied to each table afterwards (by the
// writer, the next reader, the tick or a restart). The tick advances every
// table at once with one write to the txns shard, and a table's retention
// since follows that logical upper without a write per table.
//
// Other shards' writes timed by the oracle share one loop, retryAppend:
// take a timestamp at or above the shard's upper, compare-and-append at
// it, and on persist's UpperMismatchError (another role-`all` process
// wrote first) try again above the new upper. Several processes may
// therefore own the same shard safely; for tables the txns shard's
// compare-and-set serializes them, and a read-modify-write whose table
// another commit wrote since its read reads again (txnwal.ErrConflict).
// A transaction's UPDATEs and DELETEs cannot read again: they read at a
// TxnReadTS (ReadTableAt), and CommitTxn fails with txnwal.ErrConflict,
// writing nothing, if another commit wrote a table they read since.
//
// The caller's duties:
//
//  1. Own a shard before writing it; Release it when its collection is
//     dropped, and Close the Storage when the process stops.
//  2. Run the tick (Run, or Tick from tests) so that idle collections still
//     show progress and their since follows RETAIN HISTORY.
//  3. Pass a strictly increasing Oracle (catalog.Oracle) shared with every
//     other writer of the process.
//
// # Finalizing dropped shards
//
// A DROP only tombstones a shard; its blobs stay referenced by its state.
// Finalizer keeps a durable list of dropped shards in consensus (under its
// own key) and finalizes each once no leased reader is left on it, or at the
// latest DefaultFinalizeGrace after the drop. The list is written before
// the catalog commit of the DROP, so that a crash anywhere only delays the
// finalization; finalize.go numbers the steps.
//
//	f := storage.NewFinalizer(persistClient, grace)
//	// DROP: f.Add(ctx, shards) before committing the catalog change.
//	go f.Run(ctx, liveShards, log) // liveShards: the shards the catalog names
package storage
