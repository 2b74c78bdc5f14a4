package formatter

import (
	"math"

	"github.com/shardtail/shardtail/row"
)

// Batcher is the SUBSCRIBE state machine shared by both paths: it turns a
// subscription's input — the snapshot at AS OF, then listen batches each
// closed by a frontier — into output rows, applying SNAPSHOT, PROGRESS and
// UP TO exactly as SUBSCRIBE-SPEC.md says:
//
//   - With PROGRESS, the first row is a progress row at AS OF.
//
//   - Snapshot rows are stamped AS OF.
//
//   - After each batch comes a progress row at its frontier (also for a
//     batch with no data), except the frontier that completes the
//     subscribe: no row has mz_timestamp >= UP TO, and there is no
//     progress row at completion; and except below the time the subscribe
//     went live (SetLive): there progress is per timestamp only.
//
//   - AS OF = UP TO completes at once with zero rows.
//
//   - WITHIN TIMESTAMP ORDER BY and the envelopes see the whole snapshot:
//     Snapshot holds back the rows of a shape whose order or key groups the
//     chunks' row order does not serve, and SnapshotDone emits them (see
//     snapshotFlow). What it holds counts against the limit set with
//     SetMaxBuffered. Listen batches arrive whole, one or more timestamps
//     each, and are formatted whole.
//
//     b := formatter.NewBatcher(&opts, asOf, upTo)
//     emit(b.Start())
//     for chunk := range snapshot { rows, err := b.Snapshot(chunk); emit(rows) } // if SNAPSHOT
//     emit(b.SnapshotDone())
//     for !b.Done() { updates, frontier := listen.Next(); emit(b.Batch(updates, frontier)) }
type Batcher struct {
	opts     *Options
	asOf     uint64
	upTo     uint64
	hasUpTo  bool
	done     bool
	frontier uint64
	live     uint64 // see SetLive
	snap     snapshotBuffer
}

// NewBatcher returns a batcher for one subscribe. upTo is nil without UP
// TO; the caller has checked UP TO >= AS OF.
func NewBatcher(opts *Options, asOf uint64, upTo *uint64) *Batcher {
	b := &Batcher{opts: opts, asOf: asOf, frontier: asOf, snap: snapshotBuffer{opts: opts, t: asOf, flow: opts.flow()}}
	if upTo != nil {
		b.hasUpTo, b.upTo = true, *upTo
		b.done = *upTo <= asOf
	}
	return b
}

// SetMaxBuffered bounds the bytes of snapshot updates the batcher holds
// back (max_result_size): past it Snapshot fails with a *ResultSizeError.
// 0 means no bound.
func (b *Batcher) SetMaxBuffered(n int64) { b.snap.limit = n }

// SetLive sets the time from which the subscribe is live
// (subscribe.Request.Live). A batch whose frontier is below it is history
// that was complete when the subscribe began, and closes without a
// progress row at its frontier; the progress row at t + 1 after the rows
// at t still follows. Which batches hold that history — ticks in a shared
// tail's window, batches that compaction merged in the shard — differs
// between the paths and from run to run: per-timestamp progress does not,
// so a read of the past is the same on both paths and in every run.
func (b *Batcher) SetLive(t uint64) { b.live = t }

// Buffered is the estimated size of the snapshot updates held back.
func (b *Batcher) Buffered() int64 { return b.snap.bytes }

// Done reports whether the subscribe is complete (UP TO reached).
func (b *Batcher) Done() bool { return b.done }

// Frontier is the progress delivered so far: every row with mz_timestamp
// below it has been emitted.
func (b *Batcher) Frontier() uint64 { return b.frontier }

// Start returns the rows before the snapshot: the progress row at AS OF.
func (b *Batcher) Start() []Row {
	if b.done || !b.opts.Progress {
		return nil
	}
	return []Row{b.opts.ProgressRow(b.asOf)}
}

// Snapshot takes a snapshot chunk (updates at AS OF, consolidated; chunks
// in row order, a row in one chunk only) and returns the output rows that
// are final: all of the chunk's for plain output, none for an ORDER BY that
// needs the whole snapshot. It fails with a *ResultSizeError when the rows
// held back pass the SetMaxBuffered bound.
func (b *Batcher) Snapshot(updates []row.Update) ([]Row, error) {
	if b.done || len(updates) == 0 {
		return nil, nil
	}
	return b.snap.add(updates)
}

// SnapshotDone returns the rows that close the snapshot (call it also
// without SNAPSHOT): the rows Snapshot held back, then, the snapshot being
// a batch of data at AS OF, its upper AS OF + 1 at once — every row below
// it has been sent. It completes the subscribe when UP TO is AS OF + 1.
func (b *Batcher) SnapshotDone() []Row {
	if b.done || b.asOf == math.MaxUint64 {
		// No time follows the largest mz_timestamp: AS OF + 1 would wrap
		// to 0, and the subscribe only ever waits.
		return nil
	}
	return b.advance(b.snap.flush(), b.asOf+1)
}

// Batch returns the output rows of one listen batch: updates with times in
// (AS OF, frontier), consolidated and ordered by time, then the progress row
// at frontier unless the batch completes the subscribe.
func (b *Batcher) Batch(updates []row.Update, frontier uint64) []Row {
	if b.done {
		return nil
	}
	return b.Groups(b.opts.Format(updates), frontier)
}

// Groups is Batch over already formatted rows (Options.Format), which a
// shared tail computes once per output shape for all its subscribers.
//
// Progress is reported per timestamp, not per stored batch: the rows at
// time t are followed by a progress row at t + 1, and the batch by one at
// its frontier. Stored batches are merged by compaction at times the client
// cannot see, so this is what makes the output the same on both paths and
// across runs. Rows this subscribe must not see — at or before AS OF, at
// or after UP TO, or below the progress it already delivered (a resume
// overlapping what was sent) — are skipped, so there are no duplicates.
func (b *Batcher) Groups(groups []TimeRows, frontier uint64) []Row {
	return b.AppendGroups(nil, groups, frontier)
}

// AppendGroups is Groups appending to out: a subscriber that takes several
// batches at once (a catch-up) hands them to its session as one list of
// rows, written with one flush.
func (b *Batcher) AppendGroups(out []Row, groups []TimeRows, frontier uint64) []Row {
	if b.done {
		return out
	}
	for _, g := range groups {
		if g.T <= b.asOf || g.T < b.frontier || g.T >= frontier {
			continue
		}
		if b.hasUpTo && g.T >= b.upTo {
			break
		}
		out = append(out, g.Rows...)
		if out = b.advance(out, g.T+1); b.done {
			return out
		}
	}
	if frontier < b.live {
		b.move(frontier) // history: no progress row of the batch's own
		return out
	}
	return b.advance(out, frontier)
}

// Progress is Groups(nil, frontier) with progress as its progress row: a
// one-row slice holding the progress row at frontier that many
// subscribers share (Shared: encoded once per wire format), returned
// itself rather than copied. It is what a subscriber of a shape takes from
// a batch that holds nothing for it.
func (b *Batcher) Progress(frontier uint64, progress []Row) []Row {
	if b.done || !b.move(frontier) || frontier < b.live {
		return nil
	}
	return progress[:1:1]
}

// Whole reports whether Groups(groups, frontier) would hand out every row
// of groups and the progress rows after them as Options.BatchRows lists
// them: the batcher's frontier is at or below the first time, past AS OF,
// below frontier, frontier is live (SetLive), and UP TO is not reached. If so it advances as Groups
// would, and the caller hands out BatchRows's list, which every subscriber
// at that point shares (a shared tail computes it once per batch), instead
// of a list of its own.
func (b *Batcher) Whole(groups []TimeRows, frontier uint64) bool {
	if b.done || frontier <= b.frontier || frontier < b.live || (b.hasUpTo && frontier >= b.upTo) {
		return false
	}
	if len(groups) > 0 && (groups[0].T <= b.asOf || groups[0].T < b.frontier) {
		return false
	}
	b.frontier = frontier
	return true
}

// BatchRows is what Groups(groups, frontier) returns to a batcher for which
// Whole holds: the rows of each time (groups in time order, one per time,
// below frontier) followed by a progress row at that time + 1, then one at
// frontier unless the last already is. The list is full (len == cap), so
// that no one appending to it writes into a list others share.
func (o *Options) BatchRows(groups []TimeRows, frontier uint64) []Row {
	n := 1
	for _, g := range groups {
		n += len(g.Rows) + 1
	}
	out := make([]Row, 0, n)
	last := uint64(0)
	for _, g := range groups {
		out = append(out, g.Rows...)
		if o.Progress {
			out = append(out, o.ProgressRow(g.T+1))
		}
		last = g.T + 1
	}
	if o.Progress && frontier > last {
		out = append(out, o.ProgressRow(frontier))
	}
	return out[:len(out):len(out)]
}

// advance moves the delivered frontier to f, appending its progress row,
// or completes the subscribe when f reaches UP TO.
func (b *Batcher) advance(out []Row, f uint64) []Row {
	if b.move(f) {
		out = append(out, b.opts.ProgressRow(f))
	}
	return out
}

// move moves the delivered frontier to f, or completes the subscribe when
// f reaches UP TO, and reports whether a progress row at f is due.
func (b *Batcher) move(f uint64) bool {
	if b.hasUpTo && f >= b.upTo {
		b.done = true
		b.frontier = b.upTo
		return false
	}
	if f <= b.frontier {
		return false
	}
	b.frontier = f
	return b.opts.Progress
}
