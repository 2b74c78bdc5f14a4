package tail

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/subscribe"
)

// share is one consolidating snapshot cursor at one AS OF, shared by every
// subscriber that wants that snapshot. Pieces are read from the cursor as
// the fastest subscriber asks for them (so a FETCH 10 returns after the
// first piece, not after the whole snapshot), kept until the slowest
// subscriber of the share has taken them, and formatted once per shape.
type share struct {
	t    *SharedTail
	asOf uint64
	// private is the share's own reader when its AS OF is older than the
	// shared snapshot reader's since; closed with the cursor.
	private *persist.Reader

	mu      sync.Mutex
	cur     *persist.Cursor     // mu; nil once exhausted or failed
	pieces  []*piece            // mu: pieces[i] is piece number base+i
	base    int                 // mu: number of the first retained piece
	bytes   int64               // mu: estimated size of the retained pieces
	readers map[*Subscriber]int // mu: next piece number per subscriber
	done    bool                // mu: the cursor is exhausted
	err     error               // mu
	reading bool                // mu: the next piece is being read
	// ahead is set while the read in progress is a read-ahead
	// (readAhead): the subscribers waiting for it wait as they would for a
	// read of their own, see next.
	ahead bool // mu
	// released is set once the share let go of its pieces for good (no
	// reader, no longer kept for late joiners): none may join it.
	released bool // mu
	// forgotten is set once the tail removed the share from its shares
	// (SharedTail.forgetShare): none will join it.
	forgotten bool          // mu
	ready     chan struct{} // mu: closed when a piece arrives or reading ends
	// opened is closed once cur (or err) is set: subscribers that find
	// the share while its cursor opens wait for it.
	opened chan struct{}
	// solo lets a subscriber alone on the share encode its pieces into a
	// buffer of its own (formatter.WithSolo) rather than into new memory
	// kept with each piece: one COPY of a large snapshot reuses one
	// buffer. Set once the share is made.
	solo formatter.Solo
	// finals is the snapshot per shape, consolidated whole.
	finals shapeCache[*shapeSnapshot]
}

// newShare returns a share of t's snapshot at asOf, its cursor not open.
func newShare(t *SharedTail, asOf uint64) *share {
	sh := &share{t: t, asOf: asOf, readers: map[*Subscriber]int{}, ready: make(chan struct{}), opened: make(chan struct{})}
	sh.solo = formatter.Solo{Alone: sh.alone, Hold: t.m.memSnapshot.Add}
	return sh
}

// piece is one chunk of a snapshot: final rows at AS OF. A chunk the
// cursor passed through as columns (persist.Chunk) keeps them: plain
// output encodes from them, and the updates (decoded, which apply and
// the batcher read) are decoded from them only if something needs them
// (updatesOf).
type piece struct {
	decoded
	chunk      persist.Chunk
	decodeOnce sync.Once
	sh         *share
	// bytes is the piece's updates, rows and encodings while the share
	// retains it; dropped is set once the share let go of it (what is
	// computed from it later is not counted). Both sh.mu.
	bytes   int64
	dropped bool
	shapes  shapeCache[[]formatter.Row]
}

// rows returns the piece formatted for opts (whose snapshot chunks
// stream) as data rows at asOf (the share's), computing it once per output
// shape. The rows and their encodings are charged to the share as they
// are computed: they live as long as the piece.
func (p *piece) rows(opts *formatter.Options, asOf uint64) []formatter.Row {
	var made int64
	rows := p.shapes.get(outputKey(nil, opts), func() []formatter.Row {
		var rows []formatter.Row
		if c := p.chunk.Columns; c != nil {
			rows = opts.SnapshotColumns(c, p.updatesOf, p.charge)
		} else {
			rows = opts.SnapshotRowsCharged(asOf, p.updates, p.charge)
		}
		made = formattedSize([]formatter.TimeRows{{Rows: rows}})
		return formatter.WithSolo(rows, &p.sh.solo)
	})
	if made > 0 {
		// Outside the cache's lock, as encodings are charged.
		p.charge(made)
	}
	return rows
}

// updatesOf returns the piece's updates, decoding a chunk of columns on
// the first call: call it before reading p.updates (apply, the batcher).
// The decoded updates are not charged again: the chunk's charge
// (row.Columns.Size) counts its rows as decoded already.
func (p *piece) updatesOf() []row.Update {
	p.decodeOnce.Do(func() {
		if p.chunk.Columns != nil {
			p.updates = p.chunk.Decoded()
		}
	})
	return p.updates
}

// charge counts n more bytes computed from p, unless the share already
// let go of it.
func (p *piece) charge(n int64) {
	p.sh.mu.Lock()
	defer p.sh.mu.Unlock()
	if !p.dropped {
		p.bytes += n
		p.sh.addBytes(n)
	}
}

// shapeSnapshot is the share's snapshot mapped through one shape and
// consolidated whole (rows of different pieces may map to one row), and
// its data rows per output shape.
type shapeSnapshot struct {
	updates []row.Update
	rows    shapeCache[[]formatter.Row]
}

// final returns the snapshot mapped through sh, consolidating parts (the
// pieces mapped through sh, in order) on the first call for the shape:
// every subscriber of a shape at one AS OF shares one evaluation.
func (sh *share) final(shape *subscribe.Shape, parts [][]row.Update) *shapeSnapshot {
	return sh.finals.get(shape.Key, func() *shapeSnapshot {
		var all []row.Update
		for _, p := range parts {
			all = append(all, p...)
		}
		return &shapeSnapshot{updates: row.Consolidate(all)}
	})
}

// alone reports whether one subscriber at most reads the share and no
// other can join it (it has dropped its first piece, see join): the
// pieces it hands out from then on are for that subscriber only. While
// the share may still be joined, pieces keep their encodings for the
// subscribers that join later at the same AS OF (a storm's), who would
// otherwise encode them again.
func (sh *share) alone() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.readers) <= 1 && sh.base > 0
}

// join registers s with the share. It fails (false) when the share already
// dropped its first piece: s needs a new share.
func (sh *share) join(s *Subscriber) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.base > 0 || sh.released || sh.err != nil || (sh.cur == nil && !sh.done) {
		return false
	}
	sh.readers[s] = 0
	return true
}

// leave unregisters s and releases pieces nobody needs.
func (sh *share) leave(s *Subscriber) {
	var private *persist.Reader
	sh.mu.Lock()
	delete(sh.readers, s)
	sh.trim()
	if len(sh.readers) == 0 && sh.cur != nil && !sh.reading {
		private = sh.closeCursor()
	}
	sh.mu.Unlock()
	closeReader(private)
}

// closeCursor releases the cursor and returns the share's private reader,
// if any, for the caller to close once sh.mu is released: expiring a reader
// is a CAS, too slow to make the share's other subscribers wait for it.
// sh.mu must be held.
func (sh *share) closeCursor() *persist.Reader {
	if sh.cur != nil {
		sh.cur.Close()
		sh.cur = nil
	}
	private := sh.private
	sh.private = nil
	return private
}

// closeReader closes r unless it is nil.
func closeReader(r *persist.Reader) {
	if r != nil {
		r.Close()
	}
}

// trim drops pieces every reader has taken, once the retained pieces pass
// the share's byte bound or the process is over its memory budget: below
// the bound the whole snapshot stays, so that subscribers arriving later
// at the same AS OF still share it. sh.mu must be held.
func (sh *share) trim() {
	if sh.bytes <= sh.t.m.cfg.ShareRetainBytes && !sh.t.m.cfg.Budget.Over() {
		return
	}
	sh.dropTaken()
}

// dropTaken drops the pieces every reader has taken. sh.mu must be held.
func (sh *share) dropTaken() {
	low := sh.base + len(sh.pieces)
	for _, n := range sh.readers {
		low = min(low, n)
	}
	sh.dropTo(low)
}

// dropTo drops the pieces numbered below low. sh.mu must be held.
func (sh *share) dropTo(low int) {
	if drop := low - sh.base; drop > 0 {
		var n int64
		for _, p := range sh.pieces[:drop] {
			n += p.bytes
			p.dropped = true
		}
		sh.addBytes(-n)
		clear(sh.pieces[:drop])
		sh.pieces = sh.pieces[drop:]
		sh.base = low
	}
}

// addBytes counts n more bytes of retained pieces (negative: fewer), in
// the share and in the budget's snapshot holder. sh.mu must be held.
func (sh *share) addBytes(n int64) {
	sh.bytes += n
	sh.t.m.memSnapshot.Add(n)
}

// release lets go of every piece of a share that has no reader and is no
// longer kept for late joiners, and returns its private reader for the
// caller to close (see closeCursor). sh.mu must be held; the share must
// not be reading.
func (sh *share) release() *persist.Reader {
	sh.released = true
	sh.dropTo(sh.base + len(sh.pieces))
	return sh.closeCursor()
}

// idle reports whether no subscriber reads the share. sh.mu must not be held.
func (sh *share) idle() bool {
	select {
	case <-sh.opened:
	default:
		return false // opening: its subscribers are on their way
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.readers) == 0
}

// next returns s's next piece, reading it from the cursor if s is the
// first to need it; nil at the end of the snapshot. Taking the newest
// piece, other than the first, starts reading the one after it in the
// background (readAhead), so that the cursor's fetch, decode and merge of
// a piece overlap the session's encoding and writing of the one before.
// Not after the first: a FETCH 10 on a new cursor takes it and often
// leaves, and the second piece is where the cursor decodes its first full
// record batch (a part's first one is short, for the first rows' sake): a
// read-ahead there cost such a FETCH 0.6 ms of CPU for rows nobody took.
func (sh *share) next(ctx context.Context, s *Subscriber) (*piece, error) {
	for {
		sh.mu.Lock()
		n := sh.readers[s]
		if i := n - sh.base; i < len(sh.pieces) {
			p := sh.pieces[i]
			newest := i == len(sh.pieces)-1
			sh.readers[s] = n + 1
			sh.trim()
			ahead := newest && n > 0 && sh.startRead()
			cur := sh.cur
			sh.mu.Unlock()
			if ahead && !sh.t.bg.Go(func() { sh.readAhead(cur) }) {
				sh.cancelRead() // the tail is closing
			}
			return p, nil
		}
		if sh.err != nil {
			err := sh.err
			sh.mu.Unlock()
			return nil, err
		}
		if sh.done {
			sh.mu.Unlock()
			return nil, nil
		}
		if sh.reading {
			ready, ahead := sh.ready, sh.ahead
			sh.mu.Unlock()
			if ahead {
				// Without the read-ahead, s would read this piece itself,
				// whatever ctx says (the read runs under the tail's
				// context): it waits for it the same way. A session polls
				// with a done context for the rows that are ready without
				// waiting for the client or the shard's writers (adapter's
				// pollReady, after a FETCH's rows): the end of a snapshot
				// must reach it there, so that the subscriber joins the
				// live stream when that FETCH returns rather than at the
				// next one. The read-ahead ends even if the tail closes
				// (endRead or cancelRead close ready).
				sh.t.m.metrics.snapshotAheadWaits.Inc()
				<-ready
				continue
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-ready:
			}
			continue
		}
		sh.reading = true
		cur := sh.cur
		sh.mu.Unlock()

		// Read outside the lock, under the tail's context: one client's
		// cancel must not break a cursor others share. Other subscribers
		// wait on ready.
		chunk, err := cur.NextChunk(sh.t.ctx)
		closeReader(sh.endRead(chunk, err, false))
	}
}

// startRead claims the cursor for reading the next piece ahead of every
// subscriber: false when it is exhausted, failed, closed or already being
// read. sh.mu must be held.
func (sh *share) startRead() bool {
	if sh.reading || sh.done || sh.err != nil || sh.cur == nil {
		return false
	}
	sh.reading, sh.ahead = true, true
	return true
}

// readAhead reads the piece after the newest one on a goroutine of the
// tail's (SharedTail.bg), one piece ahead of the fastest subscriber at
// most: the memory a read-ahead adds is one piece, charged like any other.
func (sh *share) readAhead(cur *persist.Cursor) {
	chunk, err := cur.NextChunk(sh.t.ctx)
	closeReader(sh.endRead(chunk, err, true))
}

// cancelRead gives up a read claimed with startRead before it began.
func (sh *share) cancelRead() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.reading, sh.ahead = false, false
	close(sh.ready)
	sh.ready = make(chan struct{})
}

// endRead ends a read of the cursor (claimed with reading) with its
// result: a piece, the end of the snapshot (io.EOF), or an error. It wakes
// the subscribers waiting for it and returns the private reader to close,
// if the cursor is done with it. ahead marks a read-ahead's end, whose
// reader is no subscriber: if the last subscriber left meanwhile, the
// cursor (which leave could not close while it was read) is closed here,
// and the share released if the tail forgot it.
func (sh *share) endRead(chunk persist.Chunk, err error, ahead bool) *persist.Reader {
	var private *persist.Reader
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.reading, sh.ahead = false, false
	switch {
	case errors.Is(err, io.EOF):
		sh.done = true
		private = sh.closeCursor()
	case err != nil:
		sh.err = err
	default:
		p := &piece{decoded: decoded{updates: chunk.Updates}, chunk: chunk, sh: sh}
		if chunk.Columns != nil {
			p.bytes = chunk.Columns.Size()
		}
		for _, u := range chunk.Updates {
			p.bytes += u.Size()
		}
		sh.pieces = append(sh.pieces, p)
		sh.addBytes(p.bytes)
		sh.t.m.metrics.snapshotPieces.Inc()
		sh.t.m.metrics.snapshotBytes.Add(float64(p.bytes))
	}
	close(sh.ready)
	sh.ready = make(chan struct{})
	if ahead && len(sh.readers) == 0 {
		// The last subscriber left while the piece was read ahead: what
		// leave and forgetShare could not do meanwhile is done here.
		var p *persist.Reader
		if sh.forgotten {
			p = sh.release()
		} else if !sh.done {
			p = sh.closeCursor()
		}
		if p != nil {
			private = p
		}
	}
	return private
}
