// Package postgres is the distributed persist.Consensus: a table in
// PostgreSQL (or CockroachDB) shared by every process of a deployment,
// reached through a pgxpool.Pool. It follows Materialize's persist
// (src/persist/src/postgres.rs):
//
//	CREATE TABLE IF NOT EXISTS consensus (
//	    shard text NOT NULL,
//	    sequence_number bigint NOT NULL,
//	    data bytea NOT NULL,
//	    PRIMARY KEY (shard, sequence_number))
//
// one row per version, so a key's head is its row with the largest
// sequence_number. Open creates the table; processes opening at once may
// race on CREATE TABLE IF NOT EXISTS, and the loser's unique violation
// (23505 on the catalog) or duplicate_table (42P07) is retried, which
// works on CockroachDB too, unlike pg_advisory_xact_lock.
//
// # Statements
//
// Every operation is one statement in its own implicit transaction, and
// every session runs at SERIALIZABLE (default_transaction_isolation, sent
// at connect). CompareAndSet is Materialize's CockroachDB-compatible
// statement:
//
//	INSERT INTO consensus (shard, sequence_number, data)
//	SELECT $1, $2, $3
//	WHERE (SELECT sequence_number FROM consensus
//	       WHERE shard = $1 ORDER BY sequence_number DESC LIMIT 1) = $4
//
// and, for the first version, WHERE NOT EXISTS (SELECT * FROM consensus
// WHERE shard = $1). One row inserted means committed; none, or a
// unique_violation (23505: a racing CAS inserted the same SeqNo first),
// means mismatch. SERIALIZABLE matters when SeqNos skip (the contract
// allows new.SeqNo > head + 1): two racing CASes from one head could then
// insert different rows and both commit under READ COMMITTED; serializable
// aborts one with 40001, and a retry reports the mismatch. Truncate reads
// the head and deletes below seqno in one statement (two CTEs), so no CAS
// slips between its check and its delete.
//
// # Errors
//
// Determinate (the operation certainly did not happen): a context already
// done, failing to get a connection, an error pgconn marks SafeToRetry
// (nothing was sent), and any server error of severity ERROR, which in an
// implicit transaction means the statement was rolled back (PostgreSQL
// escalates a failure after the commit record to PANIC, never ERROR).
// Indeterminate (persist.ErrIndeterminate): everything after the statement
// was sent and before its result arrived, that is a lost connection, a
// timeout or cancellation (pgx aborts the connection on a done context),
// a FATAL error (the backend may die after committing, e.g. terminated by
// an administrator), and CockroachDB's 40003 statement_completion_unknown.
// Reads have no effect, so their errors are always determinate.
//
// Serialization failures (40001), deadlocks (40P01) and SafeToRetry errors
// are retried a few times with jittered backoff before they are returned,
// so racing writers see a mismatch rather than an error.
//
// # Watch
//
// Watch (the persist.Watcher shape) is a doorbell across processes. On
// PostgreSQL the CAS statement is wrapped so that it also notifies:
//
//	WITH ins AS (INSERT ... RETURNING shard)
//	SELECT pg_notify('shardtail_consensus', shard) FROM ins
//
// In the statement rather than after it: NOTIFY is transactional, so the
// notification is sent if and only if the insert commits, costs no extra
// round trip, and cannot be lost to a crash between commit and a separate
// NOTIFY. The price is PostgreSQL's global notify-queue lock taken at
// commit, which serializes committing CASes across the database; at
// persist's CAS rates that is noise. CockroachDB has no LISTEN/NOTIFY, so
// there the plain statement runs and Watch rings only for this process's
// CASes.
//
// The first Watch starts one listener goroutine with a connection of its
// own (outside the pool) that LISTENs and rings the in-process doorbell for
// each notification; it reconnects with backoff when the connection drops,
// and notifications sent meanwhile are lost. This Consensus rings its own
// commits directly, without the round trip, so the listener skips
// notifications sent by the pool's own backends (their PIDs are tracked as
// connections come and go). Everything here is a hint: watchers must poll
// as well.
//
//	c, err := postgres.Open(ctx, "postgres://shardtail@db:5432/shardtail")
//	ch, err := c.Watch(ctx)
//	for key := range ch {
//		// re-read key's head
//	}
package postgres
