package persist

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"

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
			if !errors.Is(err, io.EOF) {
				return partDecodeError(r.parts[r.next-1].Key, err)
			}
			r.drop()
		}
		if r.next >= len(r.parts) {
			r.done = true
			r.buf = nil
			return nil
		}
		p := r.parts[r.next]
		r.next++
		r.rewrite = p.TsRewrite
		data, release, err := r.c.lendPart(ctx, p.Key)
		if err != nil {
			return err
		}
		r.release = release
		if r.reader, err = codec.NewPartReader(r.schema, data); err != nil {
			r.drop()
			return partDecodeError(p.Key, err)
		}
	}
}

// drop lets go of the current part: its reader, and its bytes if lent.
func (r *runIter) drop() {
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

// next returns the next consolidated update, or io.EOF.
func (m *mergeIter) next(ctx context.Context) (row.Update, error) {
	if !m.init {
		m.init = true
		for _, r := range m.all {
			if err := r.advance(ctx); err != nil {
				return row.Update{}, err
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
			return row.Update{}, err
		}
		for len(m.runs) > 0 {
			h := m.runs[0].head
			if h.T != out.T || !row.Equal(h.Row, out.Row) {
				break
			}
			out.Diff += h.Diff
			if err := m.pop(ctx); err != nil {
				return row.Update{}, err
			}
		}
		if out.Diff != 0 {
			return out, nil
		}
	}
	return row.Update{}, io.EOF
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
