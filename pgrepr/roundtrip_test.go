package pgrepr

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/shardtail/shardtail/row"
)

// allTypes lists every column type.
var allTypes = []row.Type{row.TypeBool, row.TypeInt2, row.TypeInt4, row.TypeInt8, row.TypeFloat4,
	row.TypeFloat8, row.TypeNumeric, row.TypeText, row.TypeBytea, row.TypeTimestamp,
	row.TypeTimestampTZ, row.TypeDate, row.TypeJSONB, row.TypeUUID}

// randomDatum returns a random valid datum of type t, biased towards edge
// cases.
func randomDatum(rng *rand.Rand, t row.Type) row.Datum {
	edge := rng.IntN(8) == 0
	switch t {
	case row.TypeBool:
		return rng.IntN(2) == 0
	case row.TypeInt2:
		if edge {
			return []int16{0, -1, math.MinInt16, math.MaxInt16}[rng.IntN(4)]
		}
		return int16(rng.Uint32())
	case row.TypeInt4:
		if edge {
			return []int32{0, -1, math.MinInt32, math.MaxInt32}[rng.IntN(4)]
		}
		return int32(rng.Uint32())
	case row.TypeInt8:
		if edge {
			return []int64{0, -1, math.MinInt64, math.MaxInt64}[rng.IntN(4)]
		}
		return int64(rng.Uint64()) >> rng.IntN(64)
	case row.TypeFloat4:
		if edge {
			return []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
				math.Float32frombits(0x7fc00000), math.MaxFloat32, math.SmallestNonzeroFloat32}[rng.IntN(7)]
		}
		f := math.Float32frombits(rng.Uint32())
		if f != f {
			f = math.Float32frombits(0x7fc00000)
		}
		return f
	case row.TypeFloat8:
		if edge {
			return []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.Float64frombits(0x7ff8000000000000),
				math.MaxFloat64, math.SmallestNonzeroFloat64, 1e15, 1e-5, 123456789012345}[rng.IntN(10)]
		}
		f := math.Float64frombits(rng.Uint64())
		if rng.IntN(2) == 0 {
			f = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20))
		}
		if f != f {
			f = math.Float64frombits(0x7ff8000000000000)
		}
		return f
	case row.TypeNumeric:
		if edge {
			return row.Numeric([]string{"0", "NaN", "1", "-1", "0.0001", "10000", "-99999999.00000001", "18446744073709551615"}[rng.IntN(8)])
		}
		n, err := row.NormalizeNumeric(randomDecimalText(rng))
		if err != nil {
			panic(err)
		}
		return n
	case row.TypeText:
		return randomString(rng)
	case row.TypeBytea:
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	case row.TypeTimestamp, row.TypeTimestampTZ:
		lo := int64(minTimestamp)
		v := int64(uint64(lo) + rng.Uint64N(uint64(math.MaxInt64)-uint64(lo)))
		switch rng.IntN(6) {
		case 0:
			v = rng.Int64N(4e17) - 2e17
		case 1:
			v = []int64{TimestampInfinity, TimestampNegInfinity, minTimestamp, math.MaxInt64 - 1, 0, -1}[rng.IntN(6)]
		}
		if t == row.TypeTimestamp {
			return row.Timestamp(v)
		}
		return row.TimestampTZ(v)
	case row.TypeDate:
		v := minDays + rng.Int64N(endDays-minDays)
		switch rng.IntN(6) {
		case 0:
			v = rng.Int64N(800000) - 400000
		case 1:
			v = []int64{DateInfinity, DateNegInfinity, minDays, endDays - 1, 0, -1}[rng.IntN(6)]
		}
		return row.Date(v)
	case row.TypeJSONB:
		j, err := parseJSON(randomJSONText(rng, 0))
		if err != nil {
			panic(err)
		}
		return j
	case row.TypeUUID:
		var u row.UUID
		for i := range u {
			u[i] = byte(rng.Uint32())
		}
		return u
	}
	panic("type")
}

func randomDecimalText(rng *rand.Rand) string {
	var b strings.Builder
	if rng.IntN(2) == 0 {
		b.WriteByte('-')
	}
	for k := rng.IntN(30); k >= 0; k-- {
		b.WriteByte(byte('0' + rng.IntN(10)))
	}
	if rng.IntN(2) == 0 {
		b.WriteByte('.')
		for k := rng.IntN(30); k >= 0; k-- {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
	}
	if rng.IntN(3) == 0 {
		b.WriteString("e")
		b.WriteString(string(rune('0' + rng.IntN(10))))
	}
	return b.String()
}

var stringAlphabet = []rune("abcXYZ09 \t\n\r\v\b\f\\\"',;.|{}[]:Né☃😀\u00a0\x01\x1f\x7f")

func randomString(rng *rand.Rand) string {
	var b strings.Builder
	for k := rng.IntN(20); k > 0; k-- {
		b.WriteRune(stringAlphabet[rng.IntN(len(stringAlphabet))])
	}
	return b.String()
}

func randomJSONText(rng *rand.Rand, depth int) string {
	k := rng.IntN(7)
	if depth > 3 {
		k = rng.IntN(4)
	}
	switch k {
	case 0:
		return []string{"null", "true", "false"}[rng.IntN(3)]
	case 1:
		n := randomDecimalText(rng)
		if n[0] == '-' {
			n = n[1:]
		}
		n = strings.TrimLeft(n, "0")
		if n == "" || n[0] == '.' || n[0] == 'e' {
			n = "0" + n
		}
		if strings.HasSuffix(n, ".") || strings.Contains(n, ".e") {
			return "1"
		}
		return n
	case 2:
		return appendJSONStringForTest(randomString(rng))
	case 3:
		return `"\u00e9\ud83d\ude00\n"`
	case 4, 5:
		var parts []string
		for n := rng.IntN(5); n > 0; n-- {
			parts = append(parts, appendJSONStringForTest(randomString(rng)[:0]+[]string{"a", "b", "aa", "", "é", "k"}[rng.IntN(6)])+":"+randomJSONText(rng, depth+1))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	var parts []string
	for n := rng.IntN(4); n > 0; n-- {
		parts = append(parts, randomJSONText(rng, depth+1))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func appendJSONStringForTest(s string) string { return string(appendJSONString(nil, s)) }

func TestRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, typ := range allTypes {
		t.Run(strings.ReplaceAll(typ.String(), " ", "_"), func(t *testing.T) {
			for i := 0; i < 3000; i++ {
				d := randomDatum(rng, typ)
				text := AppendText(nil, typ, d)
				got, err := ParseText(typ, string(text))
				if err != nil || !sameDatum(got, d) {
					t.Fatalf("ParseText(%s, %q) = %#v, %v; want %#v", typ, text, got, err, d)
				}
				bin := AppendBinary(nil, typ, d)
				got, err = ParseBinary(typ, bin)
				if err != nil || !sameDatum(got, d) {
					t.Fatalf("ParseBinary(%s, %x) = %#v, %v; want %#v", typ, bin, got, err, d)
				}
				// The text format of what ParseBinary returns is stable.
				if again := AppendText(nil, typ, got); !bytes.Equal(again, text) {
					t.Fatalf("AppendText after binary round trip = %q, want %q", again, text)
				}
			}
		})
	}
}

func TestAppendFieldFraming(t *testing.T) {
	got := AppendField(nil, row.TypeInt4, int32(7), FormatBinary)
	if want := []byte{0, 0, 0, 4, 0, 0, 0, 7}; !bytes.Equal(got, want) {
		t.Errorf("binary: got %x, want %x", got, want)
	}
	got = AppendField([]byte{9}, row.TypeText, "héllo", FormatText)
	if want := []byte("\x09\x00\x00\x00\x06héllo"); !bytes.Equal(got, want) {
		t.Errorf("text: got %q, want %q", got, want)
	}
	got = AppendField(nil, row.TypeText, nil, FormatText)
	if want := []byte{0xff, 0xff, 0xff, 0xff}; !bytes.Equal(got, want) {
		t.Errorf("null: got %x, want %x", got, want)
	}
}

func randomRows(rng *rand.Rand, types []row.Type, n int) []row.Row {
	rows := make([]row.Row, n)
	for i := range rows {
		r := make(row.Row, len(types))
		for j, typ := range types {
			if rng.IntN(6) != 0 {
				r[j] = randomDatum(rng, typ)
			}
		}
		rows[i] = r
	}
	return rows
}

// readAllRows reads rows until io.EOF.
func readAllRows(t *testing.T, cr *CopyReader, types []row.Type) []row.Row {
	t.Helper()
	var out []row.Row
	for {
		r, err := cr.ReadRow(types, nil)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("row %d: %v", len(out)+1, err)
		}
		out = append(out, r)
	}
}

func sameRows(t *testing.T, got, want []row.Row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		for j := range want[i] {
			if !sameDatum(got[i][j], want[i][j]) {
				t.Fatalf("row %d column %d: got %#v, want %#v", i, j, got[i][j], want[i][j])
			}
		}
	}
}

// TestCopyRoundTrip writes random rows with each COPY writer and reads them
// back with CopyReader, whole and one byte at a time (which exercises every
// buffer boundary).
func TestCopyRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	types := allTypes
	rows := randomRows(rng, types, 300)
	wrap := map[string]func(io.Reader) io.Reader{
		"Whole":   func(r io.Reader) io.Reader { return r },
		"OneByte": iotest.OneByteReader,
		"Half":    iotest.HalfReader,
	}
	textOpts := []TextOptions{DefaultTextOptions(), {Delimiter: '|', Null: "NULL"}, {Delimiter: ',', Null: "nil", Header: true}}
	csvOpts := []CSVOptions{DefaultCSVOptions(), {Delimiter: ';', Quote: '\'', Escape: '\\', Null: "NULL", Header: true}, {Delimiter: '\t', Quote: '"', Escape: '"', Null: `\N`}}
	for wname, w := range wrap {
		for i, o := range textOpts {
			var data []byte
			if o.Header {
				data = AppendCopyTextHeader(data, []string{"a", "b\tc"}, o)
			}
			for _, r := range rows {
				data = AppendCopyTextRowOptions(data, types, r, o)
			}
			cr, err := NewCopyTextReader(w(bytes.NewReader(data)), o)
			if err != nil {
				t.Fatal(err)
			}
			t.Run("Text"+wname+string(rune('0'+i)), func(t *testing.T) { sameRows(t, readAllRows(t, cr, types), rows) })
		}
		for i, o := range csvOpts {
			var data []byte
			if o.Header {
				data = AppendCopyCSVHeader(data, []string{"a", "b,c"}, o)
			}
			for _, r := range rows {
				data = AppendCopyCSVRow(data, types, r, o)
			}
			cr, err := NewCopyCSVReader(w(bytes.NewReader(data)), o)
			if err != nil {
				t.Fatal(err)
			}
			t.Run("CSV"+wname+string(rune('0'+i)), func(t *testing.T) { sameRows(t, readAllRows(t, cr, types), rows) })
		}
		data := AppendCopyBinaryHeader(nil)
		for _, r := range rows {
			data = AppendCopyBinaryRow(data, types, r)
		}
		data = AppendCopyBinaryTrailer(data)
		cr := NewCopyBinaryReader(w(bytes.NewReader(data)))
		t.Run("Binary"+wname, func(t *testing.T) { sameRows(t, readAllRows(t, cr, types), rows) })
	}
}

// TestCopyTextEscapesAllBytes checks that every single byte survives COPY
// text and CSV output and input inside a text value.
func TestCopyTextEscapesAllBytes(t *testing.T) {
	types := []row.Type{row.TypeBytea, row.TypeText, row.TypeText}
	var rows []row.Row
	for c := 0; c < 256; c++ {
		s := "x" + string([]byte{byte(c)}) + "y"
		if !utf8.ValidString(s) || c == 0 {
			s = "x" + string(rune(max(c, 1))) + "y" // text holds neither NUL nor invalid UTF-8
		}
		rows = append(rows, row.Row{[]byte{byte(c)}, s, "\\."})
	}
	var text, csv []byte
	for _, r := range rows {
		text = AppendCopyTextRow(text, types, r)
		csv = AppendCopyCSVRow(csv, types, r, DefaultCSVOptions())
	}
	cr, _ := NewCopyTextReader(bytes.NewReader(text), DefaultTextOptions())
	sameRows(t, readAllRows(t, cr, types), rows)
	cr, _ = NewCopyCSVReader(bytes.NewReader(csv), DefaultCSVOptions())
	sameRows(t, readAllRows(t, cr, types), rows)
}

func TestAppendDoesNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	buf := make([]byte, 0, 4096)
	for _, typ := range allTypes {
		for i := 0; i < 20; i++ {
			d := randomDatum(rng, typ)
			if a := testing.AllocsPerRun(20, func() {
				buf = AppendText(buf[:0], typ, d)
				buf = AppendBinary(buf, typ, d)
				buf = AppendField(buf, typ, d, FormatBinary)
			}); a != 0 {
				t.Errorf("%s %#v: %v allocations", typ, d, a)
			}
		}
	}
}
