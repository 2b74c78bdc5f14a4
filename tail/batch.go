package tail

import (
	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/row"
)

// batch is one listen batch of the shared listen: the updates with times in
// [lower, upper), decoded once and shared by every subscriber. Formatting
// into output rows happens once per output shape, on first use, and the
// rows are shared too.
type batch struct {
	lower, upper uint64
	updates      []row.Update // consolidated, ordered by time
	bytes        int64        // estimated size, charged to each queue

	// Held by the window and how many queues, for the memory budget
	// (SharedTail.hold). Guarded by the tail's mu.
	inWindow  bool
	queueRefs int

	shapes shapeCache[[]formatter.TimeRows]
}

func newBatch(lower, upper uint64, updates []row.Update) *batch {
	b := &batch{lower: lower, upper: upper, updates: updates, bytes: 64}
	for _, u := range updates {
		b.bytes += u.Size()
	}
	return b
}

// rows returns the batch formatted for opts, computing it once per shape.
func (b *batch) rows(opts *formatter.Options) []formatter.TimeRows {
	return b.shapes.get(opts, func() []formatter.TimeRows {
		rows := opts.Format(b.updates)
		for _, g := range rows {
			formatter.Shared(g.Rows)
		}
		return rows
	})
}
