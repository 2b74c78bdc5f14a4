package feed

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCRC32Combine: the combined CRC of A and B is the CRC of A then B,
// for lengths around the operator's bits (0, 1, powers of two and their
// neighbours) and random ones.
func TestCRC32Combine(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	lengths := []int{0, 1, 2, 3, 7, 8, 9, 255, 256, 257, 4095, 4096, 65535, 65536, 65537, 1 << 20}
	for range 50 {
		lengths = append(lengths, rnd.IntN(100000))
	}
	for _, n := range lengths {
		a := make([]byte, rnd.IntN(300))
		b := make([]byte, n)
		for i := range a {
			a[i] = byte(rnd.Uint32())
		}
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		want := crc32.ChecksumIEEE(append(append([]byte(nil), a...), b...))
		got := crc32Combine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), crc32CombineOp(int64(n)))
		if got != want {
			t.Fatalf("combine of %d and %d bytes: got %08x, want %08x", len(a), n, got, want)
		}
	}
}

// spliced builds a gzip member of data cut at the given points, each
// piece in turn the stream's own bytes (appendOwn) or a shared piece
// (deflatePiece, which leaves out a last byte: a separator the stream
// adds as its own, as stream.piece does), as shared[i] says, and after
// it a sync marker (the end of a batch) when flush[i] says. It returns
// the member and, at each sync marker, the member up to it and the
// length of the data before it.
func spliced(data []byte, cuts []int, shared, flush []bool) ([]byte, []prefix) {
	z := &gzipStream{}
	out := z.header(nil)
	var prefixes []prefix
	start := 0
	for i, end := range slices.Concat(cuts, []int{len(data)}) {
		p := data[start:end]
		start = end
		switch {
		case len(p) > 0 && shared[i%len(shared)]:
			zp, _ := deflatePiece(append(p[:len(p):len(p)], '!'))
			z.add(zp)
			out = append(out, zp.deflate...)
		default:
			out = z.appendOwn(out, p)
		}
		if flush[i%len(flush)] {
			out = z.flush(out)
			prefixes = append(prefixes, prefix{bytes.Clone(out), end})
		}
	}
	return z.close(out), prefixes
}

// prefix is a member's bytes up to a sync marker, and the length of the
// data they carry.
type prefix struct {
	member []byte
	n      int
}

// starvingReader reads b, then reports that it was asked for more.
type starvingReader struct {
	b       []byte
	starved bool
}

func (r *starvingReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		r.starved = true
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// checkSpliced checks that the member of data cut at cuts is a valid gzip
// stream of data (its CRC and length checked by the reader), and that
// each prefix of pieces decodes, without the rest, to the data up to that
// piece: a decoder has every byte a stream wrote once it is written.
func checkSpliced(t *testing.T, data []byte, cuts []int, shared, flush []bool) {
	t.Helper()
	member, prefixes := spliced(data, cuts, shared, flush)
	zr, err := gzip.NewReader(bytes.NewReader(member))
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("read the member (cuts %v): %v", cuts, err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("the member decodes to %d bytes, want the %d of the data (cuts %v)", len(got), len(data), cuts)
	}
	for i, p := range prefixes {
		// The decoder must hand out every byte before the marker without
		// asking for more: a stream's client has a batch once it is
		// written, not when the next one comes.
		src := &starvingReader{b: p.member[len(gzipHeader):]}
		got := make([]byte, p.n)
		_, err := io.ReadFull(flate.NewReader(src), got)
		if err != nil || src.starved {
			t.Fatalf("the member up to sync marker %d: read %v, asked for bytes past it %v; want all %d bytes before it without (cuts %v)", i, err, src.starved, p.n, cuts)
		}
		if want := data[:p.n]; !bytes.Equal(got, want) {
			t.Fatalf("the member up to sync marker %d decodes to other bytes than the data's %d (cuts %v)", i, p.n, cuts)
		}
	}
}

// TestSplicedGzip: random data (JSON-like, repetitive and random) cut
// into random pieces, each compressed on its own or added as the
// stream's own, is one valid gzip stream of the data, decodable piece by
// piece.
func TestSplicedGzip(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		n := rnd.IntN(200000)
		if rnd.IntN(4) == 0 {
			n = rnd.IntN(100)
		}
		data := sampleData(rnd, n)
		var cuts []int
		for range rnd.IntN(12) {
			cuts = append(cuts, rnd.IntN(n+1))
		}
		slices.Sort(cuts)
		shared, flush := make([]bool, 1+rnd.IntN(4)), make([]bool, 1+rnd.IntN(3))
		for i := range shared {
			shared[i] = rnd.IntN(2) == 0
		}
		for i := range flush {
			flush[i] = rnd.IntN(2) == 0
		}
		checkSpliced(t, data, cuts, shared, flush)
	}
}

// FuzzSplicedGzip is TestSplicedGzip's property on the fuzzer's data and
// cuts.
func FuzzSplicedGzip(f *testing.F) {
	f.Add([]byte(`{"mz_timestamp":"1","mz_diff":1,"a":"x"},{"mz_timestamp":"1","mz_diff":1,"a":"y"},`), uint64(7), uint8(5))
	f.Add([]byte("event: rows\ndata: []\n\n"), uint64(0), uint8(0))
	f.Add(bytes.Repeat([]byte("abc"), 30000), uint64(1<<40|12345), uint8(0xaa))
	f.Fuzz(func(t *testing.T, data []byte, cutSeed uint64, kinds uint8) {
		rnd := rand.New(rand.NewPCG(cutSeed, uint64(kinds)))
		var cuts []int
		for range int(cutSeed % 9) {
			cuts = append(cuts, rnd.IntN(len(data)+1))
		}
		slices.Sort(cuts)
		shared, flush := make([]bool, 8), make([]bool, 5)
		for i := range shared {
			shared[i] = kinds&(1<<i) != 0
		}
		for i := range flush {
			flush[i] = (cutSeed>>(32+i))&1 != 0
		}
		checkSpliced(t, data, cuts, shared, flush)
	})
}

// sampleData is n bytes of JSON-like rows: repeated keys, random values.
func sampleData(rnd *rand.Rand, n int) []byte {
	var b []byte
	for len(b) < n {
		switch rnd.IntN(3) {
		case 0:
			b = append(b, `{"mz_timestamp":"17000000001`...)
			b = append(b, byte('0'+rnd.IntN(10)), '"', ',')
		case 1:
			for range rnd.IntN(40) {
				b = append(b, byte(rnd.Uint32()))
			}
		default:
			b = append(b, `"payload":"changed-`...)
			b = append(b, bytes.Repeat([]byte{byte('a' + rnd.IntN(26))}, rnd.IntN(60))...)
		}
	}
	return b[:n]
}

// TestAcceptsGzip: the codings that accept gzip, and q=0 that refuses it,
// also past a "*".
func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"":                           false,
		"gzip":                       true,
		"gzip, deflate, br, zstd":    true,
		"deflate, br":                false,
		"GZIP;q=0.5":                 true,
		"gzip;q=0":                   false,
		"gzip; q=0.0, identity":      false,
		"*":                          true,
		"br, *;q=0":                  false,
		"x-gzip":                     true,
		"identity;q=1, gzip;q=0.001": true,
		// "*" is the codings not named: gzip refused by name stays so.
		"gzip;q=0, *":   false,
		"*, gzip;q=0":   false,
		"*;q=0, gzip":   true,
		"br;q=0, *;q=1": true,
	} {
		if got := acceptsGzip(header); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", header, got, want)
		}
	}
}
