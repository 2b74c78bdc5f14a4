// Package txnwal makes writes to many shards atomic, the way Materialize's
// txn-wal does for tables: one txns shard coordinates the writes to any
// number of data shards (tables).
//
// It lives under persist because it is storage machinery with no SQL in it:
// storage commits tables' writes through it, and persist's readers, in
// every process (tail processes too), read data shards through it via the
// persist.TxnReads hook, so that neither SUBSCRIBE path nor SELECT needs to
// know about it.
//
// # The txns shard
//
// The txns shard is one consensus key (DefaultKey) holding a small State:
// the progress (the logical upper of every registered data shard), the
// registered data shards with the time of their latest write, and the
// commits not yet tidied, each a list of pointers to batches written to
// blob beforehand (persist.WrittenBatch). Every change is a pure transition
// (state.go) committed by compare-and-set of the next version, as persist
// does for a shard's state. Unlike a persist shard it needs no rows: what
// readers need from it fits in the state, and one write per commit or tick
// is all it costs.
//
// # Phases
//
//   - register: a table's shard is registered at CREATE (and, for tables
//     made before txn-wal, when its owner starts). Its writes go only
//     through Commit from then on.
//   - commit: the batches are uploaded to the data shards' blob space, then
//     one compare-and-set records them all at one timestamp >= progress and
//     moves progress past it. From here the transaction is durable and
//     atomic: it is applied in full or, if its writer dies, completed by
//     whoever reads one of its shards next or by the owner's restart
//     (Recover) or tick.
//   - apply: each data shard gets its batch by compare_and_append at the
//     commit's time, in time order per shard. It is idempotent: a data
//     shard's physical upper above the commit's time means it is applied,
//     because nothing advances a data shard past a commit it lacks.
//   - tidy: commits applied to every shard are removed from the state by
//     the next compare-and-set (a commit or tick), not by one of their own.
//   - tick: Advance moves progress, so every idle table's logical upper,
//     with one write, however many tables there are.
//   - forget: a dropped table's shard is removed.
//
// # Reading a data shard
//
// Its physical upper is that of its last applied write (or of the last
// reader that advanced it); its logical upper is progress. A snapshot at T
// (ReadyAt) waits for progress > T, applies the shard's commits, and
// advances its physical upper past T with an empty append. A listen
// (Progress) passes the shard's own batches through and, past its
// physical upper, reports the txns progress as its frontier once the
// shard's commits below it are applied: an idle table shows progress every
// tick without anyone writing it.
//
//	txns, err := txnwal.Open(ctx, persistClient, txnwal.Config{})
//	persistClient.SetTxnReads(txns) // readers of registered shards use it
//	err = txns.Register(ctx, shard) // at CREATE TABLE
//	b, err := txns.WriteBatch(ctx, shard, updates)
//	ts, err := txns.Commit(ctx, []txnwal.Write{{Shard: shard, Batch: b}}, nil, oracle.WriteTS)
//	_, err = txns.Advance(ctx, oracle.WriteTS) // every tick
package txnwal
