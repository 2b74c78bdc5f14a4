package tail

import (
	"sort"

	"github.com/shardtail/shardtail/membudget"
)

// Memory accounting. A listen batch is one allocation however many hold
// it, so the budget counts each batch once: under the window while the
// window holds it, and under the queues once only subscriber queues do
// (the bytes slow subscribers pin). Per-subscriber budgets
// (MaxBufferedBytes) still charge each queue with every batch it
// references: that is the client's backlog, not the process's memory.

// holder returns the budget holder b counts under, nil when nothing holds
// it. t.mu must be held.
func (t *SharedTail) holder(b *batch) *membudget.Holder {
	switch {
	case b.inWindow:
		return t.m.memWindow
	case b.queueRefs > 0:
		return t.m.memQueues
	}
	return nil
}

// hold records that the window took or let go of b (inWindow) and that
// refs more queues reference it (negative: fewer), moving its bytes
// between the budget's holders. t.mu must be held.
func (t *SharedTail) hold(b *batch, inWindow bool, refs int) {
	before := t.holder(b)
	b.inWindow = inWindow
	b.queueRefs += refs
	if after := t.holder(b); after != before {
		before.Add(-b.bytes)
		after.Add(b.bytes)
	}
}

// releaseQueue lets go of the batches in q, which a queue no longer
// holds. t.mu must be held.
func (t *SharedTail) releaseQueue(q []*batch) {
	for _, b := range q {
		t.hold(b, b.inWindow, -1)
	}
}

// enforce applies the budget's policy when the process is over it, in
// order of what costs clients least:
//
//  1. Shrink every window to its newest batch. A subscriber that falls
//     behind later catches up from the shard instead of the window.
//  2. Detach attached subscribers, largest queue first, until the total is
//     under the budget. A detached subscriber resumes exactly where it
//     was at its next Next (see Subscriber), from the shard.
//
// Holders the tail cannot shrink (pgwire, the dataflow path) count toward
// the total and so make step 2 detach more. Only one enforce runs at a
// time; a tail that finds one running goes on publishing.
func (m *Manager) enforce() {
	b := m.cfg.Budget
	if !b.Over() || !m.enforcing.TryLock() {
		return
	}
	defer m.enforcing.Unlock()
	tails := m.running()
	for _, t := range tails {
		t.mu.Lock()
		t.trimWindowTo(0)
		t.mu.Unlock()
	}
	m.metrics.budgetShrinks.Inc()
	if !b.Over() {
		return
	}
	type queued struct {
		s     *Subscriber
		bytes int64
	}
	var qs []queued
	for _, t := range tails {
		t.mu.Lock()
		for s := range t.subs {
			if s.attached && s.queued > 0 {
				qs = append(qs, queued{s, s.queued})
			}
		}
		t.mu.Unlock()
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].bytes > qs[j].bytes })
	for _, q := range qs {
		if !b.Over() {
			return
		}
		t := q.s.t
		t.mu.Lock()
		if q.s.attached {
			q.s.detach(q.s.queued, q.s.t.frontier)
			m.metrics.budgetDetaches.Inc()
		}
		t.mu.Unlock()
	}
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
