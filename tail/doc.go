// Package tail is SUBSCRIBE's fast path: one SharedTail per collection in
// use reads the collection's shard once and fans decoded, already formatted
// batches out to every subscriber, so that a storm of clients costs about
// one read of the shard plus the bytes each client receives, instead of a
// private reader and pipeline each (package dataflow, the other path).
//
// # Types
//
// A Manager owns the SharedTails of one process, at most one per
// collection. It creates a tail at the collection's first subscribe and
// retires it RetireAfter after its last subscriber left (releasing its
// reader leases); Close retires the rest.
//
// A SharedTail holds two persist readers of its shard:
//
//   - the listen reader follows the shard. Its one goroutine (run) decodes
//     each listen batch once, appends it to the retained window (the newest
//     batches, bounded by Config.WindowBytes and Config.WindowAge) and pushes
//     a reference to it into every attached subscriber's queue. It never
//     waits for a subscriber; it downgrades its reader's since as it goes,
//     so the shard can compact what every subscriber has passed.
//   - the snapshot reader serves snapshots. Subscribers that want the
//     snapshot at the same AS OF join one share: one consolidating cursor
//     whose pieces are read as the fastest of them asks (and, from the
//     second piece on, one piece ahead of it, in the background, so that
//     reading the next piece overlaps the session's encoding and writing
//     of this one), kept until the slowest took them, and formatted once
//     per output shape. A subscriber that needs the piece being read ahead
//     waits for it as for a read of its own, whatever its context: a
//     session's poll for the rows that are ready (after a FETCH's rows)
//     gets it. A snapshot piece's rows refer to its updates rather than
//     copy them (formatter.Options.SnapshotRows), or, for a piece the
//     cursor passed through as columns (persist.Cursor.NextChunk), to its
//     rows of the part's columns (formatter.Options.SnapshotColumns): its
//     updates are decoded only for what needs datums (a shape's MFP, an
//     output that waits for the whole snapshot). Once a share can no
//     longer be joined (it dropped its first piece) and has one
//     subscriber, that subscriber encodes its pieces itself, into a
//     buffer pooled between sessions (formatter.WithSolo, StreamRuns),
//     instead of into new memory kept with each piece for nobody else:
//     one client's COPY of a large snapshot reuses its memory from piece
//     to piece. A FETCH 10 on a new
//     cursor returns after the first piece, reading nothing more, and a
//     large snapshot is never held whole. The snapshot reader's since stays at or below
//     the AS OF of every subscriber that still needs its snapshot (until its
//     cursor is open and it joined the live stream), so a storm whose
//     snapshots start late does not find its AS OF compacted away.
//
// Batches and snapshot pieces are formatted once per output shape
// (formatter.Options.ShapeKey) and the rows shared, never modified, by every
// subscriber of that shape, whatever its AS OF.
//
// # Shapes
//
// A subscribe to a query or view over the collection carries a
// subscribe.Shape: its map/filter/project and a canonical key. Each
// listen batch and snapshot piece (a decoded) is mapped through each
// distinct shape once, on first use, and then formatted once per shape and
// output shape; every subscriber of the shape shares both. A shape's
// snapshot is consolidated whole at the end of its share's cursor (rows of
// two pieces may map to one row, as on the dataflow path), once per shape
// and AS OF. An MFP error ends the subscriber's stream after the rows of
// the batches before it (Subscriber.fatal), where the dataflow path fails.
//
// A shape with an Index (an equality its filter starts with) is evaluated
// only on the rows a per-column table of the batch, value -> positions,
// routes to it. At publish the tail looks each distinct value of the
// batch's indexed columns up in indexed (value -> shapes), and queues the
// batch only for the subscribers of the shapes it matches, plus those
// that need every batch (every: bare, unindexed, UP TO): a write costs its
// rows plus the shapes it matches, not one step per subscriber. A routed
// subscriber with PROGRESS needs the frontier of the batches it skips
// too, but not at once: a sweep hands each of them, in turn, a batch
// being published once per Config.ProgressInterval (1 s), one progress row
// that covers the batches it skipped (their progress rows coalesced, as a
// listen coalesces batches it is late for). That row is the batch's, one
// for every subscriber with as many output columns (batch.progressRow),
// so its encoding is shared like the batch's rows.
// A routed subscriber that skipped batches and is then detached resumes
// after them (Subscriber.next), not at its batcher's older frontier.
//
// A Subscriber is one subscribe. It implements subscribe.Subscription: the
// session pulls its rows with Next; the shared listen pushes into its queue.
//
// # Subscriber phases
//
// Next drives a small state machine on the session's goroutine:
//
//  1. start: the progress row at AS OF (with PROGRESS).
//  2. snapshot (WITH SNAPSHOT): the pieces of the share at AS OF.
//  3. join: attach to the live stream at the subscriber's position, taking
//     the window's batches from there at once. If the window no longer
//     reaches back that far, go to 4.
//  4. catch-up: catch up from the shard in a catch-up shared with the
//     tail's other subscribers behind the window (see below), until the
//     window covers the position again; then back to 3.
//  5. live: take batches from the queue, blocking until one arrives; a
//     subscriber behind by several takes them at once (up to 64 KiB), so
//     that its session catches up with one write, and a batch with no
//     rows for it before the last adds no progress row (the next one's
//     supersedes it, as if storage had merged the batches).
//
// Instead of blocking in Next, a session may ask Ready(wake) whether Next
// has rows; when it has not, the next push, detach or failure calls wake,
// or, in the catch-up phase, the catch-up's next chunk (or its end), and
// no goroutine waits meanwhile (pgwire parks the connection of an idle
// subscriber: see pgwire.ReadyResult). Ready joins a catch-up and takes
// its chunks itself: a parked session is resumed only when rows are
// ready, never to wait in Next for a chunk that a catch-up slot may hold
// up (a resumer goroutine that waits holds up the connections behind
// it). An idle tick — a batch with no updates, pushed, its progress row
// taken and Ready asked again — allocates nothing per subscriber.
//
// # Detach and resume
//
// A subscriber's queue is charged with the bytes of the batches it
// references (subscribe.Request.MaxBufferedBytes). A push over budget drops
// the queue, not the client: the subscriber is detached at the frontier it
// had delivered. Its next Next resumes it at phase 3, from the window or
// from the shard, with no snapshot, no gap and no duplicate. The
// invariant that makes this exact: every update below the subscriber's
// delivered frontier was handed to Next's caller, and none at or above it,
// so any source that yields the shard's updates from that frontier (window,
// catch-up; the batcher drops what a source repeats below it) continues
// the stream. Only when the shard has compacted
// past that frontier does Next fail, with *subscribe.BufferError (53200);
// RETAIN HISTORY, not the tail, bounds how far behind a client may fall.
//
// A subscriber that takes nothing from its queue for
// Config.DetachStalledAfter while more than stallFloor (1 MiB) waits in it
// (its client stopped reading: the session is blocked writing to it) is
// detached the same way at the next push (Subscriber.stalled): left
// attached, its queue would pin every batch since it stalled until the
// budget detached it, with the heap near its limit and the readers paying
// for the collector meanwhile. Detached, it pins nothing and each publish
// costs it one look under its lock. One that reads slowly takes something
// at each write its client accepts, and stays attached.
//
// # Catch-ups from the shard
//
// Subscribers behind the window catch up in a catchUp: one reader and
// listen of the shard, started at the lowest position of the subscribers
// that join it before it opens, and joined later by any whose position
// its current chunk reaches back to. It reads one chunk at a time (the
// persist listen's, ListenChunkBytes, which reads a merged batch in
// passes rather than whole), split into batches of about catchUpBytes
// that its members take a step at a time, as from a queue. A chunk is
// read only with one of the manager's catch-up slots (Config.MaxCatchUps,
// served in order), held until every member took the chunk; a member that
// takes nothing of it for Config.CatchUpGrace is evicted and catches up
// later on its own, if the shard still retains its position: the
// catch-up's reader holds only what its members have not passed, so an
// evicted member behind RETAIN HISTORY gets the history-loss error
// (53200), as any client that fell that far behind. So hundreds of detached subscribers resuming at once
// cost at most MaxCatchUps chunks (charged to the budget's tail_catchup),
// and one that stops reading again costs the others a grace, and nothing
// more than the rows it was handed.
//
// # The process's memory budget
//
// With Config.Budget (--memory-budget, package membudget) the manager
// charges the budget with each listen batch once, however many hold it:
// under tail_window while the window holds it, under tail_queues once
// only subscriber queues do; with the snapshot shares' retained pieces
// (tail_snapshot) and with the timestamps subscribers hold back to order
// (ordered). It registers two stages of the budget's policy, which
// Budget.Enforce runs after each publish if the process is over budget:
// shrink (every window to its newest batch; every share to the pieces a
// subscriber of it has yet to take; finished shares kept for late joiners
// forgotten) and, if that is not enough, detachLargest (attached
// subscribers, largest queue first, until the total is down to a quarter
// of the budget, so that the heap keeps room below the runtime's soft
// limit and the collector does not run continuously at the readers'
// expense). The windows together hold at most a quarter of the budget
// (windowCap), so that they do not fill whatever room it has after every
// shrink. The catch-ups'
// chunks (tail_catchup) count in the total but are not shed: the slots
// bound them. Detached
// subscribers resume like any other, so the budget costs a stalled client
// a catch-up from the shard, never a row. Over budget, a share also drops
// taken pieces at once instead of keeping them for late joiners.
//
// # The caller's duties
//
//  1. Call a Subscriber's Next and Ready from one goroutine at a time (the
//     session's; pgwire hands a parked session to another goroutine, in
//     order). Frontier and QueuedBytes may be called from any goroutine.
//  2. Close every Subscriber exactly once, after its last Next.
//  3. Close every Subscriber before Manager.Close; do not call Subscribe
//     during or after Close (it fails with ErrClosed).
//
// The canonical use, from the adapter:
//
//	m := tail.NewManager(persistClient, tail.Config{})
//	defer m.Close()
//	sub, err := m.Subscribe(ctx, subscribe.Request{Shard: shard, AsOf: asOf, Snapshot: true, Output: opts})
//	if err != nil {
//		return err
//	}
//	defer sub.Close()
//	for {
//		rows, err := sub.Next(ctx, 0)
//		if err != nil {
//			return err // io.EOF at UP TO; subscribe.ErrDropped; *subscribe.BufferError
//		}
//		send(rows)
//	}
//
// # Goroutines and locks
//
// The Manager owns its reaper and the goroutines closing failed tails; each
// SharedTail owns its listen loop and its shares' read-aheads (at most one
// per share); Close waits for all of them. Creating a
// tail (two reader registrations and a listen: consensus round trips)
// happens outside the Manager's lock: subscribes to the same collection
// meanwhile wait for that one creation, subscribes to others do not wait.
// SharedTail.mu guards the window and the subscriber set; each
// subscriber's qmu guards its queue, so that a session takes its batches
// without the tail's lock (the listen pushes under both: lock order mu,
// then qmu), and a batch's acct guards its memory accounting (queue
// references are atomic). A share's own mu guards its pieces, a
// catch-up's its chunk and members (after t.mu); each catch-up's
// goroutine is the tail's (bg) too. Reader
// expiries (a CAS each) run after those locks are released.
package tail
