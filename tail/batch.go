package tail

import (
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/subscribe"
)

// batch is one listen batch of the shared listen: the updates with times in
// [lower, upper), decoded once and shared by every subscriber. Mapping
// through a shape and formatting into output rows happen once per shape
// and output shape, on first use, and the rows are shared too.
type batch struct {
	t            *SharedTail
	lower, upper uint64
	// at is when the batch was made: for a published batch, when it was
	// queued (Subscriber.stalled).
	at      time.Time
	decoded       // consolidated, ordered by time
	bytes   int64 // estimated size of the updates, charged to each queue
	// extra is the bytes the batch keeps alive beyond bytes: the decoded
	// updates' allocation slack (see decodedSlack), then what is computed
	// from them, the rows formatted for each output shape and their
	// encodings for each wire format. They live as long as the batch (a
	// stalled subscriber's queue keeps what the readers encoded), so the
	// process's budget counts them where the batch is held (see
	// SharedTail.grow); a subscriber's own MaxBufferedBytes does not (its
	// backlog is the updates). Guarded by acct.
	extra int64

	// Held by the window and how many queues, for the memory budget
	// (SharedTail.hold): inWindow is set under the tail's mu and acct,
	// queueRefs changes without either (SharedTail.queueRef). counted is
	// the holder the batch's bytes count under, guarded by acct.
	acct      sync.Mutex
	inWindow  bool
	queueRefs atomic.Int64
	counted   *membudget.Holder

	shapes shapeCache[[]formatter.TimeRows]
	// lists are the rows handed out whole (formatter.Options.BatchRows),
	// by output key: every subscriber that takes the batch alone at its
	// frontier shares one list instead of building its own.
	lists shapeCache[[]formatter.Row]
	// progress holds the progress row at upper, shared by the subscribers
	// with PROGRESS that take nothing else from the batch, per
	// progressKey.
	progress shapeCache[[]formatter.Row]
	// runs are the lists of several batches ending with this one that
	// subscribers took at once (see run).
	runs runCache
}

func newBatch(t *SharedTail, lower, upper uint64, updates []row.Update) *batch {
	b := &batch{t: t, lower: lower, upper: upper, at: timeNow(), decoded: decoded{updates: updates}, bytes: 64, extra: decodedSlack(updates)}
	for _, u := range updates {
		b.bytes += u.Size()
	}
	return b
}

// decodedSlack estimates what decoded updates keep alive beyond their
// Size: persist decodes each variable-width column of a part's batch into
// one allocation for the column's bytes and a typed slab of its values'
// headers (see codec.PartReader.Next), and the heap rounds the former up
// to a size class or whole pages — a quarter more for 8 values of 4 KiB.
// It assumes one part's batch per column, as a write's listen batch is.
func decodedSlack(updates []row.Update) int64 {
	if len(updates) == 0 {
		return 0
	}
	const header = 16 // a string's, in the column's slab
	cols := make([]int64, len(updates[0].Row))
	var n int64
	for _, u := range updates {
		for i, d := range u.Row {
			var l int
			switch v := d.(type) {
			case string:
				l = len(v)
			case row.Numeric:
				l = len(v)
			case row.JSON:
				l = len(v)
			case []byte:
				l = len(v)
			default:
				continue
			}
			n += header
			if i < len(cols) {
				cols[i] += int64(l)
			}
		}
	}
	for _, c := range cols {
		n += allocSize(c) - c
	}
	return n
}

// allocSize approximates the bytes the Go heap reserves for an allocation
// of n bytes: whole pages above 32 KiB, else a size class (classes are
// about an eighth of a power of two apart).
func allocSize(n int64) int64 {
	const page, maxSmall, minClass = 8 << 10, 32 << 10, 16
	switch {
	case n <= 0:
		return 0
	case n > maxSmall:
		return (n + page - 1) / page * page
	}
	step := max(int64(1)<<max(bits.Len64(uint64(n-1))-3, 0), minClass)
	return (n + step - 1) / step * step
}

// rows returns the batch mapped through sh (nil: as it is) and formatted
// for opts, computing each once per shape (key is outputKey(sh, opts));
// the MFP's error if it failed.
func (b *batch) rows(sh *subscribe.Shape, opts *formatter.Options, key string, m *Metrics) ([]formatter.TimeRows, error) {
	if len(b.updates) == 0 {
		// A tick's batch, only progress: nothing to map or format, for
		// any shape. Every attached subscriber takes one each tick, so
		// it skips the cache lookup too.
		return nil, nil
	}
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
	var formatted int64
	rows := b.shapes.get(key, func() []formatter.TimeRows {
		rows := opts.Format(updates)
		for _, g := range rows {
			formatter.SharedCharged(g.Rows, b.grow)
		}
		formatted = formattedSize(rows)
		return rows
	})
	if formatted > 0 {
		// Outside the cache's lock, as encodings are charged.
		b.grow(formatted)
	}
	return rows, nil
}

// list returns the rows of the batch for a subscriber that takes it whole
// (formatter.Batcher.Whole): rows is b.rows's for the same key, listed
// with their progress rows once per output key, every row shared
// (formatter.Shared).
func (b *batch) list(key string, opts *formatter.Options, rows []formatter.TimeRows) []formatter.Row {
	var listed int64
	l := b.lists.get(key, func() []formatter.Row {
		l := opts.BatchRows(rows, b.upper)
		listed = int64(unsafe.Sizeof(formatter.Row{})) * int64(cap(l))
		// Its progress rows are shared too, as the rows are: encoded once
		// per wire format, not once per subscriber (a text progress row's
		// timestamp formatted, a string allocated, for each).
		for i := range l {
			if l[i].Progressed {
				formatter.SharedCharged(l[i:i+1:i+1], b.grow)
				listed += rowGroupBytes
			}
		}
		return l
	})
	if listed > 0 {
		b.grow(listed) // outside the cache's lock, as in rows
	}
	return l
}

// progressKey is the key of opts's progress rows in batch.progress, ""
// without PROGRESS: a progress row is NULL but for its timestamp and
// mz_progressed, so subscribers of any shape with as many output columns
// share one, and its encodings (the Wire's key adds the format).
func progressKey(opts *formatter.Options) string {
	if !opts.Progress {
		return ""
	}
	return strconv.Itoa(len(opts.Columns()))
}

// progressRow returns the progress row at b's upper for subscribers whose
// output has progressKey key, as a one-row slice shared by them all: a
// sweep hands a batch to thousands of routed subscribers that take only
// this row from it, and each then sends the same bytes, encoded once.
func (b *batch) progressRow(key string, opts *formatter.Options) []formatter.Row {
	var made int64
	rows := b.progress.get(key, func() []formatter.Row {
		rows := formatter.SharedCharged([]formatter.Row{opts.ProgressRow(b.upper)}, b.grow)
		made = formattedSize([]formatter.TimeRows{{Rows: rows}})
		return rows
	})
	if made > 0 {
		b.grow(made) // outside the cache's lock, as in rows
	}
	return rows
}

// grow counts n more bytes computed from b (batch.extra).
func (b *batch) grow(n int64) { b.t.grow(b, n) }

// rowGroupBytes estimates what a group of shared rows costs besides its
// rows: its TimeRows and the row group that holds its encodings.
const rowGroupBytes = int64(unsafe.Sizeof(formatter.TimeRows{})) + 64

// formattedSize estimates the bytes of formatted rows besides the values
// they share with the updates: the rows, their columns' slices of datums,
// and a row group per time.
func formattedSize(groups []formatter.TimeRows) int64 {
	const datum = 16
	n := rowGroupBytes * int64(len(groups))
	for _, g := range groups {
		n += int64(unsafe.Sizeof(formatter.Row{})) * int64(cap(g.Rows))
		for _, r := range g.Rows {
			n += datum * int64(len(r.Tail))
		}
	}
	return n
}

// runKey names a list of several batches taken at once, kept by the last
// of them: the subscribers' output and progress keys, and the lower of
// the first batch. The batches are contiguous (each one's lower the
// previous one's upper), and the tail's (or a catch-up's) are one chain,
// so the last batch and the first lower name them all.
type runKey struct {
	out, progress string
	lower         uint64
}

// runCache is a batch's lists of several batches (batch.run).
type runCache struct {
	mu    sync.Mutex
	lists map[runKey][]formatter.Row // mu
}

// Bounds of what run shares: a list of batches of at most maxRunBytes
// (the rows of earlier batches a list keeps alive with this one), and at
// most maxRuns lists per batch. Past them a subscriber builds its own.
const (
	maxRunBytes = 16 << 10
	maxRuns     = 32
)

// run returns the list of several contiguous batches, this one last, that
// a subscriber made of pieces (each batch's shared rows, as one delivery
// of it alone takes them), shared by every subscriber of the output shape
// that takes the same batches: at 10,000 subscribers most fall a few
// batches behind and take them at once, each a list of its own otherwise
// (the bytes allocated per delivered row). Subscribers woken about
// together take the same batches, as they were last served about
// together. bytes is the batches' (batch.bytes). The list is full (len ==
// cap): no one appending to it writes into a list others share.
func (b *batch) run(key runKey, bytes int64, pieces [][]formatter.Row) []formatter.Row {
	if bytes > maxRunBytes {
		return slices.Concat(pieces...)
	}
	b.runs.mu.Lock()
	l, ok := b.runs.lists[key]
	if !ok && len(b.runs.lists) < maxRuns {
		l = slices.Clip(slices.Concat(pieces...))
		if b.runs.lists == nil {
			b.runs.lists = map[runKey][]formatter.Row{}
		}
		b.runs.lists[key] = l
		b.runs.mu.Unlock()
		// Outside the cache's lock, as in rows.
		b.grow(int64(unsafe.Sizeof(formatter.Row{}))*int64(cap(l)) + runEntryBytes)
		return l
	}
	b.runs.mu.Unlock()
	if !ok {
		return slices.Concat(pieces...)
	}
	return l
}

// runEntryBytes estimates a run's entry in its batch's map besides its
// list: the key, whose strings the subscribers' keys share, and the
// slice header.
const runEntryBytes = int64(unsafe.Sizeof(runKey{})) + 24
