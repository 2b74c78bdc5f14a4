package formatter

import (
	"slices"
	"sync"

	"github.com/shardtail/shardtail/row"
)

// rowGroup is a slice of rows shared by many subscribers (a snapshot piece
// or the rows of one time in a listen batch) and their encoded messages,
// one slice per wire format, computed once on first use.
type rowGroup struct {
	rows []Row
	// updates, when set, are what the rows of plain output stand for
	// (Options.SnapshotRows): row i is a data row whose tail is mz_diff
	// then updates[i].Row, read from there rather than copied into Tail.
	updates []row.Update
	// cols, when set, are what the rows stand for instead of updates
	// (Options.SnapshotColumns): row i is a data row of mz_diff then row
	// Off+i of the columns, encoded from them in place. decode returns
	// them as updates, for what reads datums (CSV, Row.Columns): the
	// first such read sets updates, once (decodeOnce).
	cols       *row.Columns
	decode     func() []row.Update
	decodeOnce sync.Once
	mu         sync.Mutex
	entries    []*groupEntry // mu; usually one or two
	// derived are encodings derived from an entry's messages (Derived),
	// such as a transport's compressed form of them.
	derived []*derivedEntry // mu
	// charge, if set, is told the bytes of each encoding when it is
	// computed (SharedCharged).
	charge func(int64)
}

type groupEntry struct {
	key string
	// buf holds the rows' messages back to back; ends[i] is where row i's
	// message ends in it.
	buf  []byte
	ends []int
	// msgs are the messages one slice each, made on the first call of
	// messages: a COPY writes the group as spans of buf and never needs
	// them, and a slice header per row is a pointer per row for the
	// collector to scan for as long as the group lives.
	msgs [][]byte
}

// messages returns the group's messages in wire format w.
func (g *rowGroup) messages(w Wire) [][]byte {
	e := g.entry(w)
	g.mu.Lock()
	var made int64
	if e.msgs == nil {
		e.msgs = make([][]byte, len(e.ends))
		start := 0
		for i, end := range e.ends {
			e.msgs[i] = e.buf[start:end:end]
			start = end
		}
		const sliceHeader = 24
		made = sliceHeader * int64(cap(e.msgs))
	}
	msgs := e.msgs
	g.mu.Unlock()
	if made > 0 && g.charge != nil {
		g.charge(made) // outside g.mu, as in entry
	}
	return msgs
}

// span returns the messages of rows i to j-1 back to back: one slice of
// the group's buffer in wire format w.
func (g *rowGroup) span(w Wire, i, j int) []byte {
	e := g.entry(w)
	start := 0
	if i > 0 {
		start = e.ends[i-1]
	}
	return e.buf[start:e.ends[j-1]:e.ends[j-1]]
}

// entry returns the group's encoding in wire format w, encoding it on
// first use.
func (g *rowGroup) entry(w Wire) *groupEntry {
	e, n := g.encode(w)
	if n > 0 && g.charge != nil {
		// Outside g.mu: the holder's accounting takes its own lock.
		g.charge(n)
	}
	return e
}

// encode returns the group's encoding in wire format w, and the bytes it
// allocated if it encoded it now (0 if it was cached).
func (g *rowGroup) encode(w Wire) (*groupEntry, int64) {
	key := w.Key()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.entries {
		if e.key == key {
			return e, 0
		}
	}
	var buf []byte
	ends := make([]int, len(g.rows))
	for i, r := range g.rows {
		buf = w.AppendMessage(buf, r)
		ends[i] = len(buf)
		if i == 0 && len(g.rows) > 1 {
			// One buffer holds the group: size it from the first message
			// (with a margin) rather than grow it by doubling.
			buf = slices.Grow(buf, len(buf)*(len(g.rows)-1)*9/8)
		}
	}
	e := &groupEntry{key: key, buf: buf, ends: ends}
	g.entries = append(g.entries, e)
	const intSize = 8
	return e, int64(cap(buf)) + intSize*int64(cap(ends))
}

// Shared marks rows as shared between subscribers: their encodings are
// computed once per wire format, for all of them at once. It modifies rows
// in place and returns them.
func Shared(rows []Row) []Row { return SharedCharged(rows, nil) }

// SharedCharged is Shared, and calls charge (if not nil) with the bytes of
// each wire format's encoding of the rows when it is computed, once per
// format, from the goroutine that asked for it: the encodings live as long
// as the rows, so whoever holds the rows can count them (a memory budget).
func SharedCharged(rows []Row, charge func(int64)) []Row {
	g := &rowGroup{rows: rows, charge: charge}
	for i := range rows {
		rows[i].group, rows[i].idx = g, i
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
// Runs of rows marked Shared return their group's cached bytes (callers
// must not modify them); when rows is one such run, the cached slice itself
// is returned, without copying. Other rows are encoded into *buf, which is
// reused.
func Messages(w Wire, rows []Row, buf *[]byte) [][]byte {
	if n := len(rows); n > 0 && rows[0].group != nil && rows[n-1].group == rows[0].group && rows[n-1].idx == rows[0].idx+n-1 {
		return rows[0].group.messages(w)[rows[0].idx : rows[0].idx+n : rows[0].idx+n]
	}
	msgs := make([][]byte, len(rows))
	b := (*buf)[:0]
	type span struct{ i, start, end int }
	var spans []span
	for i := 0; i < len(rows); {
		r := rows[i]
		if r.group != nil {
			j := i + 1
			for j < len(rows) && rows[j].group == r.group && rows[j].idx == r.idx+(j-i) {
				j++
			}
			copy(msgs[i:j], r.group.messages(w)[r.idx:r.idx+(j-i)])
			i = j
			continue
		}
		start := len(b)
		b = w.AppendMessage(b, r)
		spans = append(spans, span{i, start, len(b)})
		i++
	}
	for _, s := range spans {
		msgs[s.i] = b[s.start:s.end:s.end]
	}
	*buf = b
	return msgs
}

// Runs encodes rows with w as Messages does, but returns them as runs of
// messages back to back: a run of consecutive rows of one Shared group is
// one slice of the group's cached bytes (callers must not modify them), and
// consecutive other rows are encoded into *buf, which is reused, as one
// slice. The runs' concatenation is the messages'. A transport that writes
// a snapshot piece as one stream of bytes writes it from the shared
// encoding, without copying it per subscriber.
func Runs(w Wire, rows []Row, buf *[]byte) [][]byte {
	return AppendRuns(nil, w, rows, buf)
}

// AppendRuns is Runs, appending the runs to out: a caller that keeps out
// between calls (an idle subscriber's progress row, a tick at a time)
// allocates no list.
func AppendRuns(out [][]byte, w Wire, rows []Row, buf *[]byte) [][]byte {
	return appendRuns(w, rows, buf, out, runBytes)
}

// runBytes is a run of Runs: its bytes.
func runBytes(b []byte, _ *rowGroup) []byte { return b }

// A Piece is one run of Pieces: Bytes are messages back to back, as a run
// of Runs. A Piece that is every row of one Shared group (a snapshot
// piece, a listen batch's rows of one time: what every subscriber of the
// shape gets) can keep encodings derived from its bytes with the group
// (Derived).
type Piece struct {
	Bytes []byte
	// whole is the group whose rows Bytes are, all of them; else nil.
	whole *rowGroup
	wire  string // the Wire's Key
}

// Shared reports whether p is every row of one Shared group, whose derived
// encodings Derived keeps.
func (p Piece) Shared() bool { return p.whole != nil }

// Pieces is Runs, with each run's Piece: the runs that are whole Shared
// groups can keep derived encodings (Derived). out is reused.
func Pieces(w Wire, rows []Row, buf *[]byte, out []Piece) []Piece {
	key := ""
	return appendRuns(w, rows, buf, out[:0], func(b []byte, g *rowGroup) Piece {
		if g == nil || len(b) == 0 {
			return Piece{Bytes: b}
		}
		if key == "" {
			key = w.Key()
		}
		return Piece{Bytes: b, whole: g, wire: key}
	})
}

// appendRuns is Runs and Pieces: it appends run(b, g) for each run of
// messages b, g being the Shared group when b is all of its rows.
func appendRuns[T any](w Wire, rows []Row, buf *[]byte, out []T, run func(b []byte, whole *rowGroup) T) []T {
	b := (*buf)[:0]
	type span struct{ i, start, end int }
	var spans []span // runs in b, placed once b stops growing
	for i := 0; i < len(rows); {
		r := rows[i]
		j := i + 1
		if r.group != nil {
			for j < len(rows) && rows[j].group == r.group && rows[j].idx == r.idx+(j-i) {
				j++
			}
			var whole *rowGroup
			if r.idx == 0 && j-i == len(r.group.rows) {
				whole = r.group
			}
			out = append(out, run(r.group.span(w, r.idx, r.idx+(j-i)), whole))
			i = j
			continue
		}
		start := len(b)
		for b = w.AppendMessage(b, r); j < len(rows) && rows[j].group == nil; j++ {
			b = w.AppendMessage(b, rows[j])
		}
		spans = append(spans, span{len(out), start, len(b)})
		var zero T
		out = append(out, zero)
		i = j
	}
	for _, s := range spans {
		out[s.i] = run(b[s.start:s.end:s.end], nil)
	}
	*buf = b
	return out
}

// derivedEntry is an encoding derived from a group's messages in one wire
// format (Derived), computed once.
type derivedEntry struct {
	key  string
	once sync.Once
	v    any
}

// Derived returns derive(p.Bytes) for a Shared piece, computed once for
// every caller with the same key and wire format and kept with the group
// as its encodings are (for as long as its rows live), its size (derive's
// second result) charged as theirs (SharedCharged): a transport's
// compressed form of a snapshot piece, compressed once for every
// subscriber of the shape. Callers asking at once wait for the one that
// computes it. For a piece that is not Shared it is derive(p.Bytes),
// computed now and kept by nobody. The value must not be modified.
func Derived[T any](p Piece, key string, derive func([]byte) (T, int64)) T {
	g := p.whole
	if g == nil {
		v, _ := derive(p.Bytes)
		return v
	}
	key = p.wire + "\x00" + key
	g.mu.Lock()
	var e *derivedEntry
	for _, d := range g.derived {
		if d.key == key {
			e = d
			break
		}
	}
	if e == nil {
		e = &derivedEntry{key: key}
		g.derived = append(g.derived, e)
	}
	g.mu.Unlock()
	var n int64
	e.once.Do(func() { e.v, n = derive(p.Bytes) })
	if n > 0 && g.charge != nil {
		g.charge(n) // outside g.mu, as in entry
	}
	return e.v.(T)
}
