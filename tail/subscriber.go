package tail

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/subscribe"
)

// The fast path implements the subscription contract.
var _ subscribe.Subscription = (*Subscriber)(nil)

// phases of a subscriber, driven by Next on the session's goroutine.
const (
	phaseStart    = iota // the progress row at AS OF
	phaseSnapshot        // pieces of the shared snapshot cursor
	phaseJoin            // attach to the window and live stream
	phaseCatchUp         // catch up from the shard in a shared catch-up
	phaseLive            // take batches from the queue
)

// Subscriber is one fast-path subscribe. The session pulls its rows with
// Next; the shared listen pushes batches into its queue (references to the
// shared batches, charged to its byte budget).
//
// Detach and resume: when a push would take the queue over budget the
// queue is dropped and the subscriber detached at the frontier it had
// delivered. The next Next resumes it from the window, or, if the window
// no longer reaches back, from the shard in a catch-up it shares with
// other subscribers behind the window (see catchUp) — no snapshot, no
// gap, no duplicate. Only if the shard has compacted past that
// frontier does Next fail, with the 53200 *subscribe.BufferError.
type Subscriber struct {
	t   *SharedTail
	req subscribe.Request
	b   *formatter.Batcher
	// outKey is outputKey(req.Shape, req.Output), the cache key of the
	// batches' rows it takes, and progKey progressKey(req.Output), of
	// their shared progress rows: computed once rather than per batch.
	outKey, progKey string

	// frontier mirrors b.Frontier() for other goroutines (mz_subscriptions).
	frontier atomic.Uint64
	// detaches and resumes count detaches over budget and the resumes
	// that followed (subscribe.Counters, for the statement log).
	detaches, resumes atomic.Int64
	// held mirrors b.Buffered(): the snapshot held back to be ordered or
	// enveloped whole, part of the subscriber's memory (QueuedBytes).
	held atomic.Int64
	// holding is set until the subscriber no longer needs the shard to stay
	// readable at its AS OF (its snapshot cursor is open and it joined the
	// live stream, or it registered a reader of its own): the tail's
	// snapshot reader holds since at the oldest such AS OF, so that a storm
	// whose snapshots start late does not find its AS OF compacted away.
	holding atomic.Bool

	// Owned by the session goroutine.
	phase int
	sh    *share
	// cu is the catch-up from the shard the subscriber is a member of, in
	// the catch-up phase.
	cu  *catchUp
	cum *member
	// out queues rows for the session as slices, most of them shared with
	// other subscribers (never modified): handing them out without copying
	// keeps a storm's cost per subscriber at a few slice headers.
	out [][]formatter.Row
	// parts are the snapshot pieces mapped through the shape so far,
	// consolidated whole at the end of the snapshot.
	parts [][]row.Update
	// fatal ends the stream after the rows before it: the shape's MFP's
	// error, at the batch where the dataflow path fails too, or a final
	// error Ready met (Next reports it).
	fatal error
	// taken is the batches taken from the queue by one step, and pieces
	// the lists of rows deliver makes of them, kept for their arrays
	// (cleared after each delivery).
	taken  []*batch
	pieces [][]formatter.Row

	// qmu guards the queue and its hand-off below: the listen pushes
	// under t.mu and qmu, the session takes under qmu alone, so that
	// thousands of sessions taking their batches do not contend for the
	// tail's lock with each other and with the fan-out. Lock order: t.mu,
	// then qmu.
	qmu    sync.Mutex
	queue  []*batch
	queued int64
	// queueArray is the bytes of queue's own array counted in the
	// budget (see chargeQueue).
	queueArray int64
	attached   bool
	detached   bool
	lost       int64 // bytes queued when detached, for the error
	// untakenSince is when the queue's oldest batch began to wait to be
	// taken: when it was pushed into an empty queue, or the last take that
	// left it queued (stalled).
	untakenSince time.Time
	// next is, when detached, the lower of the first batch it was not
	// handed: a routed subscriber skipped the batches before it that held
	// nothing for it, so it resumes there rather than at its batcher's
	// frontier.
	next uint64
	// waiting is set while Next waits on ready, or Ready's caller for
	// notify: only then does wake close the one and call the other, so a
	// push to a busy subscriber (one behind, taking batches as fast as it
	// can) costs nothing. ready is made for a Next that waits, and
	// notify set by Ready; an idle subscriber parked by pgwire has no
	// channel (nor a goroutine receiving from one).
	waiting bool
	ready   chan struct{}
	notify  func()
	// resumeAt is next, taken by the session goroutine at a resume.
	resumeAt uint64
}

// catchUpBytes bounds the batches (by their bytes) that a subscriber takes
// from its queue at once: the size of a socket write that pgwire makes in
// one piece anyway (its flush threshold).
const catchUpBytes = 64 << 10

// routed reports whether the subscriber needs only the batches its
// shape's index routes rows to: one whose shape is indexed, without UP TO
// (it completes at a frontier). A batch with no row for it sends nothing,
// or with PROGRESS only the frontier, which sweepProgress hands it often
// enough.
func (s *Subscriber) routed() bool {
	return s.req.Shape != nil && s.req.Shape.Index != nil && s.req.UpTo == nil
}

// Subscribe starts a fast-path subscribe on the collection's shared tail,
// creating the tail if needed.
func (m *Manager) Subscribe(ctx context.Context, req subscribe.Request) (*Subscriber, error) {
	t, err := m.tail(ctx, req.Shard, req.AsOf)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	req.AsOf = req.StartAt(max(t.snapFloor, t.snapReader.Since()))
	s := &Subscriber{t: t, req: req, b: req.Batcher(req.AsOf), outKey: outputKey(req.Shape, req.Output),
		progKey: progressKey(req.Output)}
	s.frontier.Store(req.AsOf)
	// Holding from here: the snapshot reader's since stays at or below
	// req.AsOf (snapshotHold runs under t.mu too).
	s.holding.Store(true)
	t.addSubscriber(s)
	t.mu.Unlock()
	m.metrics.subscribers.Inc()
	return s, nil
}

// Frontier is the progress delivered so far. Safe from any goroutine. A
// routed subscriber that is attached has also passed the batches that
// were not routed to it.
func (s *Subscriber) Frontier() uint64 {
	f := s.frontier.Load()
	if !s.routed() {
		return f
	}
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	s.qmu.Lock()
	defer s.qmu.Unlock()
	switch {
	case !s.attached:
	case len(s.queue) > 0:
		f = max(f, s.queue[0].lower)
	default:
		f = max(f, s.t.frontier)
	}
	return f
}

// Detaches is how often the subscriber was detached (subscribe.Counters).
func (s *Subscriber) Detaches() int64 { return s.detaches.Load() }

// Resumes is how often a detached subscriber resumed (subscribe.Counters).
func (s *Subscriber) Resumes() int64 { return s.resumes.Load() }

// QueuedBytes is the bytes waiting in the subscriber's queue, and the
// snapshot it holds back to order or envelope it whole.
func (s *Subscriber) QueuedBytes() int64 {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return s.queued + s.held.Load()
}

// push queues a batch publish is publishing, counted in t.pushed (see
// publish). t.mu must be held.
func (s *Subscriber) push(b *batch) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if !s.attached {
		return
	}
	if s.req.MaxBufferedBytes > 0 && s.queued+b.bytes > s.req.MaxBufferedBytes {
		s.detach(s.queued+b.bytes, b.lower)
		s.t.m.metrics.detaches.Inc()
		return
	}
	if s.stalled(b.at) {
		s.detach(s.queued+b.bytes, b.lower)
		s.t.m.metrics.stallDetaches.Inc()
		return
	}
	if len(s.queue) == 0 {
		s.untakenSince = b.at
	}
	s.queue = append(s.queue, b)
	s.chargeQueue()
	s.queued += b.bytes
	s.t.pushed++
	s.wake()
}

// stalled reports whether the subscriber has taken nothing from its queue
// for Config.DetachStalledAfter while more than stallFloor waited in it,
// at now: its session is blocked writing to a client that stopped reading
// (or a cursor is not fetched, or a portal not executed). Such a
// subscriber is detached rather than queued for: left attached, its queue
// would pin every batch since it stalled until the budget's policy
// detached it, with the heap near the runtime's soft limit meanwhile, at
// the expense of the subscribers that read (see detachTarget). Detached,
// it pins nothing, each publish costs it only a look under qmu, and it
// resumes where it was once its session takes again. A subscriber that
// reads slowly takes something at every write its client accepts and
// stays attached however far behind. qmu must be held.
func (s *Subscriber) stalled(now time.Time) bool {
	after := s.t.m.cfg.DetachStalledAfter
	return after > 0 && len(s.queue) > 0 && s.queued > stallFloor(s.t.m.cfg.Budget.Limit()) && now.Sub(s.untakenSince) > after
}

// stallFloor is the largest queue a stalled subscriber keeps attached
// with: 1 MiB, or the budget's detachFloor if that is less. A smaller
// queue pins little (mostly batches the window holds anyway), and its
// subscriber, often a client reading a cursor at its own pace, would pay
// for a detach with a resume from the window, or from the shard.
func stallFloor(limit int64) int64 {
	const floor = 1 << 20
	if limit > 0 {
		return min(floor, detachFloor(limit))
	}
	return floor
}

// chargeQueue brings the budget's count of the queue's own array up to
// date: a pointer per batch and subscriber, which over hundreds of stalled
// queues of thousands of batches each is megabytes no batch counts. qmu
// must be held.
func (s *Subscriber) chargeQueue() {
	n := int64(cap(s.queue)) * int64(unsafe.Sizeof((*batch)(nil)))
	s.t.m.memQueues.Add(n - s.queueArray)
	s.queueArray = n
}

// detach drops the queue of an attached subscriber, which resumes at its
// next Next from the frontier it delivered: the first queued batch's
// lower, else next (the batch being published, or the tail's frontier);
// lost is the backlog reported if the shard no longer retains that
// frontier. qmu must be held.
func (s *Subscriber) detach(lost int64, next uint64) {
	s.lost = lost
	s.next = next
	if len(s.queue) > 0 {
		s.next = s.queue[0].lower
	}
	s.t.m.metrics.queueBytes.Sub(float64(s.queued))
	s.t.releaseQueue(s.queue)
	clear(s.queue)
	s.queue, s.queued = nil, 0
	s.chargeQueue()
	s.attached, s.detached = false, true
	s.detaches.Add(1)
	s.wake()
}

// setHeld records the bytes the batcher holds back, charging the change
// to the budget. Called after every step, it writes nothing when nothing
// changed (most subscribers hold nothing back).
func (s *Subscriber) setHeld(n int64) {
	if s.held.Load() == n {
		return // only this goroutine (the session's) stores it
	}
	s.t.m.memOrdered.Add(n - s.held.Swap(n))
}

// published mirrors the batcher's frontier and what it holds back for
// other goroutines, after a step of Next or Ready: only what changed, so
// that a step costs no atomic write when nothing did.
func (s *Subscriber) published() {
	if f := s.b.Frontier(); s.frontier.Load() != f {
		s.frontier.Store(f)
	}
	s.setHeld(s.b.Buffered())
}

// wake signals a waiting Next, or Ready's caller. qmu must be held.
func (s *Subscriber) wake() {
	if !s.waiting {
		return // Next and Ready look at the queue under qmu before they wait
	}
	s.waiting = false
	if s.ready != nil {
		close(s.ready)
		s.ready = nil
	}
	if notify := s.notify; notify != nil {
		s.notify = nil
		notify()
	}
}

// pos is the next time the subscriber needs: every update below it was
// delivered (or, for a routed subscriber, skipped as holding nothing for
// it).
func (s *Subscriber) pos() uint64 { return max(s.b.Frontier(), s.req.AsOf+1, s.resumeAt) }

// Next returns up to max output rows (all ready when max <= 0), blocking
// until at least one is ready; io.EOF once UP TO is reached.
func (s *Subscriber) Next(ctx context.Context, max int) ([]formatter.Row, error) {
	for {
		if len(s.out) > 0 {
			rows := s.out[0]
			if max > 0 && max < len(rows) {
				s.out[0] = rows[max:]
				return rows[:max:max], nil
			}
			if max <= 0 && len(s.out) > 1 {
				// Everything ready at once (the snapshot's end and the
				// batches joined from the window): the session writes
				// what one Next returns with one flush.
				rows = slices.Concat(s.out...)
				clear(s.out)
				s.out = s.out[:0]
				return rows, nil
			}
			// The slot let go: the array's first slots would otherwise
			// keep every batch handed out alive until the array is
			// dropped (a resume's thousands of rows, for as long as its
			// client takes them).
			s.out[0] = nil
			if len(s.out) == 1 {
				// Keep the array: an idle subscriber emits a progress
				// row a tick, and would otherwise allocate one each.
				s.out = s.out[:0]
			} else {
				s.out = s.out[1:]
			}
			return rows, nil
		}
		if s.fatal != nil {
			return nil, s.fatal
		}
		if s.b.Done() {
			return nil, io.EOF
		}
		err := s.step(ctx)
		s.published()
		if err != nil {
			return nil, err
		}
	}
}

// Ready reports whether Next has something to return; if not, the next
// push, detach or failure of the tail, or the next chunk of the catch-up
// it waits for, calls wake, once (under the tail's or the catch-up's
// locks), unless Close comes first: the session can then wait outside
// Next (pgwire.ReadyResult). It takes the steps Next would take before
// it waits — joining the live stream after the snapshot, joining a
// catch-up from the shard and taking its chunks, taking queued batches
// that hold nothing for the subscriber — so that a parked session is
// resumed only when rows are ready and never waits in Next for a
// catch-up's read (which a slot may hold up for long: see catchUp). It
// reports true, leaving the rest to Next, only in a phase that waits for
// a read of its own (the snapshot) or on an error. Call it from Next's
// goroutine (or the one that took over from it).
func (s *Subscriber) Ready(wake func()) bool {
	defer s.published()
	for len(s.out) == 0 && s.fatal == nil && !s.b.Done() {
		var wait bool
		var err error
		switch s.phase {
		case phaseJoin:
			err = s.join()
		case phaseCatchUp:
			var ready <-chan struct{}
			ready, err = s.catchUp(wake)
			wait = ready != nil
		case phaseLive:
			if _, wait, err = s.live(wake); err != nil {
				return true // Next reports it: the tail's error stays
			}
		default:
			return true
		}
		switch {
		case err != nil:
			// Final: the subscriber left its catch-up, or the tail
			// failed. Next returns it after the rows before it.
			s.fatal = err
		case wait:
			return false
		}
	}
	return true
}

// emit queues rows for the session.
func (s *Subscriber) emit(rows []formatter.Row) {
	if len(rows) > 0 {
		s.out = append(s.out, rows)
	}
}

// step advances the subscriber's state machine once, adding rows to out or
// blocking until something happens.
func (s *Subscriber) step(ctx context.Context) error {
	switch s.phase {
	case phaseStart:
		s.emit(s.b.Start())
		s.phase = phaseJoin
		if !s.req.Snapshot {
			s.emit(s.b.SnapshotDone())
		} else {
			sh, err := s.t.shareFor(ctx, s, s.req.AsOf)
			if err != nil {
				return err
			}
			s.sh = sh
			s.phase = phaseSnapshot
		}
	case phaseSnapshot:
		p, err := s.sh.next(ctx, s)
		if err != nil {
			return err
		}
		if p == nil {
			if s.req.Shape != nil && !s.b.Done() {
				if err := s.shapedSnapshot(); err != nil {
					return err
				}
			}
			s.t.leaveShare(s.sh, s)
			s.sh = nil
			s.emit(s.b.SnapshotDone())
			s.phase = phaseJoin
			return nil
		}
		switch {
		case s.b.Done():
		case s.req.Shape != nil:
			// Rows of different pieces may map to one row: the pieces
			// are consolidated whole at the end, as on the dataflow path.
			p.updatesOf()
			mp := p.apply(s.req.Shape, false, s.t.m.metrics)
			if mp.err != nil {
				s.fatal = mp.err
				return nil
			}
			s.parts = append(s.parts, mp.updates)
		case s.req.Output.StreamsSnapshotChunks():
			// Final on its own: formatted once for every subscriber of
			// the shape.
			s.emit(p.rows(s.req.Output, s.req.AsOf))
		default:
			rows, err := s.b.Snapshot(p.updatesOf())
			if err != nil {
				return err
			}
			s.emit(rows)
		}
	case phaseJoin:
		return s.join()
	case phaseCatchUp:
		wait, err := s.catchUp(nil)
		if err != nil || wait == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		}
	case phaseLive:
		ready, wait, err := s.live(nil)
		if err != nil {
			return s.mapErr(err)
		}
		if !wait {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ready:
		}
	}
	return nil
}

// live is a step of the live phase that does not wait: it resumes a
// detached subscriber (back to the join phase), delivers the next queued
// batch, or reports the tail's error (unmapped); with nothing to do it
// reports wait, and the next push, detach or failure of the tail calls
// notify when it is set (Ready), else closes the channel ready.
func (s *Subscriber) live(notify func()) (ready <-chan struct{}, wait bool, err error) {
	s.qmu.Lock()
	if s.detached {
		s.detached = false
		s.resumeAt = s.next
		s.qmu.Unlock()
		s.t.m.metrics.resumes.Inc()
		s.resumes.Add(1)
		s.phase = phaseJoin
		return nil, false, nil
	}
	if len(s.queue) > 0 {
		// Every batch ready, up to catchUpBytes: a subscriber that fell
		// behind catches up with one write, not one per batch. The rows
		// handed to the session pin their batches until it has sent
		// them, counted nowhere, while the batches still queued stay
		// counted (and can be detached if the session stalls): hence
		// the bound.
		n, taken := 0, int64(0)
		for n < len(s.queue) && (n == 0 || taken+s.queue[n].bytes <= catchUpBytes) {
			taken += s.queue[n].bytes
			n++
		}
		s.taken = append(s.taken[:0], s.queue[:n]...)
		clear(s.queue[:n])
		if n == len(s.queue) {
			// Emptied: keep the array for the next push (a tick's
			// batch to an idle subscriber would allocate one each).
			s.queue = s.queue[:0]
		} else {
			s.queue = s.queue[n:]
			s.untakenSince = timeNow()
		}
		s.chargeQueue()
		s.queued -= taken
		s.t.m.metrics.queueBytes.Sub(float64(taken))
		s.qmu.Unlock()
		for _, b := range s.taken {
			s.t.queueRef(b, -1)
		}
		s.deliver(s.taken)
		clear(s.taken) // the rows delivered refer to what they need
		return nil, false, nil
	}
	if s.t.failing.Load() {
		// fail set t.err before it woke the subscribers.
		s.qmu.Unlock()
		s.t.mu.Lock()
		err := s.t.err
		s.t.mu.Unlock()
		return nil, false, err
	}
	s.waiting = true
	if notify != nil {
		s.notify = notify
	} else {
		if s.ready == nil {
			s.ready = make(chan struct{})
		}
		ready = s.ready
	}
	s.qmu.Unlock()
	return ready, true, nil
}

// deliver emits the rows of published batches, mapped through the
// subscriber's shape, as one list (one write); false when the shape's MFP
// failed on one (the rows of the batches before it are emitted, then Next
// returns the error).
//
// Every batch keeps its progress row, a batch with no rows for the
// subscriber (a tick's) too, so that the output does not depend on how
// many batches one catch-up takes and equals the dataflow path's, which
// sends one per batch of its listen (TestMatchesDataflowPath).
func (s *Subscriber) deliver(batches []*batch) bool {
	if len(batches) == 1 {
		// The usual live delivery: one batch, at the subscriber's
		// frontier. What it hands out is the same for every such
		// subscriber of the output shape: shared, not built per
		// subscriber.
		b := batches[0]
		rows, err := b.rows(s.req.Shape, s.req.Output, s.outKey, s.t.m.metrics)
		switch {
		case err != nil:
			s.fatal = err
			return false
		case len(rows) == 0 && s.progKey != "":
			// Only the frontier (a tick, or a sweep's batch with no row
			// for the shape): the batch's shared progress row.
			s.emit(s.b.Progress(b.upper, b.progressRow(s.progKey, s.req.Output)))
			return true
		case len(rows) > 0 && s.b.Whole(rows, b.upper):
			s.emit(b.list(s.outKey, s.req.Output, rows))
			return true
		}
	}
	// Each batch's piece of the list, as a single delivery takes it,
	// from what every subscriber at that point shares: a subscriber
	// behind takes several batches at once (at 10,000 subscribers, most
	// do), and progress rows of its own would be encoded for it alone.
	// shared: every piece is the batch's shared one (or nothing, for a
	// tick without PROGRESS), so the list is the same for every
	// subscriber of the output shape that takes these batches.
	s.pieces = s.pieces[:0]
	shared := len(batches) > 1
	bytes := int64(0)
	var err error
	for i, b := range batches {
		bytes += b.bytes
		var rows []formatter.TimeRows
		if rows, err = b.rows(s.req.Shape, s.req.Output, s.outKey, s.t.m.metrics); err != nil {
			shared = false
			break
		}
		if i > 0 && b.lower != batches[i-1].upper {
			shared = false // a routed queue skipped batches: not a run of the tail's
		}
		var piece []formatter.Row
		switch {
		case len(rows) == 0 && s.progKey != "":
			piece = s.b.Progress(b.upper, b.progressRow(s.progKey, s.req.Output))
			shared = shared && len(piece) == 1
		case len(rows) > 0 && s.b.Whole(rows, b.upper):
			piece = b.list(s.outKey, s.req.Output, rows)
		default:
			piece = s.b.Groups(rows, b.upper)
			shared = shared && len(rows) == 0 && len(piece) == 0
		}
		s.pieces = append(s.pieces, piece)
	}
	if shared {
		s.emit(batches[len(batches)-1].run(runKey{s.outKey, s.progKey, batches[0].lower}, bytes, s.pieces))
	} else {
		s.emit(slices.Concat(s.pieces...))
	}
	clear(s.pieces)
	if err != nil {
		s.fatal = err
		return false
	}
	return true
}

// shapedSnapshot emits the snapshot of a shaped subscriber once it took
// every piece: consolidated and formatted once per shape (and output
// shape) for every subscriber of the share.
func (s *Subscriber) shapedSnapshot() error {
	snap := s.sh.final(s.req.Shape, s.parts)
	s.parts = nil
	if s.req.Output.StreamsSnapshotChunks() {
		s.emit(snap.rows.get(outputKey(nil, s.req.Output), func() []formatter.Row {
			return s.req.Output.SnapshotRows(s.req.AsOf, snap.updates)
		}))
		return nil
	}
	rows, err := s.b.Snapshot(snap.updates)
	if err != nil {
		return err
	}
	s.emit(rows)
	return nil
}

// join attaches the subscriber to the live stream at its position: the
// window's batches from there are delivered at once and later batches are
// queued. If the window does not reach back far enough, it joins a
// catch-up from the shard (starting one if none can serve it). It never
// waits: the catch-up reads on its own goroutine.
func (s *Subscriber) join() error {
	joined, err := s.joinWindow()
	if err != nil {
		return s.mapErr(err)
	}
	if joined {
		return nil
	}
	cu, m, err := s.t.joinCatchUp(s, s.pos())
	if err != nil {
		return s.mapErr(err)
	}
	s.cu, s.cum = cu, m
	s.t.m.metrics.catchUps.Inc()
	s.phase = phaseCatchUp
	return nil
}

// catchUp is a step of the catch-up phase that does not wait: it delivers
// the next batches of the catch-up's chunk, or goes back to the join
// phase once the window covers the subscriber's position (or the
// catch-up evicted it). With nothing to take until the next chunk it
// returns wait, a channel closed when the catch-up changes, and calls
// notify then too if it is not nil (Ready). err is final (mapped): the
// subscriber left the catch-up.
func (s *Subscriber) catchUp(notify func()) (wait <-chan struct{}, err error) {
	batches, wait, evicted, err := s.cu.take(s, s.cum, notify)
	switch {
	case err != nil:
		s.leaveCatchUp()
		return nil, s.mapErr(err)
	case evicted:
		s.leaveCatchUp()
		s.phase = phaseJoin
		return nil, nil
	case len(batches) > 0:
		// The catch-up's reader holds the shard at or below the
		// subscriber's position now.
		s.holding.Store(false)
		if !s.deliver(batches) {
			return nil, nil
		}
	}
	s.t.mu.Lock()
	_, covered := s.t.windowFrom(s.pos())
	s.t.mu.Unlock()
	if covered {
		s.leaveCatchUp()
		s.phase = phaseJoin
		return nil, nil
	}
	return wait, nil
}

// joinWindow attaches the subscriber to the live stream when the window
// reaches back to its position, delivering the window's batches from
// there; joined is false when it does not (join then joins a catch-up
// from the shard). It never waits. err is the tail's, unmapped.
func (s *Subscriber) joinWindow() (joined bool, err error) {
	pos := s.pos()
	s.t.mu.Lock()
	if err := s.t.err; err != nil {
		s.t.mu.Unlock()
		return false, err
	}
	batches, covered := s.t.windowFrom(pos)
	frontier := s.t.frontier
	if covered {
		s.qmu.Lock()
		s.attached, s.detached = true, false
		s.qmu.Unlock()
	}
	s.t.mu.Unlock()
	if !covered {
		return false, nil
	}
	if !s.deliver(batches) {
		return true, nil
	}
	// The shared listen may be ahead of every batch the subscriber took
	// (it attached at or past the listen's position): report that
	// progress now, as a private listen would.
	s.emit(s.b.Groups(nil, frontier))
	s.phase = phaseLive
	s.holding.Store(false)
	return true, nil
}

// mapErr turns a lost position into the 53200 error and a dropped shard
// into subscribe.ErrDropped.
func (s *Subscriber) mapErr(err error) error {
	switch {
	case errors.Is(err, persist.ErrSinceAdvanced):
		s.t.m.metrics.historyLoss.Inc()
		s.qmu.Lock()
		lost := s.lost
		s.qmu.Unlock()
		return &subscribe.BufferError{Buffered: lost, Max: s.req.MaxBufferedBytes, HistoryLost: true}
	}
	return subscribe.Dropped(err)
}

// leaveCatchUp leaves the subscriber's catch-up, if any.
func (s *Subscriber) leaveCatchUp() {
	if s.cu != nil {
		s.cu.leave(s)
		s.cu, s.cum = nil, nil
	}
}

// Close ends the subscribe and releases what it holds.
func (s *Subscriber) Close() {
	if s.sh != nil {
		s.t.leaveShare(s.sh, s)
		s.sh = nil
	}
	s.leaveCatchUp()
	s.setHeld(0)
	s.qmu.Lock()
	s.notify = nil // Ready's contract: no wake after Close
	s.qmu.Unlock()
	t := s.t
	t.mu.Lock()
	if _, ok := t.subs[s]; ok {
		t.removeSubscriber(s)
		t.m.metrics.subscribers.Dec()
		s.qmu.Lock()
		t.m.metrics.queueBytes.Sub(float64(s.queued))
		t.releaseQueue(s.queue)
		s.queue, s.queued = nil, 0
		s.chargeQueue()
		s.qmu.Unlock()
		if len(t.subs) == 0 {
			t.idleAt = timeNow()
		}
	}
	t.mu.Unlock()
}
