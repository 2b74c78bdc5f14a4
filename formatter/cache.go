package formatter

import (
	"slices"
	"sync"
	"sync/atomic"

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
	// mu serializes the encodings' computation (encode, messages) and
	// guards derived.
	mu sync.Mutex
	// entries are the group's encodings, usually one or two, read without
	// mu and replaced whole (never modified) under it. Every subscriber
	// of a live batch looks its encoding up here as the batch is fanned
	// out: under a lock, thousands of sessions woken at once by the batch
	// queued on it (starving the mutex, each handoff a goroutine switch),
	// and each of them blocked made pgwire start another resumer.
	entries atomic.Pointer[[]*groupEntry]
	// derived are encodings derived from an entry's messages (Derived),
	// such as a transport's compressed form of them.
	derived []*derivedEntry // mu
	// charge, if set, is told the bytes of each encoding when it is
	// computed (SharedCharged).
	charge func(int64)
	// solo, if set, lets a reader alone on the rows encode them into its
	// own buffer instead of entries (WithSolo, StreamRuns). Set before
	// the rows are shared, read-only after.
	solo *Solo
}

type groupEntry struct {
	key string
	// buf holds the rows' messages back to back; ends[i] is where row i's
	// message ends in it.
	buf  []byte
	ends []int
	// msgs are the messages one slice each, made on the first call of
	// messages (under the group's mu, read without it): a COPY writes the
	// group as spans of buf and never needs them, and a slice header per
	// row is a pointer per row for the collector to scan for as long as
	// the group lives.
	msgs atomic.Pointer[[][]byte]
}

// messages returns the group's messages in wire format w.
func (g *rowGroup) messages(w Wire) [][]byte {
	e := g.entry(w)
	if msgs := e.msgs.Load(); msgs != nil {
		return *msgs
	}
	g.mu.Lock()
	var made int64
	msgs := e.msgs.Load()
	if msgs == nil {
		m := make([][]byte, len(e.ends))
		start := 0
		for i, end := range e.ends {
			m[i] = e.buf[start:end:end]
			start = end
		}
		const sliceHeader = 24
		made = sliceHeader * int64(cap(m))
		msgs = &m
		e.msgs.Store(msgs)
	}
	g.mu.Unlock()
	if made > 0 && g.charge != nil {
		g.charge(made) // outside g.mu, as in entry
	}
	return *msgs
}

// cached returns the group's encoding with key, or nil if it has none
// yet. It takes no lock.
func (g *rowGroup) cached(key string) *groupEntry {
	if entries := g.entries.Load(); entries != nil {
		for _, e := range *entries {
			if e.key == key {
				return e
			}
		}
	}
	return nil
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
// allocated if it encoded it now (0 if it was cached). A cached encoding
// is found without a lock; only the first caller in a format encodes it,
// under g.mu, while callers in the same format wait for it.
func (g *rowGroup) encode(w Wire) (*groupEntry, int64) {
	key := w.Key()
	if e := g.cached(key); e != nil {
		return e, 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.cached(key); e != nil {
		return e, 0
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
	var entries []*groupEntry
	if old := g.entries.Load(); old != nil {
		entries = slices.Clip(*old) // append copies: readers keep the old list
	}
	entries = append(entries, e)
	g.entries.Store(&entries)
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
		rows[i].group, rows[i].idx = g, int32(i)
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
	if n := len(rows); n > 0 && rows[0].group != nil && rows[n-1].group == rows[0].group && int(rows[n-1].idx) == int(rows[0].idx)+n-1 {
		i := int(rows[0].idx)
		return rows[0].group.messages(w)[i : i+n : i+n]
	}
	msgs := make([][]byte, len(rows))
	b := (*buf)[:0]
	type span struct{ i, start, end int }
	var spans []span
	for i := 0; i < len(rows); {
		r := rows[i]
		if r.group != nil {
			j := i + 1
			for j < len(rows) && rows[j].group == r.group && int(rows[j].idx) == int(r.idx)+(j-i) {
				j++
			}
			copy(msgs[i:j], r.group.messages(w)[r.idx:int(r.idx)+(j-i)])
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
	rb := RunBuffer{b: *buf}
	out = appendRuns(w, rows, &rb, out, false, runBytes)
	*buf = rb.b
	return out
}

// runBytes is a run of Runs: its bytes.
func runBytes(b []byte, _ *rowGroup) []byte { return b }

// StreamRuns is Runs for a caller that writes the runs out before it asks
// for more (a COPY): a run of a Shared group whose reader is alone on it
// (WithSolo) is encoded into buf, as unshared rows are, rather than into
// the group's cache, unless the cache has it already. buf's memory is
// reused from call to call and between callers (a pool); the caller must
// Release it once it has written the runs, and before it waits for long.
func StreamRuns(w Wire, rows []Row, buf *RunBuffer) [][]byte {
	return AppendStreamRuns(nil, w, rows, buf)
}

// AppendStreamRuns is StreamRuns, appending the runs to out (see
// AppendRuns).
func AppendStreamRuns(out [][]byte, w Wire, rows []Row, buf *RunBuffer) [][]byte {
	buf.Release()
	return appendRuns(w, rows, buf, out, true, runBytes)
}

// Solo lets the one reader of a group of Shared rows encode them into a
// buffer of its own (StreamRuns) instead of into the group's cache, where
// the encoding would be new memory kept as long as the rows are: a
// snapshot piece that one subscriber reads is encoded into memory reused
// from piece to piece. A reader that comes later and finds no cached
// encoding encodes the rows again, into the cache if it is not alone: a
// group is encoded at most once more than it would be otherwise.
type Solo struct {
	// Alone reports whether the caller is, at the moment, the only reader
	// of the rows.
	Alone func() bool
	// Hold is told the bytes of a reader's buffer holding such rows, when
	// it takes them and (negative) when it lets go of them (Release): the
	// buffer is counted while it is held, as the cached encoding would be.
	Hold func(n int64)
}

// WithSolo marks rows, every one of them rows of one Shared group, as
// rows whose one reader may encode them itself (see Solo). Call it before
// the rows are shared with any reader. It returns rows.
func WithSolo(rows []Row, solo *Solo) []Row {
	if len(rows) > 0 && rows[0].group != nil {
		rows[0].group.solo = solo
	}
	return rows
}

// RunBuffer is StreamRuns's memory: the runs it encodes itself. The zero
// value is ready to use; Release gives its memory back.
type RunBuffer struct {
	b []byte
	// pooled is b's entry in runBuffers, when b came from there.
	pooled *[]byte
	// hold and held: the bytes of b counted by a Solo's Hold.
	hold func(int64)
	held int64
}

// keepRunBytes is the capacity a RunBuffer keeps across Release: a
// session's progress rows fit in it; a snapshot piece's encoding goes back
// to the pool rather than stay with an idle session.
const keepRunBytes = 4 << 10

// runBuffers holds the buffers RunBuffers let go of, for the next piece
// any session encodes.
var runBuffers sync.Pool

// Release uncounts the buffer and gives it back to the pool if it is large:
// the bytes of StreamRuns's last runs are no longer valid.
func (rb *RunBuffer) Release() {
	if rb.held != 0 {
		rb.hold(-rb.held)
		rb.hold, rb.held = nil, 0
	}
	if cap(rb.b) > keepRunBytes {
		p := rb.pooled
		if p == nil {
			p = new([]byte)
		}
		*p = rb.b[:0]
		runBuffers.Put(p)
		rb.b, rb.pooled = nil, nil
	}
}

// grow makes room for n more bytes in rb.b, from the pool when it can.
func (rb *RunBuffer) grow(n int) {
	if cap(rb.b)-len(rb.b) >= n {
		return
	}
	need := len(rb.b) + n
	p, _ := runBuffers.Get().(*[]byte)
	if p == nil || cap(*p) < need {
		if p != nil {
			runBuffers.Put(p) // for a larger piece's reader
		}
		p = &[]byte{}
		*p = make([]byte, 0, need)
	}
	b := append((*p)[:0], rb.b...)
	if rb.pooled != nil && cap(rb.b) > keepRunBytes {
		*rb.pooled = rb.b[:0]
		runBuffers.Put(rb.pooled)
	}
	rb.b, rb.pooled = b, p
}

// count has hold count the buffer's capacity.
func (rb *RunBuffer) count(hold func(int64)) {
	if rb.hold == nil {
		rb.hold = hold
	}
	if d := int64(cap(rb.b)) - rb.held; d != 0 {
		rb.hold(d)
		rb.held += d
	}
}

// alone reports whether the caller may encode the group's rows itself in
// wire format w: the group allows it (Solo), has no cached encoding in w,
// and the caller is its only reader.
func (g *rowGroup) alone(w Wire) bool {
	if g.solo == nil {
		return false
	}
	if g.cached(w.Key()) != nil {
		return false
	}
	return g.solo.Alone() // not under g.mu: Alone takes its owner's lock
}

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
	rb := RunBuffer{b: *buf}
	out = appendRuns(w, rows, &rb, out[:0], false, func(b []byte, g *rowGroup) Piece {
		if g == nil || len(b) == 0 {
			return Piece{Bytes: b}
		}
		if key == "" {
			key = w.Key()
		}
		return Piece{Bytes: b, whole: g, wire: key}
	})
	*buf = rb.b
	return out
}

// appendRuns is Runs, StreamRuns and Pieces: it appends run(b, g) for
// each run of messages b, g being the Shared group when b is all of its
// rows. With solo, runs of groups whose caller is alone on them
// (rowGroup.alone) are encoded into buf as unshared rows are.
func appendRuns[T any](w Wire, rows []Row, buf *RunBuffer, out []T, solo bool, run func(b []byte, whole *rowGroup) T) []T {
	buf.b = buf.b[:0]
	type span struct{ i, start, end int }
	var spans []span // runs in buf.b, placed once it stops growing
	for i := 0; i < len(rows); {
		r := rows[i]
		j := i + 1
		if r.group != nil {
			for j < len(rows) && rows[j].group == r.group && int(rows[j].idx) == int(r.idx)+(j-i) {
				j++
			}
			if solo && r.group.alone(w) {
				start := len(buf.b)
				buf.b = w.AppendMessage(buf.b, r)
				// Room for the rest at the first one's size (with a
				// margin), as the group's own encoding is sized.
				buf.grow((len(buf.b) - start) * (j - i - 1) * 9 / 8)
				for _, r := range rows[i+1 : j] {
					buf.b = w.AppendMessage(buf.b, r)
				}
				buf.count(r.group.solo.Hold)
				spans = append(spans, span{len(out), start, len(buf.b)})
				var zero T
				out = append(out, zero)
				i = j
				continue
			}
			var whole *rowGroup
			if r.idx == 0 && j-i == len(r.group.rows) {
				whole = r.group
			}
			out = append(out, run(r.group.span(w, int(r.idx), int(r.idx)+(j-i)), whole))
			i = j
			continue
		}
		start := len(buf.b)
		buf.b = w.AppendMessage(buf.b, r)
		end := j
		for end < len(rows) && rows[end].group == nil {
			end++
		}
		if solo {
			// A run buffer starts empty (its memory went back to the
			// pool): size it once, as above, rather than by doubling.
			buf.grow((len(buf.b) - start) * (end - i - 1) * 9 / 8)
		}
		for ; j < end; j++ {
			buf.b = w.AppendMessage(buf.b, rows[j])
		}
		spans = append(spans, span{len(out), start, len(buf.b)})
		var zero T
		out = append(out, zero)
		i = j
	}
	b := buf.b
	if buf.hold != nil {
		buf.count(buf.hold) // unshared rows may have grown it too
	}
	for _, s := range spans {
		out[s.i] = run(b[s.start:s.end:s.end], nil)
	}
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
