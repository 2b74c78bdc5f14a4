package formatter

import (
	"slices"

	"github.com/shardtail/shardtail/row"
)

// A snapshot is one timestamp (AS OF) that arrives in chunks: a persist
// snapshot cursor yields consolidated chunks in row order, each final (a
// row never straddles two chunks), and plain output formats each chunk on
// its own. WITHIN TIMESTAMP ORDER BY and the envelopes apply to the whole
// timestamp, so a shape whose output order or key groups do not follow the
// row order must see every chunk before it emits any row. snapshotFlow
// says which case a shape is in.
type snapshotFlow int

const (
	// flowChunks: each chunk's rows are final and in order on their own.
	// Plain output, and an ORDER BY that is a prefix of the row order
	// (the relation's leading columns, ascending, NULLs where the row
	// order puts them).
	flowChunks snapshotFlow = iota
	// flowKeyGroups: an envelope whose KEY is the relation's leading
	// columns (and whose ORDER BY, if any, a prefix of that KEY): a key's
	// updates are contiguous in row order, but may straddle two chunks, so
	// the chunk's last key group waits for the next chunk.
	flowKeyGroups
	// flowWhole: the rows wait for the whole timestamp.
	flowWhole
)

// flow returns how the shape's snapshot may be formatted chunk by chunk.
func (o *Options) flow() snapshotFlow {
	// leading reports whether the ORDER BY sorts as the row order does over
	// the relation's first n columns: item i is relation column i (tail
	// column i+1), ascending, with NULLs first (row.CompareDatum's place
	// for them) unless the column has none, and not numeric (whose SQL
	// order differs from its stored text's).
	leading := func(n int) bool {
		for i, it := range o.Order {
			if i >= n || it.Col != i+1 || it.Desc {
				return false
			}
			c := o.Relation.Columns[i]
			if c.Type == row.TypeNumeric || (c.Nullable && !it.NullsFirst) {
				return false
			}
		}
		return true
	}
	if o.Envelope == EnvelopeNone {
		if leading(len(o.Relation.Columns)) {
			return flowChunks
		}
		return flowWhole
	}
	// With the KEY the leading columns in KEY order, the output's tail is
	// the relation row itself (keys, then values in relation order): its
	// default order is the row order, key groups are contiguous in it.
	for i, k := range o.Keys {
		if k != i {
			return flowWhole
		}
	}
	if len(o.Keys) == 0 || !leading(len(o.Keys)) {
		return flowWhole
	}
	return flowKeyGroups
}

// StreamsSnapshotChunks reports whether each snapshot chunk formats on its
// own (Data of the chunk is final and in order): the fast path then
// formats a shared chunk once for all subscribers of the shape. Otherwise
// feed chunks through a Batcher, which holds rows back until they are
// final.
func (o *Options) StreamsSnapshotChunks() bool { return o.flow() == flowChunks }

// snapshotBuffer holds back the snapshot updates whose output is not final
// yet (see snapshotFlow), charging them to a byte limit.
type snapshotBuffer struct {
	opts    *Options
	t       uint64
	flow    snapshotFlow
	limit   int64 // 0: none
	pending []row.Update
	bytes   int64 // estimated size of pending
}

// add takes a chunk and returns the rows that are final.
func (sb *snapshotBuffer) add(updates []row.Update) ([]Row, error) {
	switch sb.flow {
	case flowChunks:
		return sb.opts.Data(sb.t, updates), nil
	case flowKeyGroups:
		all := updates
		if len(sb.pending) > 0 {
			all = append(slices.Clip(sb.pending), updates...)
		}
		if len(all) == 0 {
			return nil, nil
		}
		// The last key group may continue in the next chunk.
		n := len(sb.opts.Keys)
		last := all[len(all)-1].Row[:n]
		i := len(all) - 1
		for i > 0 && row.Equal(all[i-1].Row[:n], last) {
			i--
		}
		sb.pending, sb.bytes = nil, 0
		if err := sb.hold(all[i:]); err != nil {
			return nil, err
		}
		return sb.opts.Data(sb.t, all[:i]), nil
	}
	return nil, sb.hold(updates)
}

// hold appends updates to pending, failing past the limit.
func (sb *snapshotBuffer) hold(updates []row.Update) error {
	for _, u := range updates {
		sb.bytes += u.Size()
	}
	sb.pending = append(sb.pending, updates...)
	if sb.limit > 0 && sb.bytes > sb.limit {
		return &ResultSizeError{Size: sb.bytes, Max: sb.limit}
	}
	return nil
}

// flush returns the rows of everything held back.
func (sb *snapshotBuffer) flush() []Row {
	if len(sb.pending) == 0 {
		return nil
	}
	rows := sb.opts.Data(sb.t, sb.pending)
	sb.pending, sb.bytes = nil, 0
	return rows
}
