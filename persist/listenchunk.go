package persist

import (
	"container/heap"
	"context"
	"slices"

	"github.com/shardtail/shardtail/persist/codec"
	"github.com/shardtail/shardtail/row"
)

// A listen that is behind compaction reads a merged batch of many times,
// stored in (row, time) order: the updates of its first times are spread
// over every part of the batch. Decoding the batch whole to hand it out in
// time order held all of it at once — a few hundred detached subscribers
// resuming over an hour of history decoded gigabytes. So a listen reads
// such a batch in passes: each pass streams the whole batch (one decoded
// record batch per run at a time) and keeps only its first times, as many
// as fit in Config.ListenChunkBytes (at least one). A pass costs a read of
// the batch; the memory it holds is bounded by the chunk, whatever the
// batch's size. The next call's pass starts at the first time this one
// did not keep, found again in the state then current, so nothing is held
// between calls (not even the batch: it may be compacted meanwhile).

// chunkPass selects, from a batch's updates streamed in (row, time)
// order, those with times in [lower, cut), lowering cut whenever they pass
// limit: a bounded buffer of the smallest times seen.
type chunkPass struct {
	lower, cut uint64
	limit      int64

	buf []row.Update
	// byTime is the bytes kept per time (times < cut only); times is a
	// max-heap of its keys, so the largest time is dropped first. last is
	// byTime's entry of lastT: a batch of one time (a write's, the usual
	// case) costs no map lookup per update.
	byTime map[uint64]*int64
	times  timeHeap
	lastT  uint64
	last   *int64
	// live is the bytes of buf's updates below cut, dead of those at or
	// above it (dropped, filtered out of buf lazily).
	live, dead int64
	// Kept rows share their record batch's slabs (codec.PartReader.Next):
	// a row kept from a record batch the pass mostly skipped would keep
	// the whole record batch alive. So once the updates read since mark
	// (kept or skipped: scanned) pass window bytes, the ones kept since
	// are cloned if any was skipped meanwhile (a batch read in full, the
	// usual case, never is).
	mark    int
	scanned int64
	skipped bool
	// peak is the most bytes buf held (for tests).
	peak int64
}

// window is how many bytes a pass reads between clones: a quarter of the
// limit, so that rows pinning slabs they mostly do not use hold at most
// that much more.
func (p *chunkPass) window() int64 { return max(p.limit/4, 64<<10) }

// keep is the pass's timeFunc: times below lower or at or above cut are
// skipped.
func (p *chunkPass) keep(t uint64) (uint64, bool) {
	return t, t >= p.lower && t < p.cut
}

// skip counts an update keep skipped, and clones the window's kept rows
// once it read window bytes: they would pin the slabs of what it skipped.
func (p *chunkPass) skip(u row.Update) {
	p.scanned += u.Size()
	p.skipped = true
	if p.scanned >= p.window() {
		p.compact(true)
	}
}

// add keeps u (its time is in [lower, cut)) and lowers cut while the kept
// bytes pass the limit and more than one time is kept.
func (p *chunkPass) add(u row.Update) {
	if u.T >= p.cut {
		// Kept by keep before cut was lowered within a consolidation.
		return
	}
	n := u.Size()
	p.buf = append(p.buf, u)
	p.scanned += n
	if p.last == nil || u.T != p.lastT {
		p.lastT, p.last = u.T, p.byTime[u.T]
		if p.last == nil {
			p.last = new(int64)
			p.byTime[u.T] = p.last
			heap.Push(&p.times, u.T)
		}
	}
	*p.last += n
	p.live += n
	for p.live > p.limit && p.times.Len() > 1 {
		t := heap.Pop(&p.times).(uint64)
		p.live -= *p.byTime[t]
		p.dead += *p.byTime[t]
		delete(p.byTime, t)
		p.cut = t
		if t == p.lastT {
			p.last = nil
		}
	}
	p.peak = max(p.peak, p.live+p.dead)
	switch {
	case p.dead > p.live:
		p.compact(true)
	case p.scanned >= p.window():
		p.compact(p.skipped)
	}
}

// compact filters the dropped updates out of buf and, with clone, clones
// the kept ones not cloned yet, so that they keep no skipped row's slabs
// alive; it starts a new window. After a drop every survivor is cloned:
// one read in full may pin the slabs of what was dropped.
func (p *chunkPass) compact(clone bool) {
	from := p.mark
	if p.dead > 0 {
		p.buf = slices.DeleteFunc(p.buf, func(u row.Update) bool { return u.T >= p.cut })
		p.dead, from, clone = 0, 0, true
	}
	if clone {
		for i := from; i < len(p.buf); i++ {
			p.buf[i] = codec.CloneUpdate(p.buf[i])
		}
	}
	p.mark, p.scanned, p.skipped = len(p.buf), 0, false
}

// readChunk reads runs (a batch's, wholly at or after lower's batch) in
// one pass, returning the updates with times in [lower, upper) up to
// limit bytes (whole times, at least one), consolidated in (time, row)
// order, and the first time it did not return (upper if none).
func (r *Reader) readChunk(ctx context.Context, schema row.Schema, runs []*Batch, lower, upper uint64, limit int64) ([]row.Update, uint64, int64, error) {
	p := &chunkPass{lower: lower, cut: upper, limit: limit, byTime: map[uint64]*int64{}}
	it := newMergeIter(r.c, schema, runs, p.keep)
	defer it.close()
	for _, run := range it.all {
		run.skipped = p.skip
	}
	for {
		u, ok, err := it.next(ctx)
		if err != nil {
			return nil, 0, p.peak, err
		}
		if !ok {
			break
		}
		p.add(u)
	}
	p.compact(p.skipped)
	slices.SortStableFunc(p.buf, func(a, b row.Update) int {
		switch {
		case a.T < b.T:
			return -1
		case a.T > b.T:
			return 1
		}
		return 0
	})
	return p.buf, p.cut, p.peak, nil
}

// timeHeap is a max-heap of times.
type timeHeap []uint64

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(uint64)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
