package codec

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/shardtail/shardtail/row"
)

// smallPart is a part of every type with NULLs, in three record batches.
func smallPart(t testing.TB) (row.Schema, []row.Update, []byte) {
	t.Helper()
	s := allTypesSchema(true)
	var us []row.Update
	for i := range 9 {
		r := make(row.Row, len(allTypes))
		for j, typ := range allTypes {
			vals := edgeValues(typ)
			if (i+j)%4 != 0 {
				r[j] = vals[(i+j)%len(vals)]
			}
		}
		if r[7] != nil {
			r[7] = "short" // keep the part small
		}
		us = append(us, row.Update{Row: r, T: uint64(i), Diff: 1})
	}
	us = row.Consolidate(us)
	data, _, err := Config{BatchRows: 3}.EncodePart(s, us)
	if err != nil {
		t.Fatal(err)
	}
	return s, us, data
}

// checkDecodeOutcome decodes data both ways; each must fail cleanly or
// return valid, consolidated updates that round-trip.
func checkDecodeOutcome(t testing.TB, s row.Schema, data []byte) bool {
	t.Helper()
	got, err := DecodePart(s, data)
	if _, rerr := readAll(Config{}, s, data); (err == nil) != (rerr == nil) {
		t.Fatalf("DecodePart err %v, PartReader err %v", err, rerr)
	}
	if err != nil {
		checkClassified(t, err)
		return false
	}
	again, _, err := EncodePart(s, got)
	if err != nil {
		t.Fatalf("decoded updates do not re-encode: %v", err)
	}
	if err := diffUpdates(got, mustDecode(t, s, again)); err != nil {
		t.Fatalf("decoded updates do not round-trip: %v", err)
	}
	return true
}

// checkClassified fails unless err is one of the decode sentinels.
func checkClassified(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrSchemaMismatch) &&
		!errors.Is(err, ErrUnsupportedVersion) && !errors.Is(err, ErrTooLarge) {
		t.Fatalf("unclassified error: %v", err)
	}
}

// TestCorruptEveryByte changes each byte of a small part in turn. Every
// result is an error or a valid decode, never a panic; and a change that
// still decodes is harmless: it decodes to the original updates. (Such
// bytes are padding, flatbuffer slack and zstd frame header fields the
// content checksum does not cover.)
func TestCorruptEveryByte(t *testing.T) {
	s, us, data := smallPart(t)
	masks := []byte{0x01, 0x80, 0xff}
	if testing.Short() {
		masks = masks[2:]
	}
	decoded := 0
	for i := range data {
		for _, mask := range masks {
			mut := append([]byte(nil), data...)
			mut[i] ^= mask
			got, err := DecodePart(s, mut)
			if _, rerr := readAll(Config{}, s, mut); (err == nil) != (rerr == nil) {
				t.Fatalf("byte %d ^ %#x: DecodePart err %v, PartReader err %v", i, mask, err, rerr)
			}
			if err != nil {
				checkClassified(t, err)
				continue
			}
			decoded++
			if err := diffUpdates(us, got); err != nil {
				t.Fatalf("byte %d ^ %#x decodes to other updates: %v", i, mask, err)
			}
		}
	}
	t.Logf("%d bytes x %d changes: %d decode, all to the original updates", len(data), len(masks), decoded)
}

// TestTruncateEveryOffset: every proper prefix of a part is an error (the
// trailing magic and footer are missing).
func TestTruncateEveryOffset(t *testing.T) {
	s, _, data := smallPart(t)
	for n := range len(data) {
		if _, err := DecodePart(s, data[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("prefix of %d bytes: got %v, want ErrCorrupt", n, err)
		}
	}
}

// positions of fields inside a part, found with the reader's own parsing.
type partLayout struct {
	footerStart int
	blocks      []fileBlock
}

func layoutOf(t *testing.T, data []byte) partLayout {
	t.Helper()
	fi, err := readFooter(data)
	if err != nil {
		t.Fatal(err)
	}
	size := int(binary.LittleEndian.Uint32(data[len(data)-10:]))
	return partLayout{footerStart: len(data) - 10 - size, blocks: fi.blocks}
}

// recordBatchTable returns the RecordBatch table of block b and the
// absolute offset of its buffer.
func recordBatchTable(t *testing.T, data []byte, b fileBlock) (fbTable, int) {
	t.Helper()
	base := int(b.offset) + 8
	mt, err := fbRoot(data[base : int(b.offset)+int(b.meta)])
	if err != nil {
		t.Fatal(err)
	}
	rb, ok, err := mt.table(2)
	if err != nil || !ok {
		t.Fatal("no record batch", err)
	}
	return rb, base
}

// TestAbsurdHeaders crafts headers that claim huge sizes. Each must fail
// without allocating anywhere near what it claims.
func TestAbsurdHeaders(t *testing.T) {
	s, _, data := smallPart(t)
	l := layoutOf(t, data)
	blk := l.blocks[0]
	m, err := readBatchMessage(data, blk)
	if err != nil {
		t.Fatal(err)
	}
	bodyStart := int(blk.offset) + int(blk.meta)
	// The first non-empty buffer: its 8-byte uncompressed size prefix.
	prefixAt := -1
	for _, b := range m.buffers {
		if b.length > 0 {
			prefixAt = bodyStart + int(b.offset)
			break
		}
	}
	rb, rbBase := recordBatchTable(t, data, blk)
	lengthAt, err := rb.scalar(0, 8)
	if err != nil || lengthAt < 0 {
		t.Fatal("no length", err)
	}
	ft, err := fbRoot(data[l.footerStart : len(data)-10])
	if err != nil {
		t.Fatal(err)
	}
	st, _, _ := ft.table(1)
	fieldsAt, _ := st.ref(1)
	blocksAt, _ := ft.ref(3)

	put64 := func(at int, v uint64) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint64(b[at:], v) }
	}
	put32 := func(at int, v uint32) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint32(b[at:], v) }
	}
	for _, tc := range []struct {
		name string
		edit func([]byte)
		want error
	}{
		{"BufferClaimsExabyte", put64(prefixAt, 1<<60), ErrTooLarge},
		{"BufferClaimsNegative", put64(prefixAt, 1<<63), ErrTooLarge},
		{"BufferClaimsMoreThanZstdCanYield", put64(prefixAt, 100<<20), ErrCorrupt},
		{"BufferClaimsALittleMore", put64(prefixAt, 1<<16), ErrCorrupt},
		{"BatchClaimsTrillionRows", put64(rbBase+lengthAt, 1<<40), ErrTooLarge},
		{"BatchClaimsOneMoreRow", put64(rbBase+lengthAt, 4), ErrCorrupt},
		{"BatchClaimsNegativeRows", put64(rbBase+lengthAt, 1<<63), ErrCorrupt},
		{"FooterClaimsBillionFields", put32(l.footerStart+fieldsAt, 1<<30), ErrCorrupt},
		{"FooterClaimsBillionBatches", put32(l.footerStart+blocksAt, 1<<30), ErrCorrupt},
		{"FooterLengthHuge", put32(len(data)-10, 1<<31-1), ErrCorrupt},
		{"BlockOffsetPastEnd", func(b []byte) { binary.LittleEndian.PutUint64(b[l.footerStart+blocksAt+4:], 1<<40) }, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mut := append([]byte(nil), data...)
			tc.edit(mut)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := DecodePart(s, mut)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 8<<20 {
				t.Fatalf("allocated %d bytes to reject it", n)
			}
		})
	}
}
