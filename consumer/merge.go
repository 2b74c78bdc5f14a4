package consumer

import (
	"fmt"
	"slices"
	"time"
)

// Merger aligns the subscribes of several collections at one cut: it takes
// each subscribe's rows and yields batches that hold every collection's
// updates up to one frontier, the least of the collections' frontiers. A
// writer of a merged batch sees a consistent cut of all of them (two tables
// written in one transaction always land in the same batch), and one
// checkpoint resumes them all.
//
// Each subscribe is followed by its own Core, which closes a batch at every
// progress row and never cuts Partial chunks (rows of a timestamp cannot be
// passed on before every other collection is past the timestamp before it,
// so a large snapshot is held whole); the merged stream feeds one Core with
// the configured limits. Every subscribe must start at the same AS OF.
type Merger struct {
	out    *Core
	subs   []*Core
	queues [][]Update
	fronts []Frontier
	opened bool
	pushed Frontier
}

// NewMerger returns a Merger of n subscribes that start at from (zero for
// fresh subscribes with snapshots, all at one AS OF).
func NewMerger(cfg CoreConfig, from Frontier, n int) *Merger {
	m := &Merger{out: NewCore(cfg, from), queues: make([][]Update, n), fronts: make([]Frontier, n)}
	for i := range n {
		m.subs = append(m.subs, NewCore(CoreConfig{Collection: i}, from))
	}
	return m
}

// Push feeds the next row of subscribe i.
func (m *Merger) Push(i int, r Row, now time.Time) error {
	sub := m.subs[i]
	r.Collection = i
	if err := sub.Push(r, now); err != nil {
		return fmt.Errorf("collection %d: %w", i, err)
	}
	for b, ok := sub.Next(); ok; b, ok = sub.Next() {
		m.queues[i] = append(m.queues[i], b.Updates...)
		m.fronts[i] = b.Upper
	}
	if !m.opened {
		if !m.allStarted() {
			return nil
		}
		asOf := m.subs[0].AsOf()
		for j, s := range m.subs {
			if s.AsOf() != asOf {
				return fmt.Errorf("%w: collection %d opened at %d, collection 0 at %d", ErrUnexpectedOpening, j, s.AsOf(), asOf)
			}
		}
		if err := m.out.Push(Row{Timestamp: asOf, Progressed: true}, now); err != nil {
			return err
		}
		m.opened = true
	}
	return m.advance(now)
}

// AsOf returns the AS OF of subscribe i once its opening row arrived, else
// zero: the fresh subscribes after the first are issued at the first's.
func (m *Merger) AsOf(i int) uint64 { return m.subs[i].AsOf() }

func (m *Merger) allStarted() bool {
	for _, s := range m.subs {
		if !s.started {
			return false
		}
	}
	return true
}

// advance passes every update below the least frontier to the output core,
// in timestamp order, then that frontier.
func (m *Merger) advance(now time.Time) error {
	f := slices.Min(m.fronts)
	if f <= m.pushed || f == 0 {
		return nil
	}
	var batch []Update
	for i, q := range m.queues {
		n := 0
		for n < len(q) && Frontier(q[n].Timestamp) < f {
			n++
		}
		batch = append(batch, q[:n]...)
		m.queues[i] = q[n:]
	}
	// Stable: within a timestamp, collections in order and each
	// collection's rows in its stream order.
	slices.SortStableFunc(batch, func(a, b Update) int {
		switch {
		case a.Timestamp < b.Timestamp:
			return -1
		case a.Timestamp > b.Timestamp:
			return 1
		}
		return 0
	})
	for _, u := range batch {
		r := Row{Timestamp: u.Timestamp, Diff: u.Diff, State: u.State, Values: u.Values, Size: u.Size, Collection: u.Collection}
		if err := m.out.Push(r, now); err != nil {
			return err
		}
	}
	m.pushed = f
	return m.out.Push(Row{Timestamp: uint64(f), Progressed: true}, now)
}

// Tick, Flush and Next are the output Core's.
func (m *Merger) Tick(now time.Time) { m.out.Tick(now) }

// Flush closes the pending merged batch now.
func (m *Merger) Flush() { m.out.Flush() }

// Next returns the next merged batch.
func (m *Merger) Next() (Batch, bool) { return m.out.Next() }
