package pgwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"sync/atomic"
	"testing"
)

// errAgain is a read that fails and may be retried, like a COPY read
// interrupted by a statement context.
var errAgain = errors.New("try again")

// cutReader returns stream in reads sized by cuts, in turn: a cut of c gives
// at most c bytes, and 0 gives errAgain instead. cuts must not be all zeros.
type cutReader struct {
	stream []byte
	cuts   []byte
	i      int
}

func (r *cutReader) Read(p []byte) (int, error) {
	if len(r.stream) == 0 {
		return 0, io.EOF
	}
	c := 64
	if len(r.cuts) > 0 {
		c = int(r.cuts[r.i%len(r.cuts)])
		r.i++
	}
	if c == 0 {
		return 0, errAgain
	}
	n := copy(p[:min(len(p), c)], r.stream)
	r.stream = r.stream[n:]
	return n, nil
}

// FuzzMsgReader reads a stream of messages through msgReader, the way
// pgproto3's Backend.Receive asks for them, in reads of arbitrary sizes with
// retried failures in between, and compares every header and body with a
// plain reader over the same bytes. It checks that a body never costs more
// than a quarter more than what has arrived of it (or bodyStartLen), whatever its header
// claims, and that no byte handed out is ever overwritten.
func FuzzMsgReader(f *testing.F) {
	msg := func(typ byte, body string) []byte {
		return append(binary.BigEndian.AppendUint32([]byte{typ}, uint32(len(body)+4)), body...)
	}
	f.Add(msg('Q', "select 1\x00"), []byte{})
	f.Add(bytes.Join([][]byte{msg('P', "\x00echo $1\x00\x00\x00"), msg('S', ""), msg('Q', string(bytes.Repeat([]byte("ab"), 5000)))}, nil), []byte{3, 0, 96, 1})
	f.Add(append(msg('d', string(bytes.Repeat([]byte{7}, 40000))), msg('c', "")...), []byte{96, 96, 0, 5})
	f.Add([]byte("Q\x04\x00\x00\x00select"), []byte{1, 0})  // claims 64 MiB, sends 6 bytes
	f.Add([]byte("Q\x7f\xff\xff\xffselect"), []byte{1})     // over the limit
	f.Add([]byte("S\x00\x00\x00\x02"), []byte{})            // shorter than its length field
	f.Add([]byte("X\x00\x00\x27\x15"+"xxxx"), []byte{2, 0}) // a small message over its limit

	const maxLarge = 1 << 30 // claims can be huge; what arrives is not
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		if bytes.Count(cuts, []byte{0}) == len(cuts) {
			cuts = nil // only retries would never get anywhere
		}
		mem := memAccount{total: new(atomic.Int64)}
		r := newMsgReader(&cutReader{stream: stream, cuts: cuts}, maxLarge, &mem)
		model := bytes.NewReader(stream)
		type handed struct{ got, want []byte }
		var out []handed

		// next asks r for n bytes, retrying errAgain as Backend.Receive
		// does on its next call, and compares them with the model's; it
		// reports false at the end of the stream.
		next := func(n int) ([]byte, bool) {
			// Only what is left: the model must not allocate a claim either.
			want := make([]byte, min(n, model.Len()))
			_, werr := io.ReadFull(model, want)
			if len(want) < n {
				werr = io.ErrUnexpectedEOF
			}
			for {
				got, err := r.Next(n)
				switch {
				case errors.Is(err, errAgain):
					checkMemory(t, r, &mem)
					continue
				case werr != nil && err == nil:
					t.Fatalf("Next(%d) = %d bytes, want an error: the stream ended", n, len(got))
				case werr != nil:
					return nil, false
				case errors.Is(err, ErrMessageTooLarge) && n == 5:
					if size := int64(binary.BigEndian.Uint32(want[1:])) - 4; size <= int64(r.limit(want[0])) {
						t.Fatalf("header %q: %v, but %d bytes is within the limit", want, err, size)
					}
					return nil, false
				case err != nil:
					t.Fatalf("Next(%d): %v, want %q", n, err, want)
				case !bytes.Equal(got, want):
					t.Fatalf("Next(%d) = %q, want %q", n, got, want)
				}
				checkMemory(t, r, &mem)
				out = append(out, handed{got, want})
				return got, true
			}
		}
		for {
			hdr, ok := next(5)
			if !ok {
				break
			}
			size := int64(binary.BigEndian.Uint32(hdr[1:])) - 4
			if size > int64(r.limit(hdr[0])) {
				t.Fatalf("header %q: %d bytes over the limit of %d accepted", hdr, size, r.limit(hdr[0]))
			}
			if size < 0 {
				break // Backend.Receive rejects it
			}
			if _, ok := next(int(size)); !ok {
				break
			}
		}
		for _, h := range out {
			if !bytes.Equal(h.got, h.want) {
				t.Fatalf("handed-out bytes overwritten: %q, were %q", h.got, h.want)
			}
		}
		r.dropBody()
		if got, want := mem.held.Load(), int64(len(r.buf)); got != want {
			t.Fatalf("after the last message: %d bytes held, want %d (the header buffer)", got, want)
		}
	})
}

// checkMemory checks what msgReader holds and has charged: a header buffer
// and a body at most a quarter more than what has arrived of it.
func checkMemory(t *testing.T, r *msgReader, mem *memAccount) {
	t.Helper()
	if len(r.buf) > smallBufLen {
		t.Fatalf("header buffer of %d bytes, want at most %d", len(r.buf), smallBufLen)
	}
	if c, l := cap(r.body), len(r.body); c > max(bodyStartLen, l+l/4) {
		t.Fatalf("body buffer of %d bytes for %d received, want at most max(%d, a quarter more)", c, l, bodyStartLen)
	}
	if got, want := mem.held.Load(), int64(len(r.buf)+cap(r.body)); got != want {
		t.Fatalf("%d bytes charged, want %d (header buffer %d, body %d)", got, want, len(r.buf), cap(r.body))
	}
	if got, want := mem.total.Load(), mem.held.Load(); got != want {
		t.Fatalf("server total %d, connection %d", got, want)
	}
}
