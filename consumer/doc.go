// Package consumer lands a shardtail change feed in a target, exactly once
// where the target can hold its own checkpoint. It is named for its role:
// the client end of SUBSCRIBE, the library every consumer would otherwise
// write by hand; sinks for particular targets live in subpackages
// (redissink) or commands (shardtail sink).
//
// # Design
//
// The package has two layers.
//
// Core is a pure state machine with no I/O and no clock: the caller pushes
// the rows of `SUBSCRIBE … WITH (PROGRESS)` (any envelope) and takes out
// closed Batches. A batch holds every update of one or more whole
// timestamps, [Lower, Upper), closed by a progress row; Upper is the
// Frontier to commit once the batch is written. Batches are cut on
// MaxBatchBytes and MaxBatchDelay and never split a timestamp, except one
// larger than MaxBatchBytes (a big snapshot), which comes as Partial chunks
// that may be written but not committed until the closing batch. The core
// builds its own statement (Source.Statement): a resume from frontier F is
// `AS OF F-1 WITH (SNAPSHOT = false, PROGRESS)`, and that `- 1` lives only
// there. It checks that the opening progress row is at that AS OF and drops
// any row below F.
//
// Run is the driver: it connects with pgx, declares a cursor for the
// statement, FETCHes with a timeout, feeds the core, and for each closed
// batch calls the Sink and then commits the batch's Upper through the
// Checkpoint. Commit is separate from the write: a Checkpoint is a
// compare-and-set (Commit(ctx, expected, next) fails with ErrFenced unless
// the stored position is expected), so a stale worker is fenced and the
// position never moves backwards.
//
// # Errors
//
// A failure of the subscribe is classified (Classify): transient errors
// (connection loss, 08xxx, 57P01, 58000) retry with exponential backoff and
// jitter, bounded by Config.Retry; falling behind (53200, DETAIL "fell
// behind: …") resumes at once; history loss (DETAIL "history lost: …", a
// checkpoint below the collection's since) follows Config.OnHistoryLost, by
// default a fresh snapshot in a new Generation; a dropped collection (42704)
// stops with ErrDropped; anything else stops with ErrStalled. Errors of the
// sink or the checkpoint end Run as they are. After any source error Run
// resumes from the last committed position, calling Abort first on sinks
// that hold uncommitted writes.
//
// # Object identity
//
// Before subscribing, Run looks each source's name up in
// mz_internal.mz_storage_shards and subscribes by id ([u12 AS name]), so a
// drop and recreate between lookup and subscribe cannot slip in; the ids
// are committed with the position. A resume that finds another id under a
// name (or a subscribe by id that reports its object dropped, when the
// name now has another id) follows Config.OnObjectReplaced: ErrObjectReplaced
// by default, or a new generation from a snapshot of the new object. A name
// with no object after its subscribe reported a drop is looked up again
// with the retry backoff (a migration may be recreating it) before Run
// returns ErrDropped.
//
// # Guarantees
//
// Each update below the committed frontier is in the target. A sink that
// writes the batch and the checkpoint in one transaction (the PostgreSQL
// sink) applies each update exactly once; a sink with a checkpoint elsewhere
// (FileCheckpoint, a table in shardtail) applies each at least once: a
// crash between the write and the commit replays the batch.
//
// # The canonical loop
//
// Run does this; a caller with its own transport can drive Core directly:
//
//	core := consumer.NewCore(cfg, pos.Frontier)
//	rows := query(core.Statement(src))
//	for rows.Next() {
//		if err := core.Push(row, time.Now()); err != nil {
//			return err // protocol violation: stop
//		}
//		for b, ok := core.Next(); ok; b, ok = core.Next() {
//			write(b)
//			if !b.Partial {
//				next := consumer.Position{Frontier: b.Upper, Generation: b.Generation}
//				if err := cp.Commit(ctx, pos, next); err != nil {
//					return err // fenced: another worker owns the target
//				}
//				pos = next
//			}
//		}
//	}
package consumer
