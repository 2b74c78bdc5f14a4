package persist

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/shardtail/shardtail/persist/codec"
	"github.com/shardtail/shardtail/row"
)

// timeFunc maps an update's time on read: it returns the time to emit and
// whether to keep the update. It must be monotone (t1 <= t2 implies
// f(t1) <= f(t2)) so that a run sorted by (row, t) stays sorted.
type timeFunc func(t uint64) (uint64, bool)

// snapshotTimes advances every time to asOf and drops times after it.
func snapshotTimes(asOf uint64) timeFunc {
	return func(t uint64) (uint64, bool) { return asOf, t <= asOf }
}

// compactionTimes advances times below since to since.
func compactionTimes(since uint64) timeFunc {
	return func(t uint64) (uint64, bool) { return max(t, since), true }
}

// runIter streams one run (a batch's parts, in order), fetching each part
// only when the merge reaches it and decoding it one record batch at a time.
type runIter struct {
	c      *Client
	schema row.Schema
	parts  []Part
	times  timeFunc
	// skipped, if set, sees each update times drops (a listen's chunk
	// pass counts what it read).
	skipped func(row.Update)
	next    int // index of the next part to fetch
	reader  *codec.PartReader
	// release gives back the current part's bytes (Client.lendPart) once
	// reader is done with them.
	release func()
	// rewrite is the current part's TsRewrite.
	rewrite *uint64
	buf     []row.Update
	pos     int
	head    row.Update // current update, after times
	done    bool
	// cols is the record batch nextColumns is passing through, and
	// colPos the number of its rows passed.
	cols   *row.Columns
	colPos int
	// cached is set while cols come from the current part's entry in the
	// part cache (Client.parts), cachedNext the index of the next of its
	// batches: the part is not open. first is set while the open reader's
	// next batch is its part's first.
	cached     *partEntry
	cachedNext int
	first      bool
	// fill collects the batches of the part the reader is reading from
	// its first, while they fit in a cache entry, for the part cache once
	// the reader is done; fillSize is what the cache counts for them
	// (partCache.hold).
	fill     []*row.Columns
	fillSize int64
}

// advance moves to the next kept update.
func (r *runIter) advance(ctx context.Context) error {
	for {
		for r.pos < len(r.buf) {
			u := r.buf[r.pos]
			r.pos++
			if r.rewrite != nil {
				u.T = *r.rewrite
			}
			if t, ok := r.times(u.T); ok {
				u.T = t
				r.head = u
				return nil
			}
			if r.skipped != nil {
				r.skipped(u)
			}
		}
		if r.reader != nil {
			// The merge copies each head out of buf, so the next batch
			// decodes into the same slice rather than a new one.
			buf, err := r.reader.AppendNext(r.buf[:0])
			if err == nil {
				r.buf, r.pos = buf, 0
				continue
			}
			// The reader's own io.EOF, not one wrapped in a decode
			// failure: that would end the part early, without its rest.
			if err != io.EOF {
				return partDecodeError(r.parts[r.next-1].Key, err)
			}
			r.drop()
		}
		if r.next >= len(r.parts) {
			r.done = true
			r.buf = nil
			return nil
		}
		if err := r.open(ctx); err != nil {
			return err
		}
	}
}

// open opens the run's next part.
func (r *runIter) open(ctx context.Context) error {
	p := r.parts[r.next]
	r.next++
	r.rewrite = p.TsRewrite
	return r.openPart(ctx, p)
}

// openPart opens part p for reading from its first batch.
func (r *runIter) openPart(ctx context.Context, p Part) error {
	data, release, err := r.c.lendPart(ctx, p.Key)
	if err != nil {
		return err
	}
	r.release = release
	if r.reader, err = codec.NewPartReader(r.schema, data); err != nil {
		r.drop()
		return partDecodeError(p.Key, err)
	}
	r.first = true
	return nil
}

// nextColumns returns the run's next rows as they are, at most max of
// them and never past the end of a record batch, or nil after the last.
// The run must be all at one time (see passThrough): the columns' T is
// left for the caller to set. It is the run's only reader: a run read
// with nextColumns is not read with advance.
func (r *runIter) nextColumns(ctx context.Context, max int) (*row.Columns, error) {
	for r.cols == nil || r.colPos == r.cols.Len {
		r.cols = nil
		if e := r.cached; e != nil {
			if r.cachedNext < len(e.cols) {
				r.cols, r.colPos = e.cols[r.cachedNext], 0
				r.cachedNext++
				continue
			}
			// The part's first batch came from the cache: its rest, if
			// any, from the part.
			r.cached = nil
			if !e.whole() {
				p := r.parts[r.next-1]
				if err := r.openPart(ctx, p); err != nil {
					return nil, err
				}
				last := e.cols[len(e.cols)-1]
				if err := r.reader.SkipBatch(row.Update{Row: last.Row(last.Off + last.Len - 1), T: last.T}); err != nil {
					return nil, partDecodeError(p.Key, err)
				}
				// The rest joins the cached head, so that a part first
				// read by a FETCH 10 (its head alone) is cached whole
				// once a cursor reads it all.
				r.first = false
				if r.c.parts.hold(e.size) {
					r.fill, r.fillSize = slices.Clone(e.cols), e.size
				}
			}
		}
		if r.reader != nil {
			cols, err := r.reader.NextColumns()
			first := r.first
			r.first = false
			p := r.parts[r.next-1]
			if err == nil && cols.T != p.MinT {
				err = fmt.Errorf("%w: update at time %d in a part at %d", codec.ErrCorrupt, cols.T, p.MinT)
			}
			if err == nil {
				r.collect(p.Key, cols, first)
				r.cols, r.colPos = cols, 0
				continue
			}
			// The reader's own io.EOF only, as in advance. A part that
			// failed is never cached, whatever a caller does next.
			if err != io.EOF {
				r.giveUpFill()
				return nil, partDecodeError(p.Key, err)
			}
			if r.fill != nil {
				r.c.parts.put(p.Key, r.fill, len(r.fill), r.fillSize)
				r.fill, r.fillSize = nil, 0
			}
			r.drop()
		}
		if r.next >= len(r.parts) {
			r.done = true
			return nil, nil
		}
		if p := r.parts[r.next]; p.TsRewrite == nil {
			if e, ok := r.c.parts.get(p.Key); ok && e.T() == p.MinT {
				r.next++
				r.cached, r.cachedNext = e, 0
				continue
			}
		}
		if err := r.open(ctx); err != nil {
			return nil, err
		}
	}
	k := min(max, r.cols.Len-r.colPos)
	out := r.cols.Slice(r.colPos, r.colPos+k)
	r.colPos += k
	return out, nil
}

// collect keeps cols, the open part's next batch, for the part cache: the
// first batch at once, and all of them once the part is read, if they fit
// in an entry and the cache holds them meanwhile.
func (r *runIter) collect(key string, cols *row.Columns, first bool) {
	if first {
		r.c.parts.put(key, []*row.Columns{cols}, r.reader.NumBatches(), 0)
		r.giveUpFill()
		if r.reader.NumBatches() == 1 {
			return // the head is the whole part
		}
	} else if r.fill == nil {
		return // not read from its first batch, or given up
	}
	n := cols.Size()
	if first {
		n += int64(len(key)) // as the entry will count it
	}
	if r.fillSize+n > r.c.parts.maxEntry() || !r.c.parts.hold(n) {
		r.giveUpFill()
		return
	}
	r.fill = append(r.fill, cols)
	r.fillSize += n
}

// giveUpFill lets go of the batches collected for the part cache.
func (r *runIter) giveUpFill() {
	r.c.parts.release(r.fillSize)
	r.fill, r.fillSize = nil, 0
}

// drop lets go of the current part: its reader, and its bytes if lent.
func (r *runIter) drop() {
	r.giveUpFill()
	r.reader = nil
	if r.release != nil {
		r.release()
		r.release = nil
	}
}

// lendPart reads a part from blob as fetchPart does, but without copying
// it when the blob can lend it (BlobLender). release must be called once
// the part's reader is done; decoded updates never alias the bytes.
func (c *Client) lendPart(ctx context.Context, key string) (data []byte, release func(), err error) {
	l, ok := c.blob.(BlobLender)
	if !ok {
		data, err := c.fetchPart(ctx, key)
		return data, func() {}, err
	}
	data, release, err = l.Lend(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, &PartError{Key: key, Err: ErrNotFound}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("fetch part %s: %w", key, err)
	}
	c.metrics.partsFetched.Inc()
	return data, release, nil
}

// fetchPart reads a part from blob. A missing part is corruption: state
// references it, and GC never deletes what a live version references;
// only finalization of a dropped shard does (readers check for it).
func (c *Client) fetchPart(ctx context.Context, key string) ([]byte, error) {
	data, err := c.blob.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil, &PartError{Key: key, Err: ErrNotFound}
	}
	if err != nil {
		return nil, fmt.Errorf("fetch part %s: %w", key, err)
	}
	c.metrics.partsFetched.Inc()
	return data, nil
}

// partDecodeError classifies a decoder's error: a corrupt part is a
// *PartError; a part over the decoder's limits is not corruption.
func partDecodeError(key string, err error) error {
	if errors.Is(err, codec.ErrCorrupt) || errors.Is(err, codec.ErrUnsupportedVersion) || errors.Is(err, codec.ErrSchemaMismatch) {
		return &PartError{Key: key, Err: err}
	}
	return fmt.Errorf("decode part %s: %w", key, err)
}

// mergeIter is a consolidating k-way merge over runs: it yields updates in
// (row, time) order, with the times mapped by a timeFunc, equal (row, time)
// pairs summed across and within runs, and zero sums dropped.
type mergeIter struct {
	runs runHeap
	init bool
	all  []*runIter
}

func newMergeIter(c *Client, schema row.Schema, batches []*Batch, times timeFunc) *mergeIter {
	m := &mergeIter{}
	for _, b := range batches {
		for _, run := range b.Runs() {
			m.all = append(m.all, &runIter{c: c, schema: schema, parts: run, times: times})
		}
	}
	return m
}

// close lets go of the parts the runs are reading (lent bytes, see
// Client.lendPart). The iterator must not be used afterwards; close is
// idempotent.
func (m *mergeIter) close() {
	for _, r := range m.all {
		r.drop()
	}
}

// next returns the next consolidated update; ok is false once every run is
// done. The end is not an error: a part read that fails with an error
// wrapping io.EOF (an HTTP GET whose connection closed before the
// response: `Get "...": EOF`) must not read as the end of the data, or a
// listen steps past a batch it did not read, a snapshot ends early and a
// compaction replaces its inputs with what it read before the failure.
func (m *mergeIter) next(ctx context.Context) (u row.Update, ok bool, err error) {
	if !m.init {
		m.init = true
		for _, r := range m.all {
			if err := r.advance(ctx); err != nil {
				return row.Update{}, false, err
			}
			if !r.done {
				m.runs = append(m.runs, r)
			}
		}
		heap.Init(&m.runs)
	}
	for len(m.runs) > 0 {
		top := m.runs[0]
		out := top.head
		if err := m.pop(ctx); err != nil {
			return row.Update{}, false, err
		}
		for len(m.runs) > 0 {
			h := m.runs[0].head
			if h.T != out.T || !row.Equal(h.Row, out.Row) {
				break
			}
			out.Diff += h.Diff
			if err := m.pop(ctx); err != nil {
				return row.Update{}, false, err
			}
		}
		if out.Diff != 0 {
			return out, true, nil
		}
	}
	return row.Update{}, false, nil
}

// pop advances the top run and restores the heap.
func (m *mergeIter) pop(ctx context.Context) error {
	top := m.runs[0]
	if err := top.advance(ctx); err != nil {
		return err
	}
	if top.done {
		heap.Pop(&m.runs)
	} else {
		heap.Fix(&m.runs, 0)
	}
	return nil
}

type runHeap []*runIter

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return row.CompareUpdate(h[i].head, h[j].head) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*runIter)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
