package tail

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/subscribe"
)

// SharedTail serves every fast-path subscriber of one collection: one
// listen reader follows the shard and decodes each batch once into the
// retained window and every attached subscriber's queue; one snapshot
// reader serves shared snapshot cursors. The listen loop never waits for a
// subscriber: a queue over its byte budget is dropped and the subscriber
// detached (see Subscriber).
type SharedTail struct {
	m     *Manager
	shard string
	ctx   context.Context
	stop  context.CancelFunc
	done  chan struct{}
	// bg runs the snapshot shares' read-ahead (share.readAhead); close
	// waits for it.
	bg goroutines

	listenReader *persist.Reader
	snapReader   *persist.Reader

	mu sync.Mutex
	// window holds the most recent batches, contiguous, oldest first. It
	// always ends at frontier.
	window []*batch
	// windowBytes is the bytes of the window's batches (batch.bytes and
	// extra), changed under t.mu as the window changes and under a
	// batch's acct as its extra grows.
	windowBytes atomic.Int64
	// frontier is the shared listen's position: every update with a time
	// below it is in the window or older.
	frontier uint64
	// start is the listen's AS OF + 1: nothing below it ever entered the
	// window.
	start uint64
	subs  map[*Subscriber]struct{}
	// pushed counts the subscribers publish queues its batch for (push).
	pushed int64
	// every holds the subscribers every batch is pushed to; the others
	// are in their shape's routed set (see addSubscriber).
	every map[*Subscriber]struct{}
	// shapes are the distinct shapes of subs by key; indexed routes a
	// column's value to the shapes whose index equality it satisfies.
	shapes  map[string]*shapeSubs
	indexed map[int]map[row.Datum]map[*shapeSubs]struct{}
	// progressed are the routed subscribers with PROGRESS, which
	// sweepProgress hands batches in turn.
	progressed sweeper
	shares     map[uint64]*share
	// catchUps are the tail's catch-ups from the shard (see catchUp).
	catchUps map[*catchUp]struct{}
	// snapFloor is the newest since the snapshot reader was told to
	// downgrade to (the CAS may still be in flight).
	snapFloor uint64
	err       error // the listen failed (dropped shard, storage)
	// failing is set with err, for subscribers that look without t.mu.
	failing atomic.Bool
	changed chan struct{} // closed when frontier advances or err is set
	idleAt  time.Time     // when the last subscriber left
}

// newSharedTail registers the tail's two readers and starts its listen at
// asOf (the first subscriber's), so its window covers that subscriber.
func (m *Manager) newSharedTail(ctx context.Context, shard string, asOf uint64) (*SharedTail, error) {
	lr, err := m.persist.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "shared tail listen"})
	if err != nil {
		return nil, err
	}
	sr, err := m.persist.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "shared tail snapshot"})
	if err != nil {
		lr.Close()
		return nil, err
	}
	asOf = max(asOf, lr.Since())
	l, err := lr.Listen(ctx, asOf)
	if err != nil {
		lr.Close()
		sr.Close()
		return nil, err
	}
	tctx, stop := context.WithCancel(m.ctx)
	t := &SharedTail{m: m, shard: shard, ctx: tctx, stop: stop, done: make(chan struct{}),
		listenReader: lr, snapReader: sr, frontier: asOf + 1, start: asOf + 1,
		subs: map[*Subscriber]struct{}{}, every: map[*Subscriber]struct{}{}, shapes: map[string]*shapeSubs{},
		indexed: map[int]map[row.Datum]map[*shapeSubs]struct{}{}, shares: map[uint64]*share{}, catchUps: map[*catchUp]struct{}{}, changed: make(chan struct{})}
	m.metrics.tails.Inc()
	go t.run(l, asOf)
	return t, nil
}

// run is the listen loop.
func (t *SharedTail) run(l *persist.Listen, asOf uint64) {
	defer close(t.done)
	lastDowngrade := time.Time{}
	retry := storageRetry{}
	for {
		updates, frontier, err := l.Next(t.ctx)
		if err != nil {
			if t.ctx.Err() != nil {
				return
			}
			if !persist.IsPermanent(err) {
				// Storage is unreachable: subscribers keep their streams
				// and the listen picks up where it was when it returns.
				t.m.metrics.storageRetries.Inc()
				if retry.wait(t.ctx, t.m.log, t.shard, err) {
					continue
				}
				return
			}
			t.fail(err)
			return
		}
		retry.reset(t.m.log, t.shard)
		t.m.metrics.decodedBatches.Inc()
		t.publish(updates, frontier)
		t.m.enforce()
		// Let the shard compact what the tail has passed; the window and
		// private catch-ups cover the rest. Rate-limited: a downgrade is a
		// CAS.
		if time.Since(lastDowngrade) >= t.m.cfg.DowngradeInterval && frontier > 1 {
			lastDowngrade = time.Now()
			// The listen reader follows the listen; the snapshot reader too,
			// but not past the AS OF of a subscriber that still needs it
			// (a snapshot at an older time uses a private reader).
			holds := map[*persist.Reader]uint64{t.listenReader: frontier - 1, t.snapReader: t.snapshotHold(frontier - 1)}
			for r, since := range holds {
				if err := r.Downgrade(t.ctx, since); err != nil && t.ctx.Err() == nil {
					t.m.log.Warn("tail: downgrade reader", "shard", t.shard, "err", err)
				}
			}
		}
	}
}

// storageRetry paces retries of a listen through a storage outage: backoff
// from 100 ms to 5 s, one warning when it starts and one when it ends.
type storageRetry struct {
	backoff time.Duration
	since   time.Time
}

// wait sleeps before the next try; false if ctx ended.
func (r *storageRetry) wait(ctx context.Context, log *slog.Logger, shard string, err error) bool {
	if r.backoff == 0 {
		r.backoff, r.since = 100*time.Millisecond, time.Now()
		log.Warn("tail: storage unavailable, retrying", "shard", shard, "err", err)
	} else {
		r.backoff = min(2*r.backoff, 5*time.Second)
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(r.backoff):
		return true
	}
}

func (r *storageRetry) reset(log *slog.Logger, shard string) {
	if r.backoff != 0 {
		log.Info("tail: storage available again", "shard", shard, "after", time.Since(r.since).Round(time.Millisecond))
		*r = storageRetry{}
	}
}

// snapshotHold is where the snapshot reader may downgrade to: limit, or
// the oldest AS OF of a subscriber still holding.
func (t *SharedTail) snapshotHold(limit uint64) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s := range t.subs {
		if s.holding.Load() {
			limit = min(limit, s.req.AsOf)
		}
	}
	// The downgrade about to be made: subscribers arriving meanwhile with
	// AsOfAtLeast start at or after it.
	t.snapFloor = max(t.snapFloor, limit)
	return limit
}

// publish appends a batch to the window and to every attached subscriber's
// queue, detaching subscribers over budget.
func (t *SharedTail) publish(updates []row.Update, frontier uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := newBatch(t, t.frontier, frontier, updates)
	t.window = append(t.window, b)
	t.setInWindow(b, true)
	t.frontier = frontier
	t.trimWindow()
	// b is credited a queue reference for every subscriber before the
	// fan-out, and given back those it was not pushed to after it: two
	// atomic adds of its count (and one of the queues' gauge) instead of
	// one per subscriber, and since no subscriber can take b before it
	// is pushed to it, the count never reaches zero meanwhile.
	credit := int64(len(t.subs))
	if credit > 0 {
		t.queueRef(b, credit)
	}
	t.pushed = 0
	for s := range t.every {
		s.push(b)
	}
	t.pushRouted(b)
	if credit > 0 {
		t.queueRef(b, t.pushed-credit)
	}
	if t.pushed > 0 {
		t.m.metrics.queueBytes.Add(float64(b.bytes * t.pushed))
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// trimWindow drops the oldest batches beyond the window's byte and age
// bounds, keeping at least the newest batch. t.mu must be held.
func (t *SharedTail) trimWindow() { t.trimWindowTo(t.m.cfg.WindowBytes) }

// trimWindowTo is trimWindow with a byte bound of limit (0: the budget
// policy shrinking the window to its newest batch). t.mu must be held.
func (t *SharedTail) trimWindowTo(limit int64) {
	cutoff := uint64(0)
	if now := uint64(time.Now().UnixMilli()); t.m.cfg.WindowAge > 0 && now > uint64(t.m.cfg.WindowAge.Milliseconds()) {
		cutoff = now - uint64(t.m.cfg.WindowAge.Milliseconds())
	}
	// The windows together hold at most windowCap of the budget: each
	// tail gives up its oldest batches while they hold more.
	together := windowCap(t.m.cfg.Budget.Limit())
	drop := 0
	for drop < len(t.window)-1 {
		b := t.window[drop]
		if t.windowBytes.Load() <= limit && b.upper >= cutoff && (together <= 0 || t.m.memWindow.Bytes() <= together) {
			break
		}
		t.setInWindow(b, false)
		drop++
	}
	if drop > 0 {
		clear(t.window[:drop])
		t.window = t.window[drop:]
	}
}

// windowFrom returns the window's batches that hold times >= pos, and
// whether the window reaches back to pos (else the caller must catch up
// privately). t.mu must be held.
func (t *SharedTail) windowFrom(pos uint64) ([]*batch, bool) {
	if pos >= t.frontier {
		return nil, true
	}
	if len(t.window) == 0 || t.window[0].lower > pos {
		return nil, false
	}
	i := 0
	for i < len(t.window) && t.window[i].upper <= pos {
		i++
	}
	return append([]*batch(nil), t.window[i:]...), true
}

// failed reports whether the listen failed: the tail serves no one and is
// replaced by the next subscribe.
func (t *SharedTail) failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err != nil
}

// fail ends the listen with err and wakes every subscriber to see it.
func (t *SharedTail) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.err = subscribe.Dropped(err)
	t.failing.Store(true)
	for s := range t.subs {
		s.qmu.Lock()
		s.wake()
		s.qmu.Unlock()
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// shareFor returns the shared snapshot cursor at asOf that s can join,
// opening one if needed. The share is registered before its cursor opens
// (a consensus round trip), so that a storm's subscribers arriving
// meanwhile wait for it instead of each opening a cursor of their own.
func (t *SharedTail) shareFor(ctx context.Context, s *Subscriber, asOf uint64) (*share, error) {
	for {
		t.mu.Lock()
		sh := t.shares[asOf]
		if sh == nil {
			sh = newShare(t, asOf)
			t.shares[asOf] = sh
			t.mu.Unlock()
			return t.openShare(ctx, sh, s)
		}
		t.mu.Unlock()
		select {
		case <-sh.opened:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if sh.join(s) {
			return sh, nil
		}
		// The share failed or dropped its first pieces: replace it.
		t.mu.Lock()
		private := t.forgetShare(sh)
		t.mu.Unlock()
		closeReader(private)
	}
}

// openShare opens the cursor of a share shareFor registered, and joins s.
func (t *SharedTail) openShare(ctx context.Context, sh *share, s *Subscriber) (*share, error) {
	cur, private, err := t.openCursor(ctx, sh.asOf, s.req.ReadAt)
	sh.mu.Lock()
	sh.cur, sh.private, sh.err = cur, private, err
	sh.mu.Unlock()
	close(sh.opened)
	t.mu.Lock()
	if err != nil {
		if t.shares[sh.asOf] == sh {
			delete(t.shares, sh.asOf)
		}
		t.mu.Unlock()
		return nil, err
	}
	sh.join(s)
	// Finished shares kept for late joiners are superseded by a newer one.
	var superseded []*persist.Reader
	for at, old := range t.shares {
		if at < sh.asOf && old.idle() {
			superseded = append(superseded, t.forgetShare(old))
		}
	}
	t.mu.Unlock()
	// Expiring readers is a CAS each: not under t.mu.
	for _, r := range superseded {
		closeReader(r)
	}
	t.m.metrics.shares.Inc()
	return sh, nil
}

// forgetShare removes sh from the tail's shares, so that no subscriber
// joins it, and releases its pieces if it has no reader (else its last
// reader does, in leaveShare). It returns a private reader to close once
// t.mu is released. t.mu must be held.
func (t *SharedTail) forgetShare(sh *share) *persist.Reader {
	if t.shares[sh.asOf] == sh {
		delete(t.shares, sh.asOf)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.forgotten = true
	if len(sh.readers) == 0 && !sh.reading {
		return sh.release()
	}
	return nil
}

// shrinkShares is the budget's shrink of the tail's snapshot shares: each
// share drops the pieces all its subscribers took, and finished shares
// kept only for late joiners are forgotten. It returns private readers to
// close once t.mu is released. t.mu must be held.
func (t *SharedTail) shrinkShares() []*persist.Reader {
	var private []*persist.Reader
	for _, sh := range t.shares {
		select {
		case <-sh.opened:
		default:
			continue // opening: nothing read yet
		}
		sh.mu.Lock()
		idle := len(sh.readers) == 0
		if !idle {
			sh.dropTaken()
		}
		sh.mu.Unlock()
		if idle {
			private = append(private, t.forgetShare(sh))
		}
	}
	return private
}

// openCursor opens a snapshot cursor at asOf on the shared snapshot reader,
// or on a private reader (returned, to close with the cursor) when asOf is
// older than the shared reader holds. readAt is the request's ReadAt.
func (t *SharedTail) openCursor(ctx context.Context, asOf uint64, readAt time.Time) (*persist.Cursor, *persist.Reader, error) {
	reader, private := t.snapReader, (*persist.Reader)(nil)
	if asOf < reader.Since() {
		r, err := t.m.persist.OpenReader(ctx, t.shard, persist.ReaderOptions{Purpose: "shared tail old snapshot"})
		if err != nil {
			return nil, nil, err
		}
		reader, private = r, r
	}
	cur, err := reader.SnapshotAfter(ctx, asOf, readAt)
	if err != nil {
		if private != nil {
			private.Close()
		}
		return nil, nil, err
	}
	return cur, private, nil
}

// leaveShare unregisters s from a share. A share that read its whole
// snapshot and still holds it stays for late joiners at the same AS OF (a
// storm's subscribers arrive over some time) until a newer share
// supersedes it; others are forgotten with their last subscriber.
func (t *SharedTail) leaveShare(sh *share, s *Subscriber) {
	sh.leave(s)
	t.mu.Lock()
	sh.mu.Lock()
	// A share no longer in t.shares (replaced, superseded) goes with its
	// last reader.
	forget := len(sh.readers) == 0 && (!(sh.done && sh.base == 0) || t.shares[sh.asOf] != sh)
	sh.mu.Unlock()
	var private *persist.Reader
	if forget {
		private = t.forgetShare(sh)
	}
	t.mu.Unlock()
	closeReader(private)
}

// close stops the listen loop and expires the tail's readers.
func (t *SharedTail) close() {
	t.stop()
	<-t.done
	t.bg.Wait()
	var private []*persist.Reader
	t.mu.Lock()
	// The window goes with the tail (its subscribers are gone).
	for _, b := range t.window {
		t.setInWindow(b, false)
	}
	t.window = nil
	for _, sh := range t.shares {
		sh.mu.Lock()
		if !sh.reading {
			private = append(private, sh.release())
		}
		sh.mu.Unlock()
	}
	t.mu.Unlock()
	for _, r := range private {
		closeReader(r)
	}
	t.listenReader.Close()
	t.snapReader.Close()
	t.m.metrics.tails.Dec()
	t.m.metrics.shapes.DeleteLabelValues(t.shard)
}

// goroutines is a set of goroutines that an owner starts and then waits
// for once: after Wait began, Go starts none, so that nothing a closed
// owner started still runs.
type goroutines struct {
	mu     sync.Mutex
	closed bool // mu
	wg     sync.WaitGroup
}

// Go runs f on a new goroutine of the set, unless Wait was called (false).
func (g *goroutines) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}

// Wait refuses new goroutines and waits for those running.
func (g *goroutines) Wait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
