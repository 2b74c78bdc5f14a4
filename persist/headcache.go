package persist

import (
	"container/list"
	"sync"

	"github.com/shardtail/shardtail/row"
)

// headCache keeps the first record batch of recently read parts, decoded to
// columns, so that a snapshot cursor passing a part through (see
// passThrough) yields its first rows without fetching, mapping and opening
// the part: a FETCH 10 or a COPY's first row on a new cursor waited for
// all three (about a third of its time on a file blob, more on S3). The
// part is opened when the cursor needs its second batch.
//
// A part is immutable under its key, so an entry is valid as long as
// anything can name the part; a deleted part's entry ages out. The columns
// are owned memory that nothing writes (row.Columns is read in place by
// the encoders and sliced, never modified), shared by every cursor that
// hits. Entries are a part's first batch only, which codec keeps short
// (256 rows): the cache holds the heads of many parts in little memory.
// Its bytes are charged to Config.Memory.
type headCache struct {
	c     *Client
	limit int64

	mu    sync.Mutex
	bytes int64                    // mu
	lru   *list.List               // mu: of *headEntry, most recent first
	byKey map[string]*list.Element // mu
}

// headEntry is one part's first record batch.
type headEntry struct {
	key string
	// cols is the batch, at the part's one time (cols.T).
	cols *row.Columns
	// batches is the part's number of record batches: a part of one needs
	// no opening once its head is taken.
	batches int
	size    int64
}

func newHeadCache(c *Client, limit int64) *headCache {
	return &headCache{c: c, limit: limit, lru: list.New(), byKey: map[string]*list.Element{}}
}

// get returns key's head, if cached.
func (h *headCache) get(key string) (*headEntry, bool) {
	if h == nil || h.limit <= 0 {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.byKey[key]
	if !ok {
		h.c.metrics.headCache.WithLabelValues("miss").Inc()
		return nil, false
	}
	h.lru.MoveToFront(e)
	h.c.metrics.headCache.WithLabelValues("hit").Inc()
	return e.Value.(*headEntry), true
}

// put caches key's first batch, evicting the least recently used heads
// beyond the limit. A batch larger than a quarter of the limit is not
// kept.
func (h *headCache) put(key string, cols *row.Columns, batches int) {
	if h == nil || h.limit <= 0 {
		return
	}
	size := cols.Size() + int64(len(key))
	if size > h.limit/4 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.byKey[key]; ok {
		return
	}
	h.byKey[key] = h.lru.PushFront(&headEntry{key: key, cols: cols, batches: batches, size: size})
	h.bytes += size
	held := size
	for h.bytes > h.limit {
		old := h.lru.Remove(h.lru.Back()).(*headEntry)
		delete(h.byKey, old.key)
		h.bytes -= old.size
		held -= old.size
	}
	h.c.charge(held)
}

// drop empties the cache (Client.Close).
func (h *headCache) drop() {
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
