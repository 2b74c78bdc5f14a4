package formatter

import "sync"

// RowCache holds one shared row's encoded messages, one per wire format, so
// that thousands of subscribers of the same row write the same bytes.
type RowCache struct {
	mu      sync.Mutex
	entries []cacheEntry // mu; usually one or two
}

type cacheEntry struct {
	key string
	msg []byte
}

func (c *RowCache) get(key string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.key == key {
			return e.msg
		}
	}
	return nil
}

func (c *RowCache) put(key string, msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = append(c.entries, cacheEntry{key: key, msg: msg})
}

// Shared marks rows as shared between subscribers: their encodings are
// cached on first use. It modifies rows in place and returns them.
func Shared(rows []Row) []Row {
	caches := make([]RowCache, len(rows))
	for i := range rows {
		rows[i].cache = &caches[i]
	}
	return rows
}

// Wire is one wire encoding of output rows: DataRow messages in some result
// formats (Encoder) or CopyData messages in a COPY format (CopyEncoder).
type Wire interface {
	// Key identifies the encoding among a shape's encodings.
	Key() string
	// AppendMessage appends r's complete message to buf.
	AppendMessage(buf []byte, r Row) []byte
}

// Messages encodes rows with w and returns one complete message per row.
// Rows marked Shared are encoded once per wire format and their cached
// bytes returned as they are (callers must not modify them); other rows
// are encoded into *buf, which is reused.
func Messages(w Wire, rows []Row, buf *[]byte) [][]byte {
	key := w.Key()
	msgs := make([][]byte, len(rows))
	b := (*buf)[:0]
	type span struct{ i, start, end int }
	var spans []span
	for i, r := range rows {
		if r.cache != nil {
			if m := r.cache.get(key); m != nil {
				msgs[i] = m
				continue
			}
			m := w.AppendMessage(nil, r)
			r.cache.put(key, m)
			msgs[i] = m
			continue
		}
		start := len(b)
		b = w.AppendMessage(b, r)
		spans = append(spans, span{i, start, len(b)})
	}
	for _, s := range spans {
		msgs[s.i] = b[s.start:s.end:s.end]
	}
	*buf = b
	return msgs
}
