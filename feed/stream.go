package feed

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/formatter"
)

// position is what a stream has told its client so far, and so what it
// must not tell again: the rules that make a resume exact.
type position struct {
	// resumed is set for a stream that continues after a frontier the
	// client has seen.
	resumed bool
	// closed is the last frontier the client saw (or, before the first
	// progress row arrived on a fresh stream, nothing: known is false).
	// Progress events go out only above it. On a fresh stream it starts at
	// AS OF, whose progress row comes before the snapshot: a client that
	// resumed from it would skip the snapshot.
	closed uint64
	known  bool
	// minRow drops rows below it: on a resume, AS OF after-1 WITH
	// (SNAPSHOT = false) yields none below after, and this keeps it so.
	minRow uint64
}

// newPosition is the position of a fresh stream, or of one resuming after
// frontier after when it is set.
func newPosition(after *uint64) position {
	if after == nil {
		return position{}
	}
	return position{resumed: true, closed: *after, known: true, minRow: *after}
}

// step is one piece of a batch as the client sees it.
type step struct {
	rows     []formatter.Row // data rows, when progress is 0
	progress uint64          // a frontier to announce
}

// split cuts a batch of output rows into runs of data rows and the
// progress events to announce, applying the position's rules. It looks
// at every row of a snapshot's thousands, for every stream: rows are
// read in place (a Row is 48 bytes) and the run's start kept in a
// register, not captured by a closure.
func (p *position) split(rows []formatter.Row, out []step) []step {
	start := -1 // first data row of the current run
	for i := range rows {
		r := &rows[i]
		switch {
		case r.Progressed:
			if start >= 0 {
				out = append(out, step{rows: rows[start:i]})
				start = -1
			}
			if !p.known {
				// The first progress row is at AS OF.
				p.closed, p.known = r.Time, true
				continue
			}
			if r.Time > p.closed {
				p.closed = r.Time
				out = append(out, step{progress: r.Time})
			}
		case r.Time < p.minRow:
			if start >= 0 {
				out = append(out, step{rows: rows[start:i]})
				start = -1
			}
		case start < 0:
			start = i
		}
	}
	if start >= 0 {
		out = append(out, step{rows: rows[start:]})
	}
	return out
}

// stream is one subscribe streaming to one HTTP client.
type stream struct {
	h    *Handler
	w    http.ResponseWriter
	rc   *http.ResponseController
	f    framing
	sub  *adapter.Subscription // one collection
	wire *jsonWire
	srcs []*source // several collections (sub is nil)
	pos  position
	upTo uint64 // UP TO, when the subscribe has one
	// conn is the connection a live HTTP/1.1 stream took over (hijack);
	// nil while it writes through w. cancel ends the stream's context;
	// watch is the goroutine that watches conn once watching
	// (startWatch), which watchTimer starts when a Next takes longer
	// than watchDelay (next). conn is set, and watching and unwatched
	// changed, under watchMu: the timer's goroutine starts the watch, and
	// the handler's Close interrupts conn's write (interrupt).
	conn       net.Conn
	cancel     context.CancelFunc
	watch      sync.WaitGroup
	watchMu    sync.Mutex
	watching   bool // watchMu
	unwatched  bool // watchMu: closeConn began, no watch starts
	watchTimer *time.Timer
	// watched is set, on run's goroutine, once the watch is started or
	// about to be: next arms no timer then.
	watched bool
	// waited is set once run found its subscription would wait: the head
	// went out then, and the connection is watched.
	waited bool
	buf    []byte // framed bytes not yet written
	// gz is the response's gzip member when it is compressed (gzip.go);
	// then buf holds the framed bytes not yet compressed, and zbuf the
	// compressed ones not yet written.
	gz   *gzipStream
	zbuf []byte
	// out are the batch's pieces before the output buffer's (buf, or
	// zbuf when compressed) bytes from mark: spans of it and runs of
	// shared rows written from where they lie, in order (queue).
	out    net.Buffers
	mark   int
	enc    []byte            // formatter.Pieces's scratch
	pieces []formatter.Piece // formatter.Pieces's result, reused
	// whole is set for a ?live=false answer, held whole until its
	// frontier is known: its rows are copied, never queued.
	whole bool
	// charged is what buf, zbuf and enc's capacity is charged to the
	// feed's memory holder.
	charged int64
	sent    int64
	// held is the rows a stream of several collections holds until every
	// collection's frontier passes them (formatter.Row.Size), charged with
	// the buffers and bounded by Config.MaxHeldBytes.
	held int64
	// snapErr ends a ?live=false answer of several collections that grew
	// too large (chargeSnapshot).
	snapErr error
}

// run streams until the subscription ends, the client leaves or ctx ends.
// It reports nothing: errors after the response began are framed.
func (s *stream) run(ctx context.Context) {
	defer s.charge(true)
	s.startBody()
	var steps []step
	idle := newIdleWait(ctx, s.h.cfg.Heartbeat)
	defer idle.stop()
	for {
		// The head goes out with the first batch when one is ready (a
		// resume's, a snapshot's), one write instead of two; before the
		// stream first waits for one otherwise, so that the client
		// knows it is connected. The heartbeat sends it at the latest.
		if !s.waited && s.sub.WouldWait() {
			s.waited, s.watched = true, true
			s.startWatch()
			// Through w with nothing framed yet (NDJSON, uncompressed),
			// the write is a Flush: net/http sends the head then.
			if (s.sent == 0 || len(s.buf) > 0 || len(*s.output()) > 0) && !s.write() {
				return
			}
		}
		rows, err := s.next(idle.ctx)
		switch {
		case err == nil:
			idle.restart()
			s.takeBuf()
		case ctx.Err() != nil:
			s.stopped()
			return
		case idle.ended(err):
			// Idle: the buffers a burst grew are not kept meanwhile.
			s.release()
			s.buf = s.f.heartbeat(s.buf)
			if !s.write() {
				return
			}
			idle.restart()
			continue
		case errors.Is(err, io.EOF):
			// UP TO: every row below it was sent. Its progress event
			// first, so that a client that does not know the end event
			// reconnects from it (and gets 204); but not when UP TO is
			// AS OF (the subscribe completed before its first progress
			// row, the one at AS OF), which is no resume point: the
			// stream sent nothing, and a client that resumed from it
			// would ask for AS OF-1, perhaps below since.
			if s.pos.known && s.upTo > s.pos.closed {
				s.buf = s.f.progress(s.buf, s.upTo)
			}
			s.buf = s.f.end(s.buf, s.upTo)
			s.writeLast()
			return
		case adapter.HistoryLost(err):
			s.h.metrics.resets.Inc()
			s.buf = s.f.reset(s.buf, toErrorBody(err))
			s.writeLast()
			return
		default:
			s.buf = s.f.fail(s.buf, toErrorBody(err))
			s.writeLast()
			return
		}
		steps = s.pos.split(rows, steps[:0])
		for _, st := range steps {
			if st.rows == nil {
				s.buf = s.f.progress(s.buf, st.progress)
				continue
			}
			s.rows(s.wire, st.rows)
		}
		// The batch is in buf and out now: its rows (a resume's
		// thousands, a slice of the subscriber's own) are not held while
		// the client takes the write, nor while the stream idles.
		clear(steps)
		if (len(s.buf) > 0 || len(s.out) > 0) && !s.write() {
			return
		}
	}
}

// watchDelay is how long a Next may take before the stream watches its
// connection for the client leaving (next): a stream that never waits for
// its subscription is not watched (a ready batch, written at once, shows a
// client that left by failing), but one blocked in storage (a snapshot
// or catch-up read inside Next) would otherwise hold its share of the
// snapshot and its catch-up slot until its next write, which may be a
// heartbeat 15 s away.
const watchDelay = 50 * time.Millisecond

// next is the subscription's Next under ctx. On a connection the stream
// took over and does not watch yet, it starts the watch (startWatch) when
// Next has not returned within watchDelay: a timer per stream, re-armed
// per call, rather than a goroutine, which a batch ready at once (a
// resume's, a snapshot's read before) does not need.
func (s *stream) next(ctx context.Context) ([]formatter.Row, error) {
	if s.conn == nil || s.watched {
		return s.sub.Next(ctx, 0)
	}
	if s.watchTimer == nil {
		s.watchTimer = time.AfterFunc(watchDelay, s.startWatch)
	} else {
		s.watchTimer.Reset(watchDelay)
	}
	rows, err := s.sub.Next(ctx, 0)
	if !s.watchTimer.Stop() {
		// It fired: the watch started (or the stream is closing).
		s.watched = true
	}
	return rows, err
}

// stopped ends the stream whose context ended: when the handler is
// closing (the server shutting down, not the client leaving), with the
// end of its body, so that the client reads a whole response (a gzip
// member with its trailer), within closeGrace.
func (s *stream) stopped() {
	if s.h.closing() {
		s.writeLast()
	}
}

// directWrite is the size from which a run of row objects is written
// through a ResponseWriter from where it lies (for rows the fast path
// shares, the bytes every subscriber of the shape gets) rather than copied
// into buf: a snapshot piece is not copied per subscriber. Smaller runs
// are copied: a copy of up to 64 KiB costs less than the write system
// call it saves.
const directWrite = 64 << 10

// connDirectWrite is directWrite on a connection the stream took over,
// where a batch is one writev whatever its pieces: a run from 1 KiB up is
// one more iovec rather than a copy. Copied, a resume storm's runs (a
// batch of each changed time) grew every stream's buffer to its whole
// catch-up, 280 KiB held by each of 2,048 streams while its client read:
// the fresh heap cost more in page faults and garbage collection than
// the rest of the stream's work. Shorter runs (a live batch's few rows)
// are cheaper copied than described.
const connDirectWrite = 1 << 10

// copied reports whether a run of n bytes is copied into the batch's
// buffer, rather than written from where it lies: a ?live=false answer,
// held whole, copies every run.
func (s *stream) copied(n int) bool {
	switch {
	case s.whole:
		return true
	case s.conn != nil:
		return n < connDirectWrite
	}
	return n < directWrite
}

// keptBuffer is the most of enc's capacity an idle stream keeps (the rest
// is released when it sends a heartbeat).
const keptBuffer = 4 << 10

// release drops the encoding scratch a burst grew past keptBuffer, for an
// idle stream (buf went back to bufPool with its last write).
func (s *stream) release() {
	if cap(s.enc) > keptBuffer {
		s.enc = nil
		s.charge(false)
	}
}

// bufPool holds the streams' write buffers (*[]byte) between batches. A
// stream takes one for a batch and puts it back once the batch is
// written, so that an idle stream holds none and a storm's streams reuse
// a few grown buffers instead of each growing its own from nothing.
var bufPool sync.Pool

// pooledMax is the largest buffer put back in bufPool: a rare huge batch's
// buffer is left to the collector.
const pooledMax = 1 << 20

// takeBuf gives the stream pooled buffers, unless it has them.
func (s *stream) takeBuf() {
	take(&s.buf)
	if s.gz != nil {
		take(&s.zbuf)
	}
}

// take sets *buf to a pooled buffer, unless it has one.
func take(buf *[]byte) {
	if *buf == nil {
		if b, ok := bufPool.Get().(*[]byte); ok {
			*buf = (*b)[:0]
		}
	}
}

// putBuf returns the stream's buffers to bufPool.
func (s *stream) putBuf() {
	put(&s.buf)
	put(&s.zbuf)
}

// put returns *buf to bufPool.
func put(buf *[]byte) {
	if b := *buf; cap(b) > 0 && cap(b) <= pooledMax {
		bufPool.Put(&b)
	}
	*buf = nil
}

// idleWait is the context a stream waits for its next batch under: it
// ends Config.Heartbeat after the last batch (cause errIdle), when the
// stream sends a heartbeat. It holds one timer for the stream's life,
// re-armed after each batch, rather than a context and a timer per wait
// (a resuming stream takes dozens of batches in a burst).
type idleWait struct {
	parent context.Context
	d      time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

func newIdleWait(parent context.Context, d time.Duration) *idleWait {
	w := &idleWait{parent: parent, d: d}
	w.arm()
	return w
}

// arm starts a new wait context and its timer.
func (w *idleWait) arm() {
	ctx, cancel := context.WithCancelCause(w.parent)
	w.ctx, w.cancel = ctx, cancel
	w.timer = time.AfterFunc(w.d, func() { cancel(errIdle) })
}

// ended reports whether err, returned by a wait under ctx, means the idle
// period ended (rather than the wait failing for itself).
func (w *idleWait) ended(err error) bool {
	return errors.Is(err, context.Canceled) && context.Cause(w.ctx) == errIdle
}

// restart starts the idle period again, after a batch or a heartbeat. A
// timer that fired meanwhile ended ctx: the next wait gets a new one. (One
// that fires during the Reset ends the next wait at once, which then
// sends a heartbeat early: harmless.)
func (w *idleWait) restart() {
	if w.ctx.Err() != nil {
		w.stop()
		w.arm()
		return
	}
	w.timer.Reset(w.d)
}

// stop releases the timer and the context.
func (w *idleWait) stop() {
	w.timer.Stop()
	w.cancel(nil)
}

// rows frames one rows event of rows, encoded by wire (formatter.Pieces
// with the framing's separator), into the batch.
func (s *stream) rows(wire *jsonWire, rows []formatter.Row) {
	s.buf = s.f.rowsOpen(s.buf)
	s.pieces = formatter.Pieces(wire, rows, &s.enc, s.pieces)
	for i, p := range s.pieces {
		s.piece(p, i == len(s.pieces)-1 && s.f.trimLast())
	}
	clear(s.pieces) // not holding the shared rows' bytes
	s.buf = s.f.rowsClose(s.buf)
}

// snapshotRows adds the row objects of rows, each followed by a comma, to
// a ?live=false answer.
func (s *stream) snapshotRows(wire *jsonWire, rows []formatter.Row) {
	s.pieces = formatter.Pieces(wire, rows, &s.enc, s.pieces)
	for _, p := range s.pieces {
		s.piece(p, false)
	}
	clear(s.pieces)
}

// piece adds a run of row objects to the batch, without its last
// separator when trim. Compressed, a shared run goes in as the bytes
// compressed once for every stream of its shape (sharedPiece); either is
// written from where it lies when it is long (copied), copied when it is
// short; an unshared run is always copied. A run of rows this stream alone has is compressed with the
// stream's own bytes.
func (s *stream) piece(p formatter.Piece, trim bool) {
	r := p.Bytes
	if len(r) == 0 {
		return
	}
	if s.gz != nil && p.Shared() {
		z := sharedPiece(p)
		s.compress()
		s.gz.add(z)
		if s.copied(len(z.deflate)) {
			s.zbuf = append(s.zbuf, z.deflate...)
		} else {
			s.queue(z.deflate)
		}
		if !trim {
			s.buf = append(s.buf, r[len(r)-1])
		}
		return
	}
	if trim {
		r = r[:len(r)-1]
	}
	// Only a shared run's bytes stay where they are until the write: an
	// unshared run lies in enc, which the batch's next rows event encodes
	// over (formatter.Pieces starts it again).
	if s.gz != nil || !p.Shared() || s.copied(len(r)) {
		s.buf = append(s.buf, r...)
		return
	}
	s.queue(r)
}

// compress moves buf's framed bytes into zbuf, compressed (the stream's
// own bytes: gzipStream.appendOwn), when the stream is compressed.
func (s *stream) compress() {
	if s.gz != nil && len(s.buf) > 0 {
		s.zbuf = s.gz.appendOwn(s.zbuf, s.buf)
		s.buf = s.buf[:0]
	}
}

// startBody starts a stream's body: the gzip header when it is
// compressed, then the framing's preamble.
func (s *stream) startBody() {
	if s.gz != nil {
		s.zbuf = s.gz.header(s.zbuf)
	}
	s.buf = s.f.open(s.buf)
}

// output is the buffer of bytes ready to write: buf, or zbuf when the
// stream is compressed.
func (s *stream) output() *[]byte {
	if s.gz != nil {
		return &s.zbuf
	}
	return &s.buf
}

// queue adds the output buffer's bytes since the last queued ones, then
// run, to the batch's pieces. (A span of the buffer stays valid when it
// grows: it refers to the old array, whose bytes do not change.)
func (s *stream) queue(run []byte) {
	s.compress()
	if out := *s.output(); len(out) > s.mark {
		s.out = append(s.out, out[s.mark:])
		s.mark = len(out)
	}
	if run != nil {
		s.out = append(s.out, run)
	}
}

// writeLast sends the stream's last batch: with the end of the gzip
// member when compressed.
func (s *stream) writeLast() bool { return s.writeBatch(true) }

// write sends the batch (its queued pieces and buf) to the client and
// flushes it; false means the client is gone (or did not take the bytes
// within Config.WriteTimeout).
func (s *stream) write() bool { return s.writeBatch(false) }

// writeBatch is write, and writeLast when last. Compressed, the batch ends
// with a sync marker, or the gzip member's end when last.
func (s *stream) writeBatch(last bool) bool {
	if s.gz != nil {
		s.compress()
		if last {
			s.zbuf = s.gz.close(s.zbuf)
		} else {
			s.zbuf = s.gz.flush(s.zbuf)
		}
	}
	s.queue(nil)
	s.charge(false)
	ok := s.send()
	clear(s.out) // the shared runs are not held by an idle stream
	s.out, s.mark = s.out[:0], 0
	s.putBuf()
	s.charge(false)
	return ok
}

// send writes the queued pieces: on a connection taken over, in one
// writev; else one Write each through w, then a Flush.
func (s *stream) send() bool {
	// A client that stopped reading must not hold the stream forever:
	// its subscription is detached by the fast path's budget meanwhile,
	// but the connection would stay.
	if s.conn != nil {
		s.setConnDeadline()
		pieces := s.out // WriteTo consumes its receiver
		n, err := pieces.WriteTo(s.conn)
		s.sent += n
		return err == nil
	}
	_ = s.rc.SetWriteDeadline(s.h.writeDeadline())
	for _, b := range s.out {
		n, err := s.w.Write(b)
		s.sent += int64(n)
		if err != nil {
			return false
		}
	}
	return s.rc.Flush() == nil
}

// setConnDeadline sets the write deadline of the connection the stream
// took over, under watchMu: a Close of the handler that comes meanwhile
// (interrupt) sets its own, the earlier, after it.
func (s *stream) setConnDeadline() {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	_ = s.conn.SetWriteDeadline(s.h.writeDeadline())
}

// interrupt cuts a write to the connection the stream took over short at
// the handler's closing deadline: the handler closes within closeGrace
// even when a client does not read. It runs when the handler's Close
// begins (after its context ended), on a goroutine of its own. Through w
// the server's close ends a write that takes longer.
func (s *stream) interrupt() {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.conn != nil {
		_ = s.conn.SetWriteDeadline(s.h.writeDeadline())
	}
}

// charge brings the memory holder to the buffers' capacity (to zero when
// done).
func (s *stream) charge(done bool) {
	n := int64(cap(s.buf)+cap(s.zbuf)+cap(s.enc)) + s.held
	if done {
		n = 0
	}
	s.h.mem.Add(n - s.charged)
	s.charged = n
}
