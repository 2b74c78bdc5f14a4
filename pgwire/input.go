package pgwire

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgproto3/v2"
)

// msgReader is the ChunkReader under pgproto3.Backend. Backend.Receive asks
// it for a 5-byte header and then for the whole body at once; pgproto3/v2 has
// no limit of its own, and a chunk reader allocates the body before reading
// it, so a client could make the server allocate whatever length it claims.
// msgReader checks each header against the limit of its message type, and
// reads a large body into a buffer that grows as its bytes arrive: a message
// costs the server what the client has sent, not what its header claims.
//
// Headers and small bodies are cut from buf, which also keeps what a read
// brought beyond them. Like a chunk reader, msgReader never writes over bytes
// it has handed out (a full buf is replaced, not reused), so a message stays
// valid for as long as the caller holds it. A large body is dropped, and its
// bytes uncounted, when the next header is asked for: pgproto3's messages are
// valid only until the next Receive, and a connection must not keep the
// buffer of the biggest message it ever received.
type msgReader struct {
	r        io.Reader
	maxLarge int         // body limit of Query, Parse, Bind, CopyData, FunctionCall
	mem      *memAccount // charged for buf and body

	buf    []byte // headers and small bodies; nil when all of it was consumed
	rp, wp int    // read and write positions in buf

	// body is the large body being read: its length is what has arrived,
	// its capacity what is allocated, at most a quarter more than that.
	body []byte

	wantHeader bool  // the next Next call reads a message header
	readErr    error // error of the last Next: tells a read failure from a decode failure
}

// Message buffer sizing.
const (
	// smallBufLen is the size of a connection's header buffer; bodies up
	// to this size are read into it. An idle connection keeps none.
	smallBufLen = 1 << 10
	// bodyStartLen is the first allocation for a larger body beyond what has
	// already arrived; it then grows by a quarter as the buffer fills, up to
	// the body length.
	bodyStartLen = 8 << 10
)

var _ pgproto3.ChunkReader = (*msgReader)(nil)

func newMsgReader(r io.Reader, maxLarge int, mem *memAccount) *msgReader {
	return &msgReader{r: r, maxLarge: maxLarge, mem: mem, wantHeader: true}
}

// Next implements pgproto3.ChunkReader. Backend.Receive calls it with 5 for a
// header and then with the body length. A read that fails (an interrupted COPY
// read) is repeated by the next Receive with the same n, and msgReader keeps
// what it had read, so the alternation only advances on success.
func (r *msgReader) Next(n int) (buf []byte, err error) {
	defer func() { r.readErr = err }()
	if r.wantHeader {
		// The previous message is done: its large body goes.
		r.dropBody()
		buf, err = r.small(n)
		if err != nil {
			return nil, err
		}
		r.wantHeader = false
		if n == 5 { // always, after startup: Backend.Receive reads type and length
			typ := buf[0]
			// Read the length as pgproto3 does, unsigned: a length with the
			// high bit set is 2-4 GiB to it, not negative.
			size := int64(binary.BigEndian.Uint32(buf[1:])) - 4
			if limit := r.limit(typ); size > int64(limit) {
				return nil, Errorf("08P01", "invalid message length: message of type %q has %d bytes, over the limit of %d", typ, size, limit).in(ErrMessageTooLarge)
			}
		}
		return buf, nil
	}
	if r.body != nil || n > smallBufLen {
		buf, err = r.large(n)
	} else {
		buf, err = r.small(n)
	}
	if err == nil {
		r.wantHeader = true
		r.dropConsumed()
	}
	return buf, err
}

// dropConsumed lets go of buf once every byte in it has been handed out: the
// message just returned keeps it alive while the caller holds it, and the
// connection, which may now wait for its client for hours, holds no buffer.
// The next read allocates a new one, as it would when buf is full.
func (r *msgReader) dropConsumed() {
	if r.rp == r.wp && r.buf != nil {
		r.mem.add(-len(r.buf))
		r.buf, r.rp, r.wp = nil, 0, 0
	}
}

// small returns the next n bytes from buf, reading at least what is missing
// and as much more as buf has room for. n is at most smallBufLen, or already
// buffered.
func (r *msgReader) small(n int) ([]byte, error) {
	if r.wp-r.rp < n {
		if r.buf == nil {
			// Nothing buffered: wait for the client before allocating,
			// so that a connection waiting for its next message holds
			// no buffer (see dropConsumed).
			if w, ok := r.r.(interface{ wait() error }); ok {
				if err := w.wait(); err != nil {
					return nil, err
				}
			}
		}
		if len(r.buf)-r.rp < n {
			// No room after the unread bytes: a new buffer, since the old one
			// may back a message the caller still holds.
			nb := make([]byte, max(n, smallBufLen))
			r.mem.add(len(nb) - len(r.buf))
			r.wp = copy(nb, r.buf[r.rp:r.wp])
			r.rp = 0
			r.buf = nb
		}
		m, err := io.ReadAtLeast(r.r, r.buf[r.wp:], n-(r.wp-r.rp))
		r.wp += m
		if err != nil {
			return nil, err
		}
	}
	b := r.buf[r.rp : r.rp+n : r.rp+n]
	r.rp += n
	return b, nil
}

// large reads a body of n bytes into r.body, starting with what buf holds and
// growing the allocation by a quarter whenever it is full, so that what is
// allocated is at most a quarter more than what has arrived (or
// bodyStartLen): a client that sends part of a large message costs about
// what it sent. Growing by a quarter copies the body about five times over
// in all (doubling: twice), 30 ms of memcpy for a 64 MiB message, against up
// to twice its arrived bytes held. It reads no further than the body: the
// next header goes to buf.
func (r *msgReader) large(n int) ([]byte, error) {
	if r.body == nil {
		have := r.buf[r.rp:r.wp]
		r.body = make([]byte, len(have), min(n, max(len(have), bodyStartLen)))
		r.mem.add(cap(r.body))
		copy(r.body, have)
		r.rp = r.wp
	}
	for len(r.body) < n {
		if len(r.body) == cap(r.body) {
			grown := make([]byte, len(r.body), min(n, cap(r.body)+cap(r.body)/4))
			r.mem.add(cap(grown) - cap(r.body))
			copy(grown, r.body)
			r.body = grown
		}
		m, err := r.r.Read(r.body[len(r.body):cap(r.body)])
		r.body = r.body[:len(r.body)+m]
		if err != nil && len(r.body) < n {
			return nil, err
		}
	}
	return r.body[:n:n], nil
}

// dropBody lets go of the last large body.
func (r *msgReader) dropBody() {
	if r.body != nil {
		r.mem.add(-cap(r.body))
		r.body = nil
	}
}

// limit returns the largest body allowed for a message type, as Postgres's
// SocketBackend decides it.
func (r *msgReader) limit(typ byte) int {
	switch typ {
	case 'Q', 'P', 'B', 'd', 'F':
		return r.maxLarge
	case 'p':
		return maxAuthMessageSize
	default:
		return maxSmallMessageSize
	}
}

// switchReader lets the chunk reader move from the raw connection (startup and
// authentication, under a deadline) to the connection's input (a sockReader
// or an inputPipe) without losing the bytes it has buffered.
type switchReader struct{ r io.Reader }

func (s *switchReader) Read(p []byte) (int, error) { return s.r.Read(p) }

// wait blocks until the reader has bytes, if it can tell (the input pipe);
// otherwise it returns at once and the caller's Read blocks instead.
func (s *switchReader) wait() error {
	if w, ok := s.r.(interface{ wait() error }); ok {
		return w.wait()
	}
	return nil
}

// input is what the chunk reader reads after authentication: the socket, on
// the connection's goroutine (sockReader) where the server watches it for
// hangups, else an inputPipe reading it on a goroutine of its own.
type input interface {
	io.Reader
	// wait blocks until there are bytes to read (or Read would fail),
	// without taking a buffer for them.
	wait() error
	// interruptBy makes a Read waiting for the client give up with ctx's
	// cause once ctx is done (a CancelRequest during COPY FROM), until
	// stop is called.
	interruptBy(ctx context.Context) (stop func())
	// close lets go of the input's buffers and goroutine; the socket must
	// be closed first.
	close()
}

// Input read sizing. An idle connection (thousands of SUBSCRIBE clients
// hardly send anything) holds no buffer: it waits for the socket to become
// readable before it takes one (waitReadable); a connection receiving a
// stream (COPY FROM) reads into larger ones. Buffers come from pools shared
// by all connections and go back as soon as they are consumed.
const (
	pipeBuffers = 2         // an input pipe's buffers in flight: one being filled while another is consumed
	pipeMinRead = 512       // the first read's buffer, and an idle one's
	pipeMaxRead = 128 << 10 // a streaming client's
)

// pipePools holds one pool per buffer size: pipeMinRead × 4^i.
var pipePools [5]sync.Pool

func pipePool(size int) *sync.Pool {
	i := 0
	for s := pipeMinRead; s < size; s *= 4 {
		i++
	}
	return &pipePools[i]
}

func getPipeBuf(size int) []byte {
	if b, ok := pipePool(size).Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, size)
}

func putPipeBuf(b []byte) {
	b = b[:cap(b)]
	pipePool(len(b)).Put(&b)
}

// nextReadSize grows the read buffer when a read filled it (a stream) and
// shrinks it when reads are small again.
func nextReadSize(size, n int) int {
	switch {
	case n == size && size < pipeMaxRead:
		return size * 4
	case n < size/4 && size > pipeMinRead:
		return size / 4
	}
	return size
}

// sockReader reads the socket on the connection's goroutine, into a pooled
// buffer sized to what the client sends (as an inputPipe's), which goes back
// as soon as it is consumed. It serves connections whose client's hangup the
// server's hangupWatcher reports: nothing needs to read the socket while the
// goroutine is busy in a statement, so an idle connection has no second
// goroutine.
type sockReader struct {
	nc   net.Conn        // the socket, or TLS over it
	raw  net.Conn        // the socket, to wait for readability; nil under TLS (its records may be buffered above the socket)
	ctx  context.Context // the connection's: a read cut off by its cancellation (armDeadlines) fails with its cause
	mem  *memAccount     // charged for buf
	size int             // the next read's buffer size
	cur  []byte          // unread part of buf
	buf  []byte          // the pooled buffer being consumed; nil when none
	intr context.Context // when set, a read cut off by its cancellation fails with its cause
}

func newSockReader(ctx context.Context, nc, raw net.Conn, tls bool, mem *memAccount) *sockReader {
	r := &sockReader{nc: nc, raw: raw, ctx: ctx, mem: mem, size: pipeMinRead}
	if tls {
		r.raw = nil
	}
	return r
}

// Read implements io.Reader: what is left of the last read, else a new read
// of the socket. It prefers buffered bytes to a cancellation.
func (r *sockReader) Read(p []byte) (int, error) {
	if len(r.cur) == 0 {
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	if len(r.cur) == 0 {
		r.release()
	}
	return n, nil
}

// fill reads the socket into a new buffer, once it is readable. A read that
// brings bytes and an error keeps the bytes; the next one reports the error.
func (r *sockReader) fill() error {
	r.wait()
	buf := getPipeBuf(r.size)
	r.mem.add(cap(buf))
	n, err := r.nc.Read(buf)
	r.size = nextReadSize(r.size, n)
	if n > 0 {
		r.cur, r.buf = buf[:n], buf
		return nil
	}
	r.mem.add(-cap(buf))
	putPipeBuf(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// Deadlines only cut reads off: the connection's cancellation, or
		// interruptBy's.
		if r.ctx.Err() != nil {
			return context.Cause(r.ctx)
		}
		if r.intr != nil && r.intr.Err() != nil {
			return context.Cause(r.intr)
		}
	}
	return err
}

// release gives the consumed buffer back to its pool.
func (r *sockReader) release() {
	if r.buf != nil {
		r.mem.add(-cap(r.buf))
		putPipeBuf(r.buf)
		r.cur, r.buf = nil, nil
	}
}

// wait blocks until the socket is readable, unless bytes are buffered or
// under TLS (there Read blocks instead).
func (r *sockReader) wait() error {
	if len(r.cur) == 0 && r.raw != nil {
		waitReadable(r.raw)
	}
	return nil
}

// interruptBy sets a past read deadline when ctx is done, and clears it at
// stop unless the connection was canceled meanwhile.
func (r *sockReader) interruptBy(ctx context.Context) (stop func()) {
	r.intr = ctx
	fired := make(chan struct{})
	after := context.AfterFunc(ctx, func() {
		r.nc.SetReadDeadline(time.Now())
		close(fired)
	})
	return func() {
		r.intr = nil
		if after() {
			return
		}
		<-fired // so that its deadline is not set after the one below
		r.nc.SetReadDeadline(time.Time{})
		if r.ctx.Err() != nil {
			// The connection was canceled meanwhile: keep its reads cut off
			// (armDeadlines may have run before the line above).
			r.nc.SetReadDeadline(time.Now())
		}
	}
}

// close lets go of the buffer being consumed.
func (r *sockReader) close() { r.release() }

// inputPipe reads the socket on its own goroutine, so that a connection notices
// its client disconnecting while its own goroutine is busy streaming a result
// or blocked waiting for one: the read error cancels the connection context,
// and with it the running statement. It serves where the server cannot watch
// for hangups (not Linux): it is the only reader of the socket after
// authentication. The goroutine is owned by the connection: close stops it and
// waits for it.
type inputPipe struct {
	nc     net.Conn
	ctx    context.Context // the connection's; Read gives up when it is done
	onErr  func(error)     // called once with the read error, from the read goroutine
	mem    *memAccount     // charged for the buffers in flight
	chunks chan []byte     // filled buffers, in order; closed after a read error
	tokens chan struct{}   // one per buffer in flight; the consumer frees them
	stop   chan struct{}   // closed by close
	err    error           // the read error; written before chunks is closed
	wg     sync.WaitGroup

	// Consumer side, used by the connection goroutine only.
	cur  []byte          // unread part of the chunk being consumed
	buf  []byte          // the whole chunk being consumed, to return to free
	intr context.Context // when set, Read also gives up when it is done (COPY FROM under a statement context)
}

func newInputPipe(ctx context.Context, nc net.Conn, mem *memAccount, onErr func(error)) *inputPipe {
	p := &inputPipe{
		nc:     nc,
		ctx:    ctx,
		onErr:  onErr,
		mem:    mem,
		chunks: make(chan []byte, pipeBuffers),
		tokens: make(chan struct{}, pipeBuffers),
		stop:   make(chan struct{}),
	}
	p.wg.Add(1)
	go p.readLoop()
	return p
}

func (p *inputPipe) readLoop() {
	defer p.wg.Done()
	size := pipeMinRead
	for {
		select {
		case p.tokens <- struct{}{}:
		case <-p.stop:
			return
		}
		waitReadable(p.nc) // before taking a buffer: an idle client may send nothing for hours
		buf := getPipeBuf(size)
		p.mem.add(cap(buf))
		n, err := p.nc.Read(buf)
		size = nextReadSize(size, n)
		if n > 0 {
			// Never blocks: chunks holds as many buffers as are in flight.
			p.chunks <- buf[:n]
		} else {
			p.put(buf)
			<-p.tokens
		}
		if err != nil {
			p.err = err
			close(p.chunks)
			p.onErr(err)
			return
		}
	}
}

// Read implements io.Reader for the chunk reader. It prefers buffered data to
// the context, so messages the client sent before disconnecting are still
// seen, and returns the context's cause once the connection is canceled and
// nothing is buffered.
func (p *inputPipe) Read(b []byte) (int, error) {
	if err := p.wait(); err != nil {
		return 0, err
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	if len(p.cur) == 0 {
		// Consumed: the buffer goes back at once, so that a connection
		// waiting for its client holds none on this side.
		p.put(p.buf)
		p.buf = nil
		<-p.tokens
	}
	return n, nil
}

// wait blocks until the pipe has bytes to read (or fails as Read does),
// without consuming them: msgReader waits so before it allocates a buffer
// for them, so that a connection waiting for its client holds none.
func (p *inputPipe) wait() error {
	for len(p.cur) == 0 {
		var (
			chunk []byte
			ok    bool
		)
		var intr <-chan struct{}
		if p.intr != nil {
			intr = p.intr.Done()
		}
		select {
		case chunk, ok = <-p.chunks:
		default:
			select {
			case chunk, ok = <-p.chunks:
			case <-p.ctx.Done():
				return context.Cause(p.ctx)
			case <-intr:
				return context.Cause(p.intr)
			}
		}
		if !ok {
			return p.err
		}
		p.cur, p.buf = chunk, chunk
	}
	return nil
}

// interruptBy makes wait give up when ctx is done.
func (p *inputPipe) interruptBy(ctx context.Context) (stop func()) {
	p.intr = ctx
	return func() { p.intr = nil }
}

// put returns a consumed buffer to its pool.
func (p *inputPipe) put(buf []byte) {
	p.mem.add(-cap(buf))
	putPipeBuf(buf)
}

// close stops the read goroutine and waits for it. The caller must have closed
// the socket first, or set a past read deadline, so that a blocked Read
// returns.
func (p *inputPipe) close() {
	close(p.stop)
	p.wg.Wait()
}
