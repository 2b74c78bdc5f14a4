package persist

import (
	"container/list"
	"sync"

	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/row"
)

// partCache keeps recently read parts decoded to columns: the whole part
// when it is small enough, else its first record batch. A snapshot cursor
// passing a part through (see passThrough) reads a whole cached part
// without fetching, decompressing or checking it again, as PostgreSQL
// reads a table from shared buffers: on a hot collection read after read,
// that was most of a snapshot's CPU (zstd alone, a quarter). With only the
// first batch cached, the cursor yields the part's first rows at once and
// opens the part for its second batch: a FETCH 10 or a COPY's first row on
// a new cursor does not wait for a fetch, a map and an open.
//
// A part is immutable under its key, so an entry is valid as long as
// anything can name the part; a deleted part's entry ages out. The columns
// are owned memory that nothing writes (row.Columns is read in place by
// the encoders and sliced, never modified), shared by every cursor that
// hits. An entry is at most an eighth of the limit (a first batch, which
// codec keeps short, nearly always fits: the cache holds the heads of many
// parts where it cannot hold them whole).
//
// The limit bounds the entries and the fills together: the batches the
// cursors reading parts from their first batch collect for an entry (hold),
// which would otherwise be up to an eighth of the limit per cursor that no
// one counts. Both are charged to mem as they grow (a part's first batch
// twice while a fill holds it too). Under a memory budget, the cache is
// the first thing the policy empties (membudget.StageCache: its least
// recently used entries go while the budget is over), and while the budget
// is over it does not grow: a new entry or a fill's batch evicts at least
// as much first, or is not kept. What it holds only saves work, where the
// other holders hold what clients wait for. Fills in progress stay until
// their part ends (their cursors own them), each at most an eighth of the
// limit. The cache does not call Enforce itself (a snapshot read would
// then run the policy's stages): growing while the budget is under, it may
// take the total over by one entry until the next holder's enforcement.
type partCache struct {
	limit   int64
	mem     *membudget.Holder
	budget  *membudget.Budget // nil: none
	metrics *Metrics
	// removeStage takes the cache's stage out of the budget's policy.
	removeStage func()

	mu     sync.Mutex
	bytes  int64                    // mu: the entries' and the fills' (what mem is charged)
	lru    *list.List               // mu: of *partEntry, most recent first
	byKey  map[string]*list.Element // mu
	closed bool                     // mu: dropped; nothing new is kept
}

// partEntry is one part's record batches: all of them (whole), or the
// first.
type partEntry struct {
	key string
	// cols are the batches, at the part's one time (cols[0].T): one or
	// all of them.
	cols []*row.Columns
	// batches is the part's number of record batches.
	batches int
	size    int64
}

// whole reports whether the entry holds every batch of its part.
func (e *partEntry) whole() bool { return len(e.cols) == e.batches }

// T is the time of the entry's rows.
func (e *partEntry) T() uint64 { return e.cols[0].T }

// newPartCache returns a cache of limit bytes (none when limit <= 0)
// charged to mem, and the first stage of budget's policy.
func newPartCache(limit int64, mem *membudget.Holder, budget *membudget.Budget, m *Metrics) *partCache {
	h := &partCache{limit: limit, mem: mem, budget: budget, metrics: m, lru: list.New(), byKey: map[string]*list.Element{}, removeStage: func() {}}
	if limit > 0 {
		h.removeStage = budget.AddStage(membudget.StageCache, h.shed)
	}
	return h
}

// maxEntry is the most bytes one entry may take.
func (h *partCache) maxEntry() int64 { return h.limit / 8 }

// get returns key's entry, if cached.
func (h *partCache) get(key string) (*partEntry, bool) {
	if h.limit <= 0 {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	el, ok := h.byKey[key]
	if !ok {
		h.metrics.partCache.WithLabelValues("miss").Inc()
		return nil, false
	}
	h.lru.MoveToFront(el)
	e := el.Value.(*partEntry)
	result := "head"
	if e.whole() {
		result = "whole"
	}
	h.metrics.partCache.WithLabelValues(result).Inc()
	return e, true
}

// hold counts n more bytes of a fill, making room for them, and reports
// whether they fit; when they do not, it counts nothing and the caller
// gives the fill up (release).
func (h *partCache) hold(n int64) bool {
	if h.limit <= 0 {
		return false
	}
	h.mu.Lock()
	ok := h.room(n, h.bytes)
	if ok {
		h.add(n)
	}
	h.mu.Unlock()
	return ok
}

// release gives back n bytes a fill held (hold): given up, or made an
// entry (put).
func (h *partCache) release(n int64) {
	if n == 0 {
		return
	}
	h.mu.Lock()
	h.add(-n)
	h.mu.Unlock()
}

// put caches cols, the first batches of key's part of the given number
// of batches: the first alone, or all of them. held is what the fill that
// collected them holds (hold), 0 for a first batch: the entry takes its
// place. A whole part replaces its first batch; a first batch does not
// replace a whole part. The least recently used entries are evicted to
// make room; cols over maxEntry, or while the budget is over, are not
// kept.
func (h *partCache) put(key string, cols []*row.Columns, batches int, held int64) {
	if h.limit <= 0 {
		return
	}
	size := int64(len(key))
	for _, c := range cols {
		size += c.Size()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	floor := h.bytes // a fill becoming an entry does not grow the cache
	h.add(-held)
	old, ok := h.byKey[key]
	if ok && (old.Value.(*partEntry).whole() || len(cols) < batches) {
		return
	}
	if size > h.maxEntry() || h.closed {
		return // the head, if any, stays
	}
	if ok {
		h.remove(old)
	}
	if !h.room(size, floor) {
		return
	}
	h.byKey[key] = h.lru.PushFront(&partEntry{key: key, cols: cols, batches: batches, size: size})
	h.add(size)
}

// room evicts the least recently used entries until n more bytes fit in
// the limit and, while the budget is over, until the cache with them holds
// no more than floor (what it held before: over the budget it may replace
// what it holds, not grow), and reports whether they fit: not when n is
// over maxEntry or the cache is dropped. h.mu must be held.
func (h *partCache) room(n, floor int64) bool {
	if n > h.maxEntry() || h.closed {
		return false
	}
	over := h.budget.Over()
	fits := func() bool { return h.bytes+n <= h.limit && (!over || h.bytes+n <= floor) }
	for !fits() && h.lru.Len() > 0 {
		h.remove(h.lru.Back())
	}
	return fits()
}

// remove evicts an entry. h.mu must be held.
func (h *partCache) remove(el *list.Element) {
	e := h.lru.Remove(el).(*partEntry)
	delete(h.byKey, e.key)
	h.add(-e.size)
}

// add counts n bytes (negative: given back). h.mu must be held.
func (h *partCache) add(n int64) {
	h.bytes += n
	h.mem.Add(n)
}

// shed is the cache's stage of the budget's policy (StageCache): it
// evicts the least recently used entries while the budget is over.
func (h *partCache) shed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.lru.Len() > 0 && h.budget.Over() {
		h.remove(h.lru.Back())
	}
}

// drop empties the cache for good (Client.Close): entries put after it
// are not kept. A fill still held is given back by its cursor's Close.
func (h *partCache) drop() {
	h.removeStage()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for h.lru.Len() > 0 {
		h.remove(h.lru.Back())
	}
}
