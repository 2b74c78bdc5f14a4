package feed

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/flate"

	"github.com/shardtail/shardtail/formatter"
)

// A stream with Content-Encoding: gzip is one gzip member (RFC 1952): a
// 10-byte header, one DEFLATE stream (RFC 1951) of blocks, and a trailer
// of the CRC-32 and the length (mod 2^32) of the uncompressed bytes. The
// DEFLATE stream is spliced together from two kinds of pieces, each a
// sequence of non-final blocks that ends on a byte boundary:
//
//   - a Shared run of row objects (a snapshot piece, a listen batch's rows
//     of one time) is compressed once per shape and encoding, on its own,
//     with a fresh dictionary (no back-reference reaches before it), and
//     ended with a sync flush (an empty stored block) rather than a final
//     block: every stream of the shape splices those same bytes in
//     (zpiece, kept with the rows by formatter.Derived and charged to the
//     memory budget as their other encodings are);
//   - the stream's own bytes (the SSE preamble and framing, progress
//     events, heartbeats, rows that no other stream shares) go in as
//     stored blocks, or when they are long as one stateless DEFLATE run
//     (flate.StatelessDeflate, which keeps no state between calls), also
//     ending aligned.
//
// Each batch ends with a sync marker (an empty stored block: gzipSync),
// since a decoder hands out the bytes it decoded only at one (Go's
// compress/flate waits for the next block's header otherwise).
//
// The stream's CRC is the CRC of its pieces' bytes in order: a stream
// updates it over its own bytes and combines it with a shared piece's CRC
// (computed once, with its length's combine operator) in a few dozen
// operations, without reading the piece. At a clean end (UP TO, reset,
// error) the stream writes an empty final block and the trailer. Since
// every piece ends aligned and non-final and every batch with a sync
// marker, a decoder (a browser's, Go's gzip.Reader) has every byte of a
// batch once the batch is written: events arrive as they are sent, not
// at the stream's end.

// Compression values (Config.Compression).
const (
	// CompressionGzip answers Content-Encoding: gzip to a request that
	// accepts it (Accept-Encoding: gzip, as EventSource and Go's
	// http.Client send).
	CompressionGzip = "gzip"
	// CompressionNone never compresses.
	CompressionNone = "none"
)

// gzipHeader is a gzip member's header: ID1 ID2, CM 8 (deflate), no
// flags, no modification time, XFL 0, OS 255 (unknown).
const gzipHeader = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"

// gzipEnd is an empty final stored block: the DEFLATE stream's end.
const gzipEnd = "\x01\x00\x00\xff\xff"

// gzipSync is an empty non-final stored block, a sync flush's marker: a
// decoder hands out what it decoded at such a block (or when its window
// is full), not at the end of a block with data (Go's compress/flate
// reads the next block's header first, and waits for it), so every
// batch a stream writes ends with one.
const gzipSync = "\x00\x00\x00\xff\xff"

// pieceLevel is the compression level of a shared piece: compressed once
// for every subscriber of the shape, it is worth more effort than a
// stream's own bytes get.
const pieceLevel = 5

// statelessMin is the length from which a stream's own bytes are
// compressed (flate.StatelessDeflate) rather than stored: framing and
// progress events are shorter, rows that only this stream gets (the
// dataflow path's) are longer.
const statelessMin = 512

// acceptsGzip reports whether an Accept-Encoding header value accepts
// gzip: a gzip (or x-gzip) coding without q=0, or, when neither is
// named, * without q=0.
func acceptsGzip(header string) bool {
	// "*" stands for the codings the header does not name (RFC 9110).
	named, namedOK, anyOK := false, false, false
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		switch coding {
		case "gzip", "x-gzip", "*":
		default:
			continue
		}
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			k, v, _ := strings.Cut(p, "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		if coding == "*" {
			anyOK = anyOK || q > 0
		} else {
			named, namedOK = true, namedOK || q > 0
		}
	}
	if named {
		return namedOK
	}
	return anyOK
}

// zpiece is a shared run of row objects compressed once (deflatePiece).
type zpiece struct {
	// deflate are non-final DEFLATE blocks ending on a byte boundary,
	// referring to nothing before them.
	deflate []byte
	n       int64  // the uncompressed length
	crc     uint32 // of the uncompressed bytes
	op      uint32 // crc32CombineOp(n)
}

// deflaters are the flate.Writers that compress shared pieces: each
// holds its level's tables, too large to make per piece.
var deflaters sync.Pool

// deflatePiece compresses a Shared run of row objects without its last
// byte (the separator, which a stream leaves out after an event's last
// object): formatter.Derived's derive, for the key "gzip". Its second
// result is the bytes it keeps, for the memory budget.
func deflatePiece(b []byte) (*zpiece, int64) {
	b = b[:len(b)-1]
	var out bytes.Buffer
	out.Grow(len(b)/4 + 64)
	fw, _ := deflaters.Get().(*flate.Writer)
	if fw == nil {
		fw, _ = flate.NewWriter(&out, pieceLevel) // a valid level: no error
	} else {
		fw.Reset(&out)
	}
	// Writes to a bytes.Buffer do not fail. Flush, not Close: a sync
	// flush ends aligned without a final block.
	_, _ = fw.Write(b)
	_ = fw.Flush()
	fw.Reset(nil) // not holding out
	deflaters.Put(fw)
	z := &zpiece{deflate: bytes.Clone(out.Bytes()), n: int64(len(b)), crc: crc32.ChecksumIEEE(b), op: crc32CombineOp(int64(len(b)))}
	const overhead = 64 // the zpiece and the derived entry
	return z, int64(cap(z.deflate)) + overhead
}

// sharedPiece returns p compressed, computed once for every stream of its
// shape (formatter.Derived).
func sharedPiece(p formatter.Piece) *zpiece {
	return formatter.Derived(p, CompressionGzip, deflatePiece)
}

// gzipStream is the state of one response's gzip member: the CRC and
// length of what it carried so far.
type gzipStream struct {
	crc  uint32
	size int64
	// w is StatelessDeflate's writer, appending to a buffer (kept here, so
	// that it is not allocated per call).
	w appender
}

// appender is an io.Writer that appends to b.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// header appends the member's header.
func (z *gzipStream) header(dst []byte) []byte { return append(dst, gzipHeader...) }

// appendOwn appends b, bytes of this stream's own, as blocks: stored
// blocks, or a stateless DEFLATE run when b is long.
func (z *gzipStream) appendOwn(dst, b []byte) []byte {
	z.crc = crc32.Update(z.crc, crc32.IEEETable, b)
	z.size += int64(len(b))
	if len(b) >= statelessMin {
		z.w.b = dst
		_ = flate.StatelessDeflate(&z.w, b, false, nil) // an appender does not fail
		dst, z.w.b = z.w.b, nil
		return dst
	}
	for len(b) > 0 {
		n := min(len(b), 0xffff)
		// BFINAL 0, BTYPE 00 (stored), padded to the byte; LEN, NLEN.
		dst = append(dst, 0, byte(n), byte(n>>8), ^byte(n), ^byte(n>>8))
		dst = append(dst, b[:n]...)
		b = b[n:]
	}
	return dst
}

// add accounts for a shared piece the stream carries (its deflate bytes,
// which the caller writes).
func (z *gzipStream) add(p *zpiece) {
	z.crc = crc32Combine(z.crc, p.crc, p.op)
	z.size += p.n
}

// flush appends a sync marker: the decoder hands out everything before it.
func (z *gzipStream) flush(dst []byte) []byte { return append(dst, gzipSync...) }

// close appends the end of the DEFLATE stream and the trailer.
func (z *gzipStream) close(dst []byte) []byte {
	dst = append(dst, gzipEnd...)
	dst = binary.LittleEndian.AppendUint32(dst, z.crc)
	return binary.LittleEndian.AppendUint32(dst, uint32(z.size))
}

// CRC-32 combination (zlib's crc32_combine_gen and crc32_combine_op): the
// CRC of A then B from the CRC of A, the CRC of B and B's length, without
// reading either. A CRC is a polynomial over GF(2) reduced modulo the
// IEEE polynomial; appending B multiplies A's by x^(8·len(B)).

// crcPoly is the IEEE polynomial, reflected, x^32 implied.
const crcPoly = 0xedb88320

// crcX2n holds x^(2^k) mod p for k = 0..31.
var crcX2n = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	t[0] = p
	for k := 1; k < 32; k++ {
		p = crcMultMod(p, p)
		t[k] = p
	}
	return t
}()

// crcMultMod returns a·b mod p (reflected).
func crcMultMod(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				break
			}
		}
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// crc32CombineOp returns the operator that combines a CRC with the CRC of
// n bytes after it: x^(8n) mod p.
func crc32CombineOp(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = crcMultMod(crcX2n[k&31], p)
		}
	}
	return p
}

// crc32Combine returns the CRC of A then B, from A's CRC, B's CRC and
// crc32CombineOp(len(B)).
func crc32Combine(crcA, crcB, op uint32) uint32 {
	return crcMultMod(op, crcA) ^ crcB
}
