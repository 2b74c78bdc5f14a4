package codec

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/shardtail/shardtail/row"
)

// edgeRows returns, per type, values that stress the codec: extremes,
// zero, NaN and infinities, empty and non-ASCII text.
func edgeValues(t row.Type) []row.Datum {
	switch t {
	case row.TypeBool:
		return []row.Datum{false, true}
	case row.TypeInt2:
		return []row.Datum{int16(math.MinInt16), int16(-1), int16(0), int16(255), int16(256), int16(math.MaxInt16)}
	case row.TypeInt4:
		return []row.Datum{int32(math.MinInt32), int32(-1), int32(0), int32(1 << 20), int32(math.MaxInt32)}
	case row.TypeInt8:
		return []row.Datum{int64(math.MinInt64), int64(-1), int64(0), int64(1 << 40), int64(math.MaxInt64)}
	case row.TypeFloat4:
		return []row.Datum{float32(math.Inf(-1)), float32(-math.MaxFloat32), float32(-0.5), float32(0), float32(math.SmallestNonzeroFloat32), float32(math.Inf(1)), float32(math.NaN())}
	case row.TypeFloat8:
		return []row.Datum{math.Inf(-1), -math.MaxFloat64, math.Copysign(0, -1) - 1, 0.0, math.SmallestNonzeroFloat64, math.Inf(1), math.NaN()}
	case row.TypeNumeric:
		return []row.Datum{row.Numeric("-12345678901234567890.5"), row.Numeric("-1"), row.Numeric("0"), row.Numeric("0.000001"), row.Numeric("1" + strings.Repeat("0", 100)), row.Numeric("NaN")}
	case row.TypeText:
		return []row.Datum{"", " ", "a", "héllo wörld", "日本語テキスト", "emoji 🎉", "nul\x00byte", strings.Repeat("x", 10000)}
	case row.TypeBytea:
		return []row.Datum{[]byte{}, []byte{0}, []byte{0xff, 0xfe, 0x80}, []byte("not utf8 \xc3\x28")}
	case row.TypeTimestamp:
		return []row.Datum{row.Timestamp(math.MinInt64), row.Timestamp(-1), row.Timestamp(0), row.Timestamp(1_700_000_000_000_000), row.Timestamp(math.MaxInt64)}
	case row.TypeTimestampTZ:
		return []row.Datum{row.TimestampTZ(math.MinInt64), row.TimestampTZ(0), row.TimestampTZ(math.MaxInt64)}
	case row.TypeDate:
		return []row.Datum{row.Date(math.MinInt32), row.Date(0), row.Date(19000), row.Date(math.MaxInt32)}
	case row.TypeJSONB:
		return []row.Datum{row.JSON(`null`), row.JSON(`""`), row.JSON(`{"a":[1,2,{"b":"é"}]}`), row.JSON(`[]`), row.JSON(`1.5e300`)}
	case row.TypeUUID:
		return []row.Datum{row.UUID{}, row.UUID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8}, row.UUID{0: 0xff, 15: 0xff}}
	}
	panic(t)
}

// TestRoundtripEveryType round-trips each type's edge values, alone and
// with NULLs, one update per value and time.
func TestRoundtripEveryType(t *testing.T) {
	for _, typ := range allTypes {
		for _, nullable := range []bool{false, true} {
			name := typeTokens[typ]
			if nullable {
				name += "Null"
			}
			t.Run(name, func(t *testing.T) {
				s := row.Schema{Columns: []row.Column{{Name: "v", Type: typ, Nullable: nullable}, {Name: "k", Type: row.TypeInt4}}}
				var us []row.Update
				vals := edgeValues(typ)
				if nullable {
					vals = append(vals, nil)
				}
				for i, v := range vals {
					for tm := range uint64(3) {
						us = append(us, row.Update{Row: row.Row{v, int32(i)}, T: tm * 1000, Diff: int64(i) - 2 + int64(b2i(i == 2))})
					}
				}
				us = row.Consolidate(us)
				roundtrip(t, Config{}, s, us)
				roundtrip(t, Config{BatchRows: 2}, s, us)
			})
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRoundtripAllTypesOneRow puts every type in one row, with and without
// NULLs, across many small batches.
func TestRoundtripAllTypesOneRow(t *testing.T) {
	s := allTypesSchema(true)
	var us []row.Update
	for i := range 50 {
		r := make(row.Row, len(allTypes))
		for j, typ := range allTypes {
			vals := edgeValues(typ)
			if (i+j)%5 != 0 {
				r[j] = vals[(i*7+j)%len(vals)]
			}
		}
		us = append(us, row.Update{Row: r, T: uint64(i), Diff: int64(i%3 + 1)})
	}
	us = row.Consolidate(us)
	if got := roundtrip(t, Config{BatchRows: 7}, s, us); got < 5 {
		t.Fatalf("got %d batches, want several", got)
	}
}

func TestEmptyPart(t *testing.T) {
	for _, s := range []row.Schema{{}, allTypesSchema(false)} {
		data, st, err := EncodePart(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st != (Stats{Bytes: int64(len(data))}) {
			t.Fatalf("stats %+v", st)
		}
		r := mustReader(t, s, data)
		if r.Rows() != 0 || r.NumBatches() != 0 {
			t.Fatalf("rows %d batches %d", r.Rows(), r.NumBatches())
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("Next: %v, want io.EOF", err)
		}
		if got := mustDecode(t, s, data); len(got) != 0 {
			t.Fatalf("got %d updates", len(got))
		}
	}
}

// TestZeroColumns: a schema without columns still has t and d.
func TestZeroColumns(t *testing.T) {
	us := []row.Update{{Row: row.Row{}, T: 1, Diff: 1}, {Row: row.Row{}, T: 2, Diff: -1}}
	roundtrip(t, Config{BatchRows: 1}, row.Schema{}, us)
}

func TestStats(t *testing.T) {
	s := row.Schema{Columns: []row.Column{{Name: "k", Type: row.TypeInt8}}}
	us := row.Consolidate([]row.Update{
		{Row: row.Row{int64(1)}, T: 50, Diff: 1},
		{Row: row.Row{int64(2)}, T: 7, Diff: 1},
		{Row: row.Row{int64(3)}, T: 90, Diff: -1},
	})
	data, st, err := EncodePart(s, us)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stats{Rows: 3, Bytes: int64(len(data)), MinT: 7, MaxT: 90}); st != want {
		t.Fatalf("got %+v, want %+v", st, want)
	}
}

// TestBatchBytes: a batch is cut before it exceeds BatchBytes, so large
// rows make small batches; one row larger than the limit is alone.
func TestBatchBytes(t *testing.T) {
	s := row.Schema{Columns: []row.Column{{Name: "k", Type: row.TypeInt8}, {Name: "v", Type: row.TypeText}}}
	var us []row.Update
	for i := range 20 {
		us = append(us, row.Update{Row: row.Row{int64(i), strings.Repeat("x", 1000*(i%3))}, T: 1, Diff: 1})
	}
	c := Config{BatchBytes: 5000}
	roundtrip(t, c, s, us)
	batches := mustReadAll(t, c, s, encode(t, s, us))
	if len(batches) != 1 {
		t.Fatalf("default config: %d batches, want 1", len(batches))
	}
	data, _, err := c.EncodePart(s, us)
	if err != nil {
		t.Fatal(err)
	}
	batches = mustReadAll(t, c, s, data)
	if len(batches) < 5 {
		t.Fatalf("BatchBytes 5000: %d batches, want >= 5", len(batches))
	}
}

// TestDecodeLimitHonoursEncodeEstimate: whatever the encoder cuts under a
// BatchBytes decodes under MaxBatchDecodedBytes of the same size.
func TestDecodeLimitHonoursEncodeEstimate(t *testing.T) {
	s := allTypesSchema(true)
	var us []row.Update
	for i := range 300 {
		r := make(row.Row, len(allTypes))
		for j, typ := range allTypes {
			vals := edgeValues(typ)
			if (i+j)%4 != 0 {
				r[j] = vals[(i*5+j)%len(vals)]
			}
		}
		us = append(us, row.Update{Row: r, T: uint64(i), Diff: 1})
	}
	us = row.Consolidate(us)
	for _, limit := range []int64{30 << 10, 64 << 10, 1 << 20} {
		c := Config{BatchBytes: int(limit), MaxBatchDecodedBytes: limit}
		roundtrip(t, c, s, us)
	}
}

func TestErrTooLarge(t *testing.T) {
	s := row.Schema{Columns: []row.Column{{Name: "v", Type: row.TypeText}}}
	big := []row.Update{{Row: row.Row{strings.Repeat("x", 100_000)}, T: 1, Diff: 1}}
	c := Config{BatchBytes: 64 << 10, MaxBatchDecodedBytes: 64 << 10}
	if _, _, err := c.EncodePart(s, big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("encode: got %v, want ErrTooLarge", err)
	}
	data := encode(t, s, big)
	if _, err := c.DecodePart(s, data); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("decode: got %v, want ErrTooLarge", err)
	}
}

func TestEncodeRejectsBadInput(t *testing.T) {
	s := row.Schema{Columns: []row.Column{
		{Name: "k", Type: row.TypeInt8},
		{Name: "n", Type: row.TypeNumeric, Nullable: true},
		{Name: "s", Type: row.TypeText, Nullable: true},
		{Name: "j", Type: row.TypeJSONB, Nullable: true},
	}}
	ok := func(k int64) row.Row { return row.Row{k, nil, nil, nil} }
	for _, tc := range []struct {
		name string
		us   []row.Update
	}{
		{"Unsorted", []row.Update{{Row: ok(2), T: 1, Diff: 1}, {Row: ok(1), T: 1, Diff: 1}}},
		{"UnsortedTime", []row.Update{{Row: ok(1), T: 2, Diff: 1}, {Row: ok(1), T: 1, Diff: 1}}},
		{"Duplicate", []row.Update{{Row: ok(1), T: 1, Diff: 1}, {Row: ok(1), T: 1, Diff: 1}}},
		{"ZeroDiff", []row.Update{{Row: ok(1), T: 1, Diff: 0}}},
		{"WrongGoType", []row.Update{{Row: row.Row{int32(1), nil, nil, nil}, T: 1, Diff: 1}}},
		{"WrongGoTypeLater", []row.Update{{Row: ok(1), T: 1, Diff: 1}, {Row: row.Row{"x", nil, nil, nil}, T: 1, Diff: 1}}},
		{"NullInNotNull", []row.Update{{Row: row.Row{nil, nil, nil, nil}, T: 1, Diff: 1}}},
		{"ShortRow", []row.Update{{Row: row.Row{int64(1)}, T: 1, Diff: 1}}},
		{"InvalidUTF8", []row.Update{{Row: row.Row{int64(1), nil, "\xff", nil}, T: 1, Diff: 1}}},
		{"NonCanonicalNumeric", []row.Update{{Row: row.Row{int64(1), row.Numeric("1.50"), nil, nil}, T: 1, Diff: 1}}},
		{"InvalidJSON", []row.Update{{Row: row.Row{int64(1), nil, nil, row.JSON("{")}, T: 1, Diff: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := EncodePart(s, tc.us); !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("got %v, want ErrInvalidInput", err)
			}
		})
	}
	if _, _, err := EncodePart(row.Schema{Columns: []row.Column{{Name: "a", Type: row.TypeInt8}, {Name: "a", Type: row.TypeInt8}}}, nil); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("duplicate column: got %v, want ErrInvalidInput", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{BatchRows: -1},
		{BatchBytes: -1},
		{MaxBatchDecodedBytes: -1},
		{MaxBatchDecodedBytes: 2 << 30},
		{BatchBytes: 2 << 20, MaxBatchDecodedBytes: 1 << 20},
	} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%+v: got %v, want ErrInvalidInput", c, err)
		}
		if _, _, err := c.EncodePart(row.Schema{}, nil); err == nil {
			t.Errorf("%+v: EncodePart accepted it", c)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestSchemaMismatch(t *testing.T) {
	base := row.Schema{Columns: []row.Column{{Name: "a", Type: row.TypeInt8}, {Name: "b", Type: row.TypeText, Nullable: true}}}
	data := encode(t, base, []row.Update{{Row: row.Row{int64(1), "x"}, T: 1, Diff: 1}})
	for _, tc := range []struct {
		name string
		s    row.Schema
	}{
		{"FewerColumns", row.Schema{Columns: base.Columns[:1]}},
		{"MoreColumns", row.Schema{Columns: append(append([]row.Column{}, base.Columns...), row.Column{Name: "c", Type: row.TypeBool})}},
		{"Renamed", row.Schema{Columns: []row.Column{{Name: "a", Type: row.TypeInt8}, {Name: "x", Type: row.TypeText, Nullable: true}}}},
		{"ArrowTypeDiffers", row.Schema{Columns: []row.Column{{Name: "a", Type: row.TypeInt4}, {Name: "b", Type: row.TypeText, Nullable: true}}}},
		{"SameArrowType", row.Schema{Columns: []row.Column{{Name: "a", Type: row.TypeInt8}, {Name: "b", Type: row.TypeNumeric, Nullable: true}}}},
		{"SameStorage", row.Schema{Columns: []row.Column{{Name: "a", Type: row.TypeTimestamp}, {Name: "b", Type: row.TypeText, Nullable: true}}}},
		{"Nullability", row.Schema{Columns: []row.Column{{Name: "a", Type: row.TypeInt8}, {Name: "b", Type: row.TypeText}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodePart(tc.s, data); !errors.Is(err, ErrSchemaMismatch) {
				t.Fatalf("got %v, want ErrSchemaMismatch", err)
			}
		})
	}
}

// TestPartReader checks streaming: bounded batches, io.EOF, sticky errors,
// Close, and consolidation across batch boundaries.
func TestPartReader(t *testing.T) {
	s := row.Schema{Columns: []row.Column{{Name: "k", Type: row.TypeInt8}}}
	var us []row.Update
	for i := range 1000 {
		us = append(us, row.Update{Row: row.Row{int64(i)}, T: 1, Diff: 1})
	}
	c := Config{BatchRows: 100}
	data, _, err := c.EncodePart(s, us)
	if err != nil {
		t.Fatal(err)
	}
	r := mustReader(t, s, data)
	if r.Rows() != 1000 || r.NumBatches() != 10 {
		t.Fatalf("rows %d batches %d", r.Rows(), r.NumBatches())
	}
	for i := range 10 {
		b, err := r.Next()
		if err != nil || len(b) != 100 || b[0].Row[0] != int64(100*i) {
			t.Fatalf("batch %d: %d rows, err %v", i, len(b), err)
		}
	}
	for range 2 {
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("got %v, want io.EOF", err)
		}
	}
	r.Close()

	r = mustReader(t, s, data)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r.Close()
	if _, err := r.Next(); err == nil || err == io.EOF {
		t.Fatalf("Next after Close: %v", err)
	}
}

// TestPartReaderAppendNext checks that AppendNext decodes into the slice
// it is given, reusing its array, and that rows of an earlier batch copied
// out of that slice keep their values when the next batch reuses it.
func TestPartReaderAppendNext(t *testing.T) {
	s := row.Schema{Columns: []row.Column{{Name: "k", Type: row.TypeInt8}, {Name: "v", Type: row.TypeText}}}
	var us []row.Update
	for i := range 250 {
		us = append(us, row.Update{Row: row.Row{int64(i), fmt.Sprintf("value %d", i)}, T: 1, Diff: 1})
	}
	data, _, err := Config{BatchRows: 100}.EncodePart(s, us)
	if err != nil {
		t.Fatal(err)
	}
	r := mustReader(t, s, data)
	defer r.Close()
	buf := make([]row.Update, 0, 100)
	var got []row.Update
	for {
		b, err := r.AppendNext(buf[:0])
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("AppendNext: %v", err)
		}
		if &b[0] != &buf[:1][0] {
			t.Fatalf("AppendNext of %d rows did not reuse the slice of capacity %d", len(b), cap(buf))
		}
		got = append(got, b...)
	}
	if err := diffUpdates(us, got); err != nil {
		t.Fatal(err)
	}
}

// TestNotConsolidatedAcrossBatches: each batch is sorted on its own but
// the part is not; only the cross-batch check can see it.
func TestNotConsolidatedAcrossBatches(t *testing.T) {
	s := row.Schema{Columns: []row.Column{{Name: "k", Type: row.TypeInt8}}}
	first := encodeBatchesUnchecked(t, s, [][]row.Update{
		{{Row: row.Row{int64(5)}, T: 1, Diff: 1}, {Row: row.Row{int64(6)}, T: 1, Diff: 1}},
		{{Row: row.Row{int64(6)}, T: 1, Diff: 1}, {Row: row.Row{int64(7)}, T: 1, Diff: 1}},
	})
	if _, err := DecodePart(s, first); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
	within := encodeBatchesUnchecked(t, s, [][]row.Update{
		{{Row: row.Row{int64(6)}, T: 1, Diff: 1}, {Row: row.Row{int64(5)}, T: 1, Diff: 1}},
	})
	if _, err := DecodePart(s, within); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
	zero := encodeBatchesUnchecked(t, s, [][]row.Update{{{Row: row.Row{int64(6)}, T: 1, Diff: 0}}})
	if _, err := DecodePart(s, zero); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
}

// TestDecodeRejectsBadValues writes values the encoder refuses, bypassing
// its checks, and expects the reader to refuse them too.
func TestDecodeRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  row.Type
		vals []row.Datum
	}{
		{"InvalidUTF8", row.TypeText, []row.Datum{"ok", "\xc3\x28"}},
		{"SplitRune", row.TypeText, []row.Datum{"a\xc3", "\xa9b"}},
		{"NonCanonicalNumeric", row.TypeNumeric, []row.Datum{row.Numeric("1.0")}},
		{"EmptyNumeric", row.TypeNumeric, []row.Datum{row.Numeric("")}},
		{"InvalidJSON", row.TypeJSONB, []row.Datum{row.JSON("{")}},
		{"JSONNotUTF8", row.TypeJSONB, []row.Datum{row.JSON("\"\xff\"")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := row.Schema{Columns: []row.Column{{Name: "k", Type: row.TypeInt4}, {Name: "v", Type: tc.typ}}}
			var us []row.Update
			for i, v := range tc.vals {
				us = append(us, row.Update{Row: row.Row{int32(i), v}, T: 1, Diff: 1})
			}
			data := encodeBatchesUnchecked(t, s, [][]row.Update{us})
			if _, err := DecodePart(s, data); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
}

// encodeBatchesUnchecked writes batches as given, skipping the encoder's
// input checks, to produce well-formed parts with bad content.
func encodeBatchesUnchecked(t *testing.T, s row.Schema, batches [][]row.Update) []byte {
	t.Helper()
	return writeBatches(s, batches)
}

// TestDecodedValuesOwnMemory: decoded values survive the part's bytes
// being overwritten.
func TestDecodedValuesOwnMemory(t *testing.T) {
	s := row.Schema{Columns: []row.Column{{Name: "b", Type: row.TypeBytea}, {Name: "s", Type: row.TypeText}, {Name: "u", Type: row.TypeUUID}}}
	us := []row.Update{
		{Row: row.Row{[]byte("aa"), "x", row.UUID{1}}, T: 1, Diff: 1},
		{Row: row.Row{[]byte("bb"), "y", row.UUID{2}}, T: 1, Diff: 1},
	}
	data := encode(t, s, us)
	got := mustDecode(t, s, data)
	clear(data)
	if err := diffUpdates(us, got); err != nil {
		t.Fatal(err)
	}
	// Appending to one bytea value must not clobber the next.
	b := got[0].Row[0].([]byte)
	_ = append(b, 'z')
	if err := diffUpdates(us, got); err != nil {
		t.Fatal(err)
	}
}

// TestFirstBatchSmall: a part's first record batch holds at most
// firstBatchRows rows (a reader's first rows wait for its decode only),
// the others up to BatchRows; a BatchRows below it bounds the first batch
// too.
func TestFirstBatchSmall(t *testing.T) {
	s := row.Schema{Columns: []row.Column{{Name: "k", Type: row.TypeInt8}, {Name: "v", Type: row.TypeText}}}
	us := make([]row.Update, 3*DefaultBatchRows)
	for i := range us {
		us[i] = row.Update{Row: row.Row{int64(i), fmt.Sprintf("value %d", i)}, T: 1, Diff: 1}
	}
	for _, tc := range []struct {
		c    Config
		want []int
	}{
		{Config{}, []int{firstBatchRows, DefaultBatchRows, DefaultBatchRows, DefaultBatchRows - firstBatchRows}},
		{Config{BatchRows: 100}, nil},
	} {
		data, _, err := tc.c.EncodePart(s, us)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, b := range mustReadAll(t, tc.c, s, data) {
			got = append(got, len(b))
		}
		if tc.want == nil {
			for i, n := range got {
				if n > tc.c.BatchRows {
					t.Errorf("BatchRows %d: batch %d of %d rows", tc.c.BatchRows, i, n)
				}
			}
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("batch sizes %v, want %v", got, tc.want)
		}
	}
}

// TestSmallPartAllocates: a small write's part (10 rows) allocates little
// more than its own buffers. Parts were written by arrow-go's FileWriter,
// which made a zstd encoder per part: 1.3 MB of match tables each.
func TestSmallPartAllocates(t *testing.T) {
	s := row.Schema{Columns: []row.Column{{Name: "user_id", Type: row.TypeInt8}, {Name: "id", Type: row.TypeInt8}, {Name: "payload", Type: row.TypeText}}}
	var us []row.Update
	for i := range 10 {
		us = append(us, row.Update{Row: row.Row{int64(i), int64(i), strings.Repeat("x", 64)}, T: 7, Diff: 1})
	}
	encode(t, s, us) // the shared encoder's first use allocates its tables
	const parts = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range parts {
		encode(t, s, us)
	}
	runtime.ReadMemStats(&after)
	const limit = 64 << 10
	if got := (after.TotalAlloc - before.TotalAlloc) / parts; got > limit {
		t.Errorf("a 10-row part allocated %d bytes, want at most %d", got, limit)
	}
}
