package tail

import (
	"context"
	"sync"
	"time"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// A subscriber whose position the window no longer covers (detached, or
// a snapshot that ended before the window) catches up from the shard. It
// does so in a catchUp: one reader and listen of the shard that every such
// subscriber of the tail at a nearby position shares, read one chunk
// (Config's persist ListenChunkBytes) at a time. Hundreds of detached
// subscribers resuming at once each reading the shard privately decoded
// gigabytes; a catch-up costs one chunk however many take it.
//
//   - Slots: a catch-up reads a chunk only with one of the manager's
//     catch-up slots (Config.MaxCatchUps), held until every member took
//     the chunk; then it queues for a slot again, behind catch-ups that
//     waited (a channel's waiters are served in order). So the process
//     holds at most MaxCatchUps chunks, and catch-ups of several tails
//     take turns chunk by chunk.
//   - Memory: what a catch-up holds is charged to the budget's
//     tail_catchup holder: twice ListenChunkBytes while it reads (what a
//     read of a merged batch holds, see persist.Listen.Next), then its
//     chunk's updates and what is formatted from them.
//   - Joining: a subscriber joins a catch-up whose current chunk starts at
//     or before its position (it takes the chunk's batches from there;
//     its batcher drops times it already delivered), or one still waiting
//     to open, which then starts at the lowest position of its members.
//   - Slow members: a chunk is split into batches of about catchUpBytes,
//     and a member takes what one step delivers, as from its queue. A
//     member that takes nothing of the current chunk for Config.
//     CatchUpGrace while others wait is evicted: it resumes later in a
//     catch-up of its own (or gets the history-loss error if by then the
//     shard no longer retains its position: the catch-up's reader holds
//     only what its remaining members have not passed), and costs the
//     others nothing more. So a client
//     that stops reading holds no slot and no more than the rows it was
//     handed.
//   - Leaving: after each step a member joins the live stream once the
//     window covers its position; a catch-up whose members all left
//     closes its reader.
type catchUp struct {
	t    *SharedTail
	ctx  context.Context
	stop context.CancelFunc

	mu sync.Mutex
	// start is the position the listen starts at, lowered by members
	// joining until it opens.
	start  uint64
	opened bool
	closed bool // no member may join: the goroutine is ending
	// chunk is the current chunk's batches, covering [lower, upper);
	// upper is the listen's frontier. Between chunks lower == upper.
	lower, upper uint64
	chunk        []*batch
	members      map[*Subscriber]*member
	// err ends every member: the listen failed.
	err error
	// changed is closed (and replaced) when a chunk arrives, a member is
	// evicted or failed, or the catch-up stops reading.
	changed chan struct{}
	// taken wakes the goroutine when a member took its last batch of the
	// chunk or left.
	taken chan struct{}
}

// member is a subscriber's state in a catch-up, guarded by catchUp.mu.
type member struct {
	// pos is the member's position: every update below it was delivered
	// (set at join and by take, as the subscriber's batcher moves only
	// with what take hands it).
	pos     uint64
	next    int  // the chunk's next batch to take
	done    bool // took the current chunk (or needs none of it)
	last    time.Time
	evicted bool
	err     error
	// notify is the wake of a parked session (Subscriber.Ready) waiting
	// for the member's next chunk, called once when something changes for
	// it (see wakeMember).
	notify func()
}

// catchUpChunk is the chunk a catch-up reads: persist's ListenChunkBytes,
// or less under a budget, so that the slots' chunks (each charged about
// five times over: its read, then its updates and what is formatted from
// them) take at most about a sixth of it.
func (m *Manager) catchUpChunk() int {
	n := m.persist.Config().ListenChunkBytes
	if limit := m.cfg.Budget.Limit(); limit > 0 {
		n = min(n, max(minCatchUpChunk, int(limit/int64(32*m.cfg.MaxCatchUps))))
	}
	return n
}

// minCatchUpChunk is the least chunk a catch-up reads: each chunk costs a
// read of the merged batch it is in.
const minCatchUpChunk = 64 << 10

// catchUpRead is what a catch-up's read of a chunk is charged while it
// reads: a read of a merged batch holds about twice the chunk.
func (m *Manager) catchUpRead() int64 { return 2 * int64(m.catchUpChunk()) }

// joinCatchUp adds s, at position pos, to a catch-up of the tail that can
// serve it, starting one if none can.
func (t *SharedTail) joinCatchUp(s *Subscriber, pos uint64) (*catchUp, *member, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return nil, nil, t.err
	}
	for c := range t.catchUps {
		if m := c.join(s, pos); m != nil {
			return c, m, nil
		}
	}
	ctx, stop := context.WithCancel(t.ctx)
	c := &catchUp{t: t, ctx: ctx, stop: stop, start: pos, lower: pos, upper: pos, members: map[*Subscriber]*member{},
		changed: make(chan struct{}), taken: make(chan struct{}, 1)}
	m := c.join(s, pos)
	if !t.bg.Go(c.run) {
		stop()
		return nil, nil, ErrClosed
	}
	t.catchUps[c] = struct{}{}
	t.m.metrics.catchUpShares.Inc()
	return c, m, nil
}

// join adds s at pos if the catch-up can serve it: nil if not. t.mu must
// be held.
func (c *catchUp) join(s *Subscriber, pos uint64) *member {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return nil
	case !c.opened:
		c.start = min(c.start, pos)
		c.lower, c.upper = c.start, c.start
	case pos < c.lower:
		return nil // the catch-up has passed it
	}
	m := &member{pos: pos, last: timeNow()}
	c.skipTo(m)
	c.members[s] = m
	return m
}

// skipTo moves m past the chunk's batches wholly before its position.
// c.mu must be held.
func (c *catchUp) skipTo(m *member) {
	for m.next < len(c.chunk) && c.chunk[m.next].upper <= m.pos {
		m.next++
	}
	m.done = m.next == len(c.chunk)
}

// take returns the chunk's next batches for m, up to catchUpBytes (at
// least one); else, if m must wait for the next chunk, the channel that
// closes when something changes, and notify (if not nil) is called then
// too, once. evicted: m is no longer a member and must join again (it
// was slow, or the catch-up ended); err: it failed.
func (c *catchUp) take(s *Subscriber, m *member, notify func()) (batches []*batch, wait <-chan struct{}, evicted bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case m.err != nil:
		return nil, nil, false, m.err
	case m.evicted:
		return nil, nil, true, nil
	}
	c.skipTo(m)
	if m.done {
		if notify != nil {
			m.notify = notify
		}
		return nil, c.changed, false, nil
	}
	taken := int64(0)
	for m.next < len(c.chunk) && (len(batches) == 0 || taken+c.chunk[m.next].bytes <= catchUpBytes) {
		b := c.chunk[m.next]
		batches = append(batches, b)
		taken += b.bytes
		m.next++
		m.pos = b.upper
	}
	m.last = timeNow()
	if m.done = m.next == len(c.chunk); m.done {
		c.signal()
	}
	return batches, nil, false, nil
}

// leave removes s from the catch-up.
func (c *catchUp) leave(s *Subscriber) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(s)
}

// removeLocked removes s and wakes the goroutine. c.mu must be held.
func (c *catchUp) removeLocked(s *Subscriber) {
	if _, ok := c.members[s]; ok {
		delete(c.members, s)
		c.signal()
	}
}

// signal wakes the goroutine. c.mu must be held.
func (c *catchUp) signal() {
	select {
	case c.taken <- struct{}{}:
	default:
	}
}

// wake closes changed for the members waiting on it, and calls the
// notify of those that wait parked. c.mu must be held.
func (c *catchUp) wake() {
	close(c.changed)
	c.changed = make(chan struct{})
	for _, mb := range c.members {
		mb.wake()
	}
}

// wake calls the member's notify, if set, once: a member parked waiting
// for a chunk is woken by every change of the catch-up, and by its own
// eviction or failure (after which it is no longer among the members
// catchUp.wake reaches). c.mu must be held: a member that leaves (its
// subscriber's Close) is never woken after.
func (mb *member) wake() {
	if notify := mb.notify; notify != nil {
		mb.notify = nil
		notify()
	}
}

// run is the catch-up's goroutine: whenever every member took the last
// chunk, it reads the next one with a slot, until no member is left or
// they can all join the live stream. Members still there when it ends
// are evicted (they join again: the window, or a new catch-up), or fail
// with the listen's error when it is permanent (a storage outage is
// retried: see retryable).
func (c *catchUp) run() {
	t, m := c.t, c.t.m
	var r *persist.Reader
	var l *persist.Listen
	slot := false
	lastDowngrade := time.Time{}
	retry := storageRetry{}
	defer func() {
		if slot {
			m.catchUpSlots.Release(1)
		}
		c.mu.Lock()
		c.closed = true
		c.dropChunk()
		for s, mb := range c.members {
			if mb.err = c.err; mb.err == nil {
				mb.evicted = true
			}
			delete(c.members, s)
			mb.wake()
		}
		c.wake()
		c.mu.Unlock()
		t.mu.Lock()
		delete(t.catchUps, c)
		t.mu.Unlock()
		c.stop()
		closeReader(r)
	}()
	for {
		if !c.waitTaken() {
			return
		}
		if slot {
			// Behind the catch-ups waiting for one, if any.
			m.catchUpSlots.Release(1)
			slot = false
		}
		if c.finished() {
			return
		}
		if m.catchUpSlots.Acquire(c.ctx, 1) != nil {
			return
		}
		slot = true
		if r == nil {
			var err error
			for r, l, err = c.open(); err != nil; r, l, err = c.open() {
				closeReader(r)
				r = nil
				if !c.retryable(&retry, err) {
					c.fail(err)
					return
				}
			}
			if l == nil {
				return
			}
			retry.reset(m.log, t.shard)
		}
		if time.Since(lastDowngrade) >= m.cfg.DowngradeInterval && c.lower > 1 {
			// Let the shard compact what every member has passed.
			lastDowngrade = time.Now()
			if err := r.Downgrade(c.ctx, c.lower-1); err != nil && c.ctx.Err() == nil {
				m.log.Warn("tail: downgrade catch-up reader", "shard", t.shard, "err", err)
			}
		}
		for err := c.read(l); err != nil; err = c.read(l) {
			if !c.retryable(&retry, err) {
				c.fail(err)
				return
			}
		}
		retry.reset(m.log, t.shard)
	}
}

// retryable waits before the catch-up tries again a read that failed with
// err, as the shared listen does through a storage outage (storageRetry):
// its members keep waiting for the chunk, and the listen reads the same
// one again (its frontier does not move on an error). It holds its slot
// meanwhile: another catch-up would meet the same outage. False for a
// permanent error or a closing tail: the members then end with err.
func (c *catchUp) retryable(retry *storageRetry, err error) bool {
	if c.ctx.Err() != nil || persist.IsPermanent(err) {
		return false
	}
	c.t.m.metrics.storageRetries.Inc()
	return retry.wait(c.ctx, c.t.m.log, c.t.shard, err)
}

// fail records the listen's error for the members, unless the tail is
// closing (they are evicted then, and find the tail's state when they
// join again).
func (c *catchUp) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && c.ctx.Err() == nil {
		c.err = err
	}
}

// waitTaken waits until every member took the current chunk, evicting
// those that took nothing of it for CatchUpGrace, and drops the chunk; it
// returns false if the tail is closing.
func (c *catchUp) waitTaken() bool {
	grace := c.t.m.cfg.CatchUpGrace
	for {
		c.mu.Lock()
		now := timeNow()
		waiting := false
		for s, mb := range c.members {
			if mb.done {
				continue
			}
			if now.Sub(mb.last) >= grace {
				mb.evicted = true
				delete(c.members, s)
				mb.wake()
				c.t.m.metrics.catchUpEvictions.Inc()
				continue
			}
			waiting = true
		}
		if !waiting {
			c.dropChunk()
			c.mu.Unlock()
			return c.ctx.Err() == nil
		}
		c.mu.Unlock()
		timer := time.NewTimer(grace)
		select {
		case <-c.taken:
		case <-timer.C:
		case <-c.ctx.Done():
		}
		timer.Stop()
		if c.ctx.Err() != nil {
			return false
		}
	}
}

// finished reports, closing the catch-up if so, whether it is done: no
// member is left, or it reached the shared listen, so that its members
// (all at or past its frontier) join the live stream at their next step.
func (c *catchUp) finished() bool {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.members) > 0 && (!c.opened || c.upper < c.t.frontier) {
		return false
	}
	c.closed = true
	return true
}

// dropChunk releases the current chunk. c.mu must be held.
func (c *catchUp) dropChunk() {
	for _, b := range c.chunk {
		c.t.holdCatchUp(b, false)
	}
	c.chunk = nil
	c.lower = c.upper
}

// open registers the catch-up's reader and opens its listen at the lowest
// member's position. Members whose position the shard no longer retains
// fail with the history-loss error; l is nil when none is left.
func (c *catchUp) open() (*persist.Reader, *persist.Listen, error) {
	t := c.t
	r, err := t.m.persist.OpenReader(c.ctx, t.shard, persist.ReaderOptions{Purpose: "subscribe catch-up"})
	if err != nil {
		return nil, nil, err
	}
	since := r.Since()
	c.mu.Lock()
	start := uint64(0)
	for s, mb := range c.members {
		if mb.pos-1 < since {
			mb.err = &persist.SinceError{AsOf: mb.pos - 1, Since: since}
			delete(c.members, s) // counted in historyLoss by its mapErr
			mb.wake()
			continue
		}
		if start == 0 || mb.pos < start {
			start = mb.pos
		}
	}
	c.wake()
	if start == 0 {
		// No member left: none can join any more.
		c.closed = true
		c.mu.Unlock()
		return r, nil, nil
	}
	c.start, c.lower, c.upper, c.opened = start, start, start, true
	c.mu.Unlock()
	l, err := r.Listen(c.ctx, start-1)
	if err != nil {
		return r, nil, err
	}
	l.SetChunkBytes(t.m.catchUpChunk())
	return r, l, nil
}

// read reads the next chunk and hands it to the members.
func (c *catchUp) read(l *persist.Listen) error {
	m := c.t.m
	reserve := m.catchUpRead()
	m.memCatchUp.Add(reserve)
	updates, frontier, err := l.Next(c.ctx)
	m.memCatchUp.Add(-reserve)
	if err != nil {
		return err
	}
	c.mu.Lock()
	lower := c.upper // the listen's frontier before this chunk
	c.chunk = splitChunk(c.t, updates, lower, frontier)
	for _, b := range c.chunk {
		c.t.holdCatchUp(b, true)
	}
	c.lower, c.upper = lower, frontier
	now := timeNow()
	for _, mb := range c.members {
		mb.next, mb.last = 0, now
		c.skipTo(mb)
	}
	c.wake()
	c.mu.Unlock()
	m.metrics.catchUpChunks.Inc()
	m.enforce()
	return nil
}

// splitChunk cuts a chunk of updates in [lower, upper), ordered by time,
// into batches of about catchUpBytes, whole times each: what one step of
// a member delivers.
func splitChunk(t *SharedTail, updates []row.Update, lower, upper uint64) []*batch {
	var out []*batch
	for len(updates) > 0 {
		n, size := 0, int64(0)
		for n < len(updates) && (n == 0 || size < catchUpBytes) {
			for tm := updates[n].T; n < len(updates) && updates[n].T == tm; n++ {
				size += updates[n].Size()
			}
		}
		hi := upper
		if n < len(updates) {
			hi = updates[n].T
		}
		out = append(out, newBatch(t, lower, hi, updates[:n:n]))
		updates, lower = updates[n:], hi
	}
	if len(out) == 0 {
		out = append(out, newBatch(t, lower, upper, nil)) // progress only
	}
	return out
}
