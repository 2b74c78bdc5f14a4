// Package persist stores shardtail's collections as durable shards.
//
// A shard is a durable collection of updates (row, t, diff): t is a uint64 of
// epoch milliseconds and diff an int64 multiplicity change. Two frontiers
// describe it: upper (every update at t < upper is known; later appends
// start at upper) and since (the contents are correct when read at any
// t >= since; compaction has merged the history before it). A read at as_of
// is valid when since <= as_of < upper.
//
// # Location
//
// All durable data lives in two stores, both interfaces defined here and
// implemented in their own packages with no policy of their own:
//
//   - Blob (persist/blob/{file,s3,mem}): immutable objects. Parts (encoded
//     runs of updates, see persist/codec) and state rollups. A Blob that
//     can lend a part's bytes without copying them (BlobLender: the file
//     blob maps its file) is read that way; the reader gives them back once
//     it decoded the part.
//   - Consensus (persist/consensus/{sqlite,postgres,mem}): a linearizable
//     compare-and-set log per key. A shard's key holds its state as a chain
//     of diffs, one per version.
//
// persisttest holds the acceptance suites every implementation passes.
//
// # State
//
// A shard's metadata is a State value: schema, since, upper, the list of
// batches (each a run of parts covering [lower, upper)), the registered
// readers with their holds, the writers with their idempotency records, and
// the rollups. Every change is a pure transition on State (state.go),
// committed by a compare-and-set of the next version at seqno+1. What is
// written is a diff (diff.go), so the bytes per CAS do not grow with the
// number of readers or batches; every RollupEvery versions the whole state
// is written to blob as a rollup, and every diff names the latest rollup, so
// a cold process loads a shard from the head diff, one rollup and the diffs
// after it (versions.go).
//
// One machine per shard per process (machine.go) caches the newest state and
// runs the CAS retry loop; every Reader and Writer of the shard in the
// process shares it, so a refresh from consensus is made once however many
// wait (a storm of subscribes costs one consensus read per shard).
// Listeners wake on an in-process change at once, on a doorbell from the
// consensus backend (PostgreSQL LISTEN/NOTIFY) when it has one, and
// otherwise at the poll interval.
//
// # Writing
//
// Writer.CompareAndAppend(updates, expectedUpper, newUpper) consolidates the
// updates, uploads them as parts, and commits a batch [expectedUpper,
// newUpper) iff the shard's upper is expectedUpper; a mismatch returns the
// current upper. A writer records an idempotency token in state, so an
// append retried after an indeterminate error is recognized, not doubled.
//
// # Reading
//
// A Reader registers (a CAS), holds since and a seqno, heartbeats its lease
// in the background, and is expired by Close or, after a crash, by the lease
// running out. Snapshot(as_of) is a consolidating cursor: a k-way merge over
// the batches' runs in row order that advances times to as_of, sums equal
// rows and drops zeros, fetches parts just in time, and yields chunks of
// bounded size in which every row is final. When the snapshot is a single
// run at one time (a compacted shard), there is nothing to merge:
// Cursor.NextChunk passes the parts' record batches through as columns
// (row.Columns), which the wire encoders read in place, without a datum
// per value; Next decodes them. The process keeps recently read parts
// decoded (partcache.go, Config.PartCacheBytes): such a cursor reads a
// cached part without fetching, decompressing or checking it again; of a
// part too large to keep whole, the first record batch is kept, and the
// cursor yields the part's first rows from there and opens the part only
// for its second batch, so a FETCH 10 or a COPY's first row on a new
// cursor does not wait for a part to be fetched, mapped and checked.
// Listen(as_of) yields the updates
// after as_of batch by batch, each with its progress frontier. io.EOF ends a
// cursor and nothing else: Cursor.Next, Cursor.NextChunk and Listen.Next
// never fail with an error that matches it, though the storage's may wrap it
// (an HTTP GET whose connection closed before the response), so a loop that
// stops at errors.Is(err, io.EOF) never takes an outage for the end of the
// data:
//
//	r, err := client.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "example"})
//	if err != nil {
//		return err
//	}
//	defer r.Close()
//	cur, err := r.Snapshot(ctx, asOf) // ErrSinceAdvanced if asOf < since
//	if err != nil {
//		return err
//	}
//	err = cur.Each(ctx, func(chunk []row.Update) error {
//		return emit(chunk) // every update at asOf; an error stops the read
//	})
//	if err != nil {
//		return err // storage, or the shard was dropped (ErrShardTombstoned)
//	}
//	l, err := r.Listen(ctx, asOf)
//	if err != nil {
//		return err
//	}
//	for {
//		updates, frontier, err := l.Next(ctx) // blocks for the next batch
//		if err != nil {
//			return err // ctx ended, the shard was dropped (ErrShardTombstoned), ...
//		}
//		emit(updates) // asOf < t < frontier
//		progress(frontier)
//	}
//
// # Tables: txn-wal
//
// Tables' shards are data shards of a txns shard (package persist/txnwal):
// their writes are recorded there first, in one compare-and-set per
// transaction, and applied to them afterwards (Writer.AppendWritten of a
// WrittenBatch uploaded beforehand). Their physical upper then lags their
// logical upper, the txns shard's progress. A Client with a TxnReads
// installed (SetTxnReads) hides that from every reader of such a shard:
// Snapshot and WaitForUpper first make the shard readable at their time,
// Listen reports the txns progress across the stretches where nothing was
// written, and ReadState gives the logical upper.
//
// # Maintenance
//
// Client.Maintain (run in the background after appends) expires stale
// leases, compacts (merges adjacent batches, advancing times to since and
// consolidating, in a size-tiered pattern so each update is rewritten
// O(log n) times), and garbage-collects: it deletes parts that only versions
// before the oldest reader hold reference, truncates consensus below the
// newest rollup at or before that hold, and deletes older rollups. Nothing a
// live reader may still fetch is ever deleted. Every Config.SweepInterval it
// also sweeps orphans (sweep.go): blobs under the shard that no state
// version in consensus references and that are older than
// Config.OrphanGrace, left by a process that died between uploading and
// committing. Uploads may commit only within half the grace, so the sweep
// never deletes what a write in flight could still commit.
package persist
