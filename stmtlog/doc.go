// Package stmtlog is the statement log: one record per executed statement
// (sampled), kept durably in a persist shard of its own and shown in SQL as
// mz_internal.mz_statement_execution_history and
// mz_internal.mz_recent_activity_log. It answers an operator's "which
// subscribes ran, on which path, for how long, and how did they end".
//
// # Off the statement path
//
// A statement never waits for the log. The adapter opens an Execution when
// a statement begins (Log.Begin, which also samples: a statement not
// sampled gets a nil *Execution, whose methods do nothing) and releases it
// when the statement ends; the finished Record goes into an in-memory
// buffer. A background loop appends the buffer to the shard once per
// FlushInterval (one CompareAndAppend, so one consensus write per second at
// most per process, however many statements ran). A storm of thousands of
// subscribes therefore costs a few consensus writes. The buffer is bounded
// (MaxBuffered): past it records are dropped and counted, never blocking.
//
// # One shard for every process
//
// The shard's id is fixed (ShardID), so every process on the same storage
// — role `all` and tail processes — appends to and reads the same log:
// each process's statements are visible from any process once flushed, and
// a process's own unflushed records are merged into its reads. Appends of
// several processes race on the upper; the loser retries at the new upper.
//
// # Retention
//
// A process with Config.Sweep (role `all`) retracts, in the same append as
// its next batch, the records that began more than Retention ago, and moves
// the shard's since (a critical reader of its own) up so that compaction
// folds the retractions away. The log is thus bounded by time, not by the
// number of statements.
//
// # An execution's life
//
//	e := log.Begin(rate, stmtlog.Record{SessionID: ..., SQL: text, ...})
//	defer e.Release()            // the statement's own reference
//	res, err := run()
//	e.Finish(stmtlog.Outcome(err)) // the first outcome wins
//
// An execution that outlives its statement (a SUBSCRIBE's record stays open
// until the subscription ends, a cursor's until its subscription closes)
// takes another reference with Hold and releases it at that end; the
// record is written when the last reference is released.
package stmtlog
