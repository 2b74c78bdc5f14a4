// Package sqlite is the embedded default persist.Consensus: one SQLite file
// (modernc.org/sqlite, pure Go) that several processes on one host can
// share. It keeps the same table as the Postgres backend,
//
//	consensus(shard text, sequence_number integer, data blob,
//	          primary key (shard, sequence_number))
//
// one row per version, so a key's head is its row with the largest
// sequence_number.
//
// # Concurrency
//
// The file is in WAL mode: readers never block the writer or each other, and
// SQLite lets one writer at a time hold the write lock across all processes.
// Each Consensus has two connection pools:
//
//   - a writer pool of exactly one connection, for CompareAndSet and
//     Truncate. SQLite would serialize the writes anyway; doing it in Go
//     makes in-process writers queue in order and honour their context,
//     instead of polling the lock in SQLite's busy handler (which sleeps in
//     growing steps). The busy handler (BusyTimeout) only arbitrates between
//     processes.
//   - a reader pool (MaxReaders connections, query_only) for Head, Scan and
//     ListKeys, so reads proceed while a write waits for its fsync.
//
// CompareAndSet is one statement, so its check and its insert are atomic
// under the write lock:
//
//	INSERT INTO consensus (shard, sequence_number, data)
//	SELECT ?1, ?2, ?3
//	WHERE (SELECT sequence_number FROM consensus WHERE shard = ?1
//	       ORDER BY sequence_number DESC LIMIT 1) = ?4
//
// (for the first version, WHERE NOT EXISTS (SELECT 1 FROM consensus WHERE
// shard = ?1)); one row inserted means committed, none means mismatch.
// Truncate reads the head and deletes below seqno in one BEGIN IMMEDIATE
// transaction. A read that starts after a write returned sees it (a WAL
// read snapshot includes every commit before it), so every operation is
// linearizable, across processes too.
//
// # Durability
//
// synchronous=FULL: every commit fsyncs the WAL before CompareAndSet
// returns. With NORMAL, WAL commits are synced only at checkpoints, so a
// power loss can roll back CASes that were already acknowledged, and
// persist builds on them (blobs referenced, writes acknowledged to
// clients, readers registered). One fsync per state change is the price.
//
// # Errors
//
// The context bounds the wait for the writer connection; once a write
// statement has started it runs to completion (at most BusyTimeout waiting
// for another process's lock, then its own fsync) with the context's
// cancellation detached. That keeps outcomes knowable: a cancellation
// mid-statement would make the driver report ctx.Err() whether or not the
// commit happened. So a write error is determinate (the statement
// certainly did not commit) when it is SQLITE_BUSY or SQLITE_LOCKED (in WAL
// mode the write lock is taken before anything is written, and a commit
// needs no further lock, so "database is locked" after the busy timeout
// means nothing was written), or another code raised before commit
// (constraint, SQL error, read-only, cannot open). Any other failure, an
// I/O error above all (the commit frame may have reached the WAL before
// fsync failed), wraps persist.ErrIndeterminate. Reads have no effect, so
// their errors are always determinate.
//
// # Watch
//
// Watch (the persist.Watcher shape) rings for every CompareAndSet this
// Consensus commits. Other processes' commits ring nothing here: SQLite
// has no cross-process notification, so watchers poll for those.
//
//	c, err := sqlite.Open(ctx, sqlite.Config{Path: "/var/lib/shardtail/consensus.db"})
//	ch, err := c.Watch(ctx)
//	for key := range ch {
//		// re-read key's head
//	}
package sqlite
