package pgwire

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"

	"github.com/jackc/chunkreader/v2"
	"github.com/jackc/pgproto3/v2"
)

// limitReader is the ChunkReader under pgproto3.Backend. pgproto3/v2 reads a
// 5-byte header and then allocates and reads the whole body, with no limit of
// its own; limitReader checks each header against the limit of its message
// type first, so a client cannot make the server allocate more than the limit
// by sending a length.
type limitReader struct {
	cr         pgproto3.ChunkReader
	maxLarge   int   // body limit of Query, Parse, Bind, CopyData, FunctionCall
	wantHeader bool  // the next Next call reads a message header
	readErr    error // error of the last Next: tells a read failure from a decode failure
}

func newLimitReader(r io.Reader, maxLarge int) *limitReader {
	// The chunk reader hands out slices of its buffer and allocates a new
	// one when it runs out, so its size is only what an idle connection
	// keeps: small (bigger messages get buffers of their own size).
	cr, err := chunkreader.NewConfig(r, chunkreader.Config{MinBufLen: 1 << 10})
	if err != nil {
		panic(err) // a constant, valid config
	}
	return &limitReader{cr: cr, maxLarge: maxLarge, wantHeader: true}
}

// Next implements pgproto3.ChunkReader. Backend.Receive calls it with 5 for a
// header and then with the body length. A read that fails (an interrupted COPY
// read) is repeated by the next Receive with the same n, and the chunk reader
// keeps what it had read, so the alternation only advances on success.
func (r *limitReader) Next(n int) (buf []byte, err error) {
	defer func() { r.readErr = err }()
	if !r.wantHeader {
		buf, err = r.cr.Next(n)
		if err == nil {
			r.wantHeader = true
		}
		return buf, err
	}
	buf, err = r.cr.Next(n)
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

// limit returns the largest body allowed for a message type, as Postgres's
// SocketBackend decides it.
func (r *limitReader) limit(typ byte) int {
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
// authentication, under a deadline) to the input pipe without losing the bytes
// it has buffered.
type switchReader struct{ r io.Reader }

func (s *switchReader) Read(p []byte) (int, error) { return s.r.Read(p) }

// Input pipe sizing. An idle connection (thousands of SUBSCRIBE clients
// hardly send anything) holds one small buffer, in its blocked read; a
// connection receiving a stream (COPY FROM) reads into larger ones, one
// being filled while another is consumed. Buffers come from pools shared by
// all connections and go back as soon as they are consumed.
const (
	pipeBuffers = 2         // buffers in flight per connection
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

// inputPipe reads the socket on its own goroutine, so that a connection notices
// its client disconnecting while its own goroutine is busy streaming a result
// or blocked waiting for one: the read error cancels the connection context,
// and with it the running statement. It is the only reader of the socket after
// authentication. The goroutine is owned by the connection: close stops it and
// waits for it.
type inputPipe struct {
	nc     net.Conn
	ctx    context.Context // the connection's; Read gives up when it is done
	onErr  func(error)     // called once with the read error, from the read goroutine
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

func newInputPipe(ctx context.Context, nc net.Conn, onErr func(error)) *inputPipe {
	p := &inputPipe{
		nc:     nc,
		ctx:    ctx,
		onErr:  onErr,
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
		buf := getPipeBuf(size)
		n, err := p.nc.Read(buf)
		size = nextReadSize(size, n)
		if n > 0 {
			// Never blocks: chunks holds as many buffers as are in flight.
			p.chunks <- buf[:n]
		} else {
			putPipeBuf(buf)
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
				return 0, context.Cause(p.ctx)
			case <-intr:
				return 0, context.Cause(p.intr)
			}
		}
		if !ok {
			return 0, p.err
		}
		p.cur, p.buf = chunk, chunk
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	if len(p.cur) == 0 {
		// Consumed: the buffer goes back at once, so that a connection
		// waiting for its client holds none on this side.
		putPipeBuf(p.buf)
		p.buf = nil
		<-p.tokens
	}
	return n, nil
}

// close stops the read goroutine and waits for it. The caller must have closed
// the socket first, or set a past read deadline, so that a blocked Read
// returns.
func (p *inputPipe) close() {
	close(p.stop)
	p.wg.Wait()
}
