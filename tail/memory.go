package tail

import (
	"sort"

	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/persist"
)

// Memory accounting. A listen batch is one allocation however many hold
// it, so the budget counts each batch once — its updates and what they
// keep alive or was computed from them (batch.extra): under the window
// while the window holds it, and under the queues once only subscriber
// queues do (the bytes slow subscribers pin). Per-subscriber budgets
// (MaxBufferedBytes) still charge each queue with every batch it
// references: that is the client's backlog, not the process's memory.

// holder returns the budget holder b should count under, nil when nothing
// holds it. b.acct must be held.
func (t *SharedTail) holder(b *batch) *membudget.Holder {
	switch {
	case b.inWindow:
		return t.m.memWindow
	case b.queueRefs.Load() > 0:
		return t.m.memQueues
	}
	return nil
}

// recount moves b's bytes to the holder it should count under, if it
// counts under another. b.acct must be held.
func (t *SharedTail) recount(b *batch) {
	if h := t.holder(b); h != b.counted {
		b.counted.Add(-(b.bytes + b.extra))
		h.Add(b.bytes + b.extra)
		b.counted = h
	}
}

// setInWindow records that the window took (in) or let go of b, counting
// its bytes in the window's and moving them between the budget's
// holders. t.mu must be held.
func (t *SharedTail) setInWindow(b *batch, in bool) {
	b.acct.Lock()
	defer b.acct.Unlock()
	switch {
	case in && !b.inWindow:
		t.windowBytes.Add(b.bytes + b.extra)
	case !in && b.inWindow:
		t.windowBytes.Add(-(b.bytes + b.extra))
	}
	b.inWindow = in
	t.recount(b)
}

// queueRef records that n more queues reference b (negative: fewer),
// without t.mu: a session taking batches from its queue needs only its
// own lock. Only a count crossing zero can move b between holders, so
// only then does it take b.acct; every change is followed by a recount
// under b.acct, so the last one sees the final state.
func (t *SharedTail) queueRef(b *batch, n int64) {
	after := b.queueRefs.Add(n)
	if (after == 0) == (after-n == 0) {
		return
	}
	b.acct.Lock()
	t.recount(b)
	b.acct.Unlock()
}

// grow counts n more bytes computed from b (formatted rows, encodings)
// where b is held: its holder, and the window's bytes if it is in the
// window. Computed from a batch nothing holds any more (a subscriber
// formatting what it took from its queue), they are the session's until
// it is done with them, and counted nowhere. It takes b.acct, not t.mu:
// the first session to format a batch does not wait for the fan-out that
// published it.
func (t *SharedTail) grow(b *batch, n int64) {
	b.acct.Lock()
	defer b.acct.Unlock()
	b.extra += n
	if b.inWindow {
		t.windowBytes.Add(n)
	}
	b.counted.Add(n)
}

// holdCatchUp charges (in) or releases b, a chunk's batch of a catch-up,
// under the budget's tail_catchup holder: it counts there while the
// catch-up holds it, with what is formatted from it meanwhile (grow).
func (t *SharedTail) holdCatchUp(b *batch, in bool) {
	b.acct.Lock()
	defer b.acct.Unlock()
	b.counted.Add(-(b.bytes + b.extra))
	b.counted = nil
	if in {
		b.counted = t.m.memCatchUp
		b.counted.Add(b.bytes + b.extra)
	}
}

// releaseQueue lets go of the batches in q, which a queue no longer
// holds.
func (t *SharedTail) releaseQueue(q []*batch) {
	for _, b := range q {
		t.queueRef(b, -1)
	}
}

// enforce applies the budget's policy when the process is over it (see
// membudget.Budget.Enforce). The manager's stages, in order of what costs
// clients least:
//
//  1. shrink: every window to its newest batch, and every snapshot share
//     to the pieces some subscriber of it has yet to take (a finished
//     share kept for late joiners is dropped). A subscriber that falls
//     behind later catches up from the shard instead of the window; one
//     that subscribes later at the same AS OF opens a new cursor.
//  2. detachLargest: attached subscribers, largest queue first, until the
//     total is down to detachTarget, a quarter of the budget: not just
//     under it.
//     A detached subscriber resumes exactly where it was at its next Next
//     (see Subscriber), from the shard. Queues of at most detachFloor are
//     left alone: their subscribers are keeping up, and since a tail's
//     queues share its batches they pin about that much per tail
//     together.
//
// Holders the tail cannot shrink (pgwire, the dataflow path, pieces a slow
// subscriber of a share has yet to take) count toward the total and so make
// step 2 detach more; the budget's last resort ends the largest dataflow
// subscribes.
func (m *Manager) enforce() { m.cfg.Budget.Enforce() }

// shrink is the policy's first stage: windows and snapshot shares.
func (m *Manager) shrink() {
	var private []*persist.Reader
	for _, t := range m.running() {
		t.mu.Lock()
		t.trimWindowTo(0)
		private = append(private, t.shrinkShares()...)
		t.mu.Unlock()
	}
	for _, r := range private {
		closeReader(r)
	}
	m.metrics.budgetShrinks.Inc()
}

// detachLargest is the policy's second stage: the largest queues, until
// the total is down to detachTarget.
func (m *Manager) detachLargest() {
	b := m.cfg.Budget
	qs, queuedBytes := m.largeQueues()
	target := detachTarget(b.Limit(), b.Total(), queuedBytes)
	m.detachWhile(qs, func() bool { return b.Total() > target })
}

// queued is an attached subscriber's queue and its bytes when measured.
type queued struct {
	s     *Subscriber
	bytes int64
}

// largeQueues returns the attached subscribers whose queues hold more than
// detachFloor, largest first, and their bytes together.
func (m *Manager) largeQueues() (qs []queued, bytes int64) {
	floor := detachFloor(m.cfg.Budget.Limit())
	for _, t := range m.running() {
		t.mu.Lock()
		for s := range t.subs {
			s.qmu.Lock()
			if s.large(floor) {
				qs = append(qs, queued{s, s.queued})
				bytes += s.queued
			}
			s.qmu.Unlock()
		}
		t.mu.Unlock()
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].bytes > qs[j].bytes })
	return qs, bytes
}

// large reports whether s is attached with more than floor bytes queued.
// s.qmu must be held.
func (s *Subscriber) large(floor int64) bool {
	return s.attached && s.queued > floor
}

// detachWhile detaches the subscribers of qs in order while over() holds,
// each only if its queue is still over the floor: one that read it since
// largeQueues looked stays.
func (m *Manager) detachWhile(qs []queued, over func() bool) {
	floor := detachFloor(m.cfg.Budget.Limit())
	for _, q := range qs {
		if !over() {
			return
		}
		t := q.s.t
		t.mu.Lock()
		q.s.qmu.Lock()
		if q.s.large(floor) {
			q.s.detach(q.s.queued, q.s.t.frontier)
			m.metrics.budgetDetaches.Inc()
		}
		q.s.qmu.Unlock()
		t.mu.Unlock()
	}
}

// windowCap is what the windows of every tail may hold together under a
// budget of limit bytes (0: no cap but Config.WindowBytes): a quarter.
// The windows are kept for subscribers that join or fall behind later;
// left to the budget's shrink alone they grew into whatever room the
// budget had, after every shrink again, and the heap then sat near the Go
// runtime's soft limit (the budget + 96 MiB) for as long as they took to
// fill: the collector ran several times a second at the readers' expense,
// with stalled clients or without.
func windowCap(limit int64) int64 { return limit / 4 }

// detachTarget is the total detachLargest detaches down to once the
// process is over its budget: a quarter of the budget, not just under it.
// Detaching only until the total was just under the budget kept stalled
// queues at the budget for as long as they kept filling, and the heap at
// the Go runtime's soft limit (membudget.ApplyRuntimeLimit, the budget +
// 96 MiB): the collector then ran several times a second with a few tens
// of MiB of room, and the readers, who allocate as they deliver, paid for
// it in GC assists (a (g) run: 18 % of the server's CPU in the GC against
// 4 % without the stalled clients, whose windows the shrink empties
// instead; 9 % in the readers' deliveries alone; readers' p99 1.6x the
// baseline's). From a quarter the queues take a while to fill again, so
// the heap spends most of the time with room, as the baseline's does; a
// stalled subscriber detached sooner loses nothing (it resumes from the
// shard, as it would have a few batches later), and the largest queues go
// first, so that subscribers keeping up are reached last.
//
// Only when the queues over the floor (queued of total) could bring the
// total down to a quarter: when the rest (pgwire's buffers, snapshot
// pieces, the dataflow path) holds more, detaching to a quarter would
// detach every large queue at each overshoot for little, and the target
// is the budget itself, as before.
func detachTarget(limit, total, queued int64) int64 {
	if total-queued > limit/4 {
		return limit
	}
	return limit / 4
}

// detachFloor is the largest queue the budget's policy leaves attached:
// 1/64 of the budget. Detaching a subscriber that keeps up frees little
// (its few batches are mostly its peers' too) and costs it a catch-up from
// the shard; without the floor, holders the tail cannot shed (pgwire's
// buffers) over the budget would detach every reader, every publish.
func detachFloor(limit int64) int64 {
	return limit / 64
}

// running returns the running tails.
func (m *Manager) running() []*SharedTail {
	m.mu.Lock()
	defer m.mu.Unlock()
	tails := make([]*SharedTail, 0, len(m.tails))
	for _, t := range m.tails {
		tails = append(tails, t)
	}
	return tails
}
