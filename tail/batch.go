package tail

import (
	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/subscribe"
)

// batch is one listen batch of the shared listen: the updates with times in
// [lower, upper), decoded once and shared by every subscriber. Mapping
// through a shape and formatting into output rows happen once per shape
// and output shape, on first use, and the rows are shared too.
type batch struct {
	lower, upper uint64
	decoded            // consolidated, ordered by time
	bytes        int64 // estimated size, charged to each queue

	// Held by the window and how many queues, for the memory budget
	// (SharedTail.hold). Guarded by the tail's mu.
	inWindow  bool
	queueRefs int

	shapes shapeCache[[]formatter.TimeRows]
}

func newBatch(lower, upper uint64, updates []row.Update) *batch {
	b := &batch{lower: lower, upper: upper, decoded: decoded{updates: updates}, bytes: 64}
	for _, u := range updates {
		b.bytes += u.Size()
	}
	return b
}

// rows returns the batch mapped through sh (nil: as it is) and formatted
// for opts, computing each once per shape (key is outputKey(sh, opts));
// the MFP's error if it failed.
func (b *batch) rows(sh *subscribe.Shape, opts *formatter.Options, key string, m *Metrics) ([]formatter.TimeRows, error) {
	updates := b.updates
	if sh != nil {
		mb := b.apply(sh, true, m)
		if mb.err != nil {
			return nil, mb.err
		}
		if len(mb.updates) == 0 {
			// Nothing to format: no entry in the cache either (a sweep
			// hands a batch to every routed subscriber with PROGRESS).
			return nil, nil
		}
		updates = mb.updates
	}
	return b.shapes.get(key, func() []formatter.TimeRows {
		rows := opts.Format(updates)
		for _, g := range rows {
			formatter.Shared(g.Rows)
		}
		return rows
	}), nil
}
