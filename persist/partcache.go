package persist

import (
	"container/list"
	"sync"

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
// parts where it cannot hold them whole). Its bytes are charged to
// Config.Memory.
type partCache struct {
	c     *Client
	limit int64

	mu    sync.Mutex
	bytes int64                    // mu
	lru   *list.List               // mu: of *partEntry, most recent first
	byKey map[string]*list.Element // mu
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

func newPartCache(c *Client, limit int64) *partCache {
	return &partCache{c: c, limit: limit, lru: list.New(), byKey: map[string]*list.Element{}}
}

// maxEntry is the most bytes one entry may take.
func (h *partCache) maxEntry() int64 { return h.limit / 8 }

// get returns key's entry, if cached.
func (h *partCache) get(key string) (*partEntry, bool) {
	if h == nil || h.limit <= 0 {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	el, ok := h.byKey[key]
	if !ok {
		h.c.metrics.partCache.WithLabelValues("miss").Inc()
		return nil, false
	}
	h.lru.MoveToFront(el)
	e := el.Value.(*partEntry)
	result := "head"
	if e.whole() {
		result = "whole"
	}
	h.c.metrics.partCache.WithLabelValues(result).Inc()
	return e, true
}

// put caches cols, the first batches of key's part of the given number
// of batches: the first alone, or all of them. A whole part replaces its
// first batch; a first batch does not replace a whole part. The least
// recently used entries beyond the limit are evicted; cols over
// maxEntry are not kept.
func (h *partCache) put(key string, cols []*row.Columns, batches int) {
	if h == nil || h.limit <= 0 {
		return
	}
	size := int64(len(key))
	for _, c := range cols {
		size += c.Size()
	}
	if size > h.maxEntry() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	held := size
	if old, ok := h.byKey[key]; ok {
		e := old.Value.(*partEntry)
		if e.whole() || len(cols) < batches {
			return
		}
		h.lru.Remove(old)
		h.bytes -= e.size
		held -= e.size
	}
	h.byKey[key] = h.lru.PushFront(&partEntry{key: key, cols: cols, batches: batches, size: size})
	h.bytes += size
	for h.bytes > h.limit {
		old := h.lru.Remove(h.lru.Back()).(*partEntry)
		delete(h.byKey, old.key)
		h.bytes -= old.size
		held -= old.size
	}
	h.c.charge(held)
}

// drop empties the cache (Client.Close).
func (h *partCache) drop() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.c.charge(-h.bytes)
	h.bytes = 0
	h.lru.Init()
	clear(h.byKey)
}
