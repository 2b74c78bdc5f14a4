package consumer

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// ownOIDs are the column types the decoder reads itself rather than
// through pgx.
var ownOIDs = []uint32{oidBool, oidInt2, oidInt4, oidInt8, oidFloat4, oidFloat8, oidText, oidVarchar}

// checkLikePgx decodes b as column type oid in format with the decoder and
// with pgx's DecodeValue (what Rows.Values does), and fails unless both
// give the same value or both fail.
func checkLikePgx(t *testing.T, oid uint32, format int16, b []byte) {
	t.Helper()
	m := pgtype.NewMap()
	d := newRowDecoder(m, []pgconn.FieldDescription{{Name: "c", DataTypeOID: oid, Format: format}})
	got, gotErr := d.value(0, b)
	var want any
	var wantErr error
	if b != nil {
		typ, _ := m.TypeForOID(oid)
		want, wantErr = typ.Codec.DecodeValue(m, oid, format, b)
	}
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("OID %d format %d %q: error %v, pgx's %v", oid, format, b, gotErr, wantErr)
	}
	if gotErr != nil {
		return
	}
	if !sameValue(got, want) {
		t.Fatalf("OID %d format %d %q: got %#v, pgx decodes %#v", oid, format, b, got, want)
	}
}

// sameValue is reflect.DeepEqual, with floats compared by bits (NaN).
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case float32:
		y, ok := b.(float32)
		return ok && math.Float32bits(x) == math.Float32bits(y)
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	}
	return reflect.DeepEqual(a, b)
}

// numeric parses s as a pgtype.Numeric.
func numeric(t *testing.T, s string) pgtype.Numeric {
	t.Helper()
	var n pgtype.Numeric
	if err := n.Scan(s); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDecodeLikePgx: every type but jsonb decodes to what pgx's Rows.Values
// gives, in both formats, for values pgx itself encodes.
func TestDecodeLikePgx(t *testing.T) {
	m := pgtype.NewMap()
	values := map[uint32][]any{
		oidBool:               {true, false},
		oidInt2:               {int16(0), int16(-32768), int16(32767)},
		oidInt4:               {int32(-1), int32(math.MaxInt32)},
		oidInt8:               {int64(math.MinInt64), int64(1), int64(-1), int64(9007199254740993)},
		oidFloat4:             {float32(0.1), float32(math.Inf(-1)), float32(math.NaN())},
		oidFloat8:             {0.1, math.Inf(1), math.NaN(), math.Copysign(0, -1)},
		oidText:               {"", "é\ttab"},
		oidVarchar:            {"x"},
		pgtype.NumericOID:     {numeric(t, "12.50"), numeric(t, "-0.000001"), pgtype.Numeric{NaN: true, Valid: true}},
		pgtype.DateOID:        {time.Date(2026, 7, 18, 0, 0, 0, 0, time.UTC), pgtype.Date{InfinityModifier: pgtype.Infinity, Valid: true}},
		pgtype.TimestampOID:   {time.Date(2026, 7, 18, 10, 0, 0, 5e8, time.UTC)},
		pgtype.UUIDOID:        {[16]byte{0xa0, 0xee, 15: 0x11}},
		pgtype.ByteaOID:       {[]byte{0, 0xff}},
		pgtype.TimestamptzOID: {time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)},
	}
	for oid, vals := range values {
		for _, format := range []int16{pgtype.TextFormatCode, pgtype.BinaryFormatCode} {
			for _, v := range vals {
				b, err := m.Encode(oid, format, v, nil)
				if err != nil {
					t.Fatalf("encode %v as OID %d format %d: %v", v, oid, format, err)
				}
				checkLikePgx(t, oid, format, b)
			}
			checkLikePgx(t, oid, format, nil)
		}
	}
}

// FuzzDecodeLikePgx: on any bytes, the types the decoder reads itself
// decode as pgx decodes them (the same value, or an error from both), and
// nothing panics.
func FuzzDecodeLikePgx(f *testing.F) {
	f.Add(uint8(0), true, []byte{1})
	f.Add(uint8(1), true, []byte{0x80, 0})
	f.Add(uint8(3), false, []byte("-9223372036854775808"))
	f.Add(uint8(5), true, []byte{0x7f, 0xf8, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(0), false, []byte("t"))
	f.Fuzz(func(t *testing.T, which uint8, binary bool, b []byte) {
		format := int16(pgtype.TextFormatCode)
		if binary {
			format = pgtype.BinaryFormatCode
		}
		checkLikePgx(t, ownOIDs[int(which)%len(ownOIDs)], format, b)
	})
}

// TestDecodeKeepsJSONBText: jsonb and json come as the server's text,
// byte for byte, in either format (binary jsonb is a version byte and the
// text); an unknown jsonb version is an error.
func TestDecodeKeepsJSONBText(t *testing.T) {
	const doc = `{"b": 1.0, "aa": 12345678901234567890.5}`
	for _, tc := range []struct {
		oid    uint32
		format int16
		in     string
	}{
		{oidJSONB, pgtype.TextFormatCode, doc},
		{oidJSONB, pgtype.BinaryFormatCode, "\x01" + doc},
		{oidJSON, pgtype.TextFormatCode, doc},
		{oidJSON, pgtype.BinaryFormatCode, doc},
	} {
		d := newRowDecoder(pgtype.NewMap(), []pgconn.FieldDescription{{Name: "doc", DataTypeOID: tc.oid, Format: tc.format}})
		in := []byte(tc.in)
		got, err := d.value(0, in)
		if err != nil {
			t.Fatalf("OID %d format %d: %v", tc.oid, tc.format, err)
		}
		raw, ok := got.(json.RawMessage)
		if !ok || string(raw) != doc {
			t.Errorf("OID %d format %d: got %#v, want json.RawMessage(%s)", tc.oid, tc.format, got, doc)
		}
		in[len(in)-1] = 'X' // pgx reuses its buffer: the value must not alias it
		if string(raw) != doc {
			t.Errorf("OID %d format %d: the value aliases the wire buffer", tc.oid, tc.format)
		}
	}
	d := newRowDecoder(pgtype.NewMap(), []pgconn.FieldDescription{{Name: "doc", DataTypeOID: oidJSONB, Format: pgtype.BinaryFormatCode}})
	if _, err := d.value(0, []byte("\x02{}")); err == nil {
		t.Errorf("jsonb version 2: no error")
	}
}

// TestDecodeRowReusesTimestamp: rows at one timestamp decode it once, and
// a row at another timestamp is not given the previous one.
func TestDecodeRowReusesTimestamp(t *testing.T) {
	m := pgtype.NewMap()
	fds := []pgconn.FieldDescription{
		{Name: "mz_timestamp", DataTypeOID: pgtype.NumericOID, Format: pgtype.BinaryFormatCode},
		{Name: "mz_progressed", DataTypeOID: oidBool, Format: pgtype.BinaryFormatCode},
		{Name: "mz_diff", DataTypeOID: oidInt8, Format: pgtype.BinaryFormatCode},
		{Name: "v", DataTypeOID: oidText, Format: pgtype.TextFormatCode},
	}
	enc := func(oid uint32, v any) []byte {
		t.Helper()
		b, err := m.Encode(oid, pgtype.BinaryFormatCode, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	d := newRowDecoder(m, fds)
	for _, tc := range []struct {
		ts   string
		diff int64
		want uint64
	}{
		{"1700000000000", 1, 1700000000000},
		{"1700000000000", -1, 1700000000000},
		{"1700000000001", 2, 1700000000001},
		{"18446744073709551615", 1, math.MaxUint64},
	} {
		r, err := d.decode([][]byte{enc(pgtype.NumericOID, numeric(t, tc.ts)), enc(oidBool, false), enc(oidInt8, tc.diff), []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		if r.Timestamp != tc.want || r.Diff != tc.diff || r.Progressed || len(r.Values) != 1 || r.Values[0] != "x" {
			t.Errorf("decode at %s: %+v, want timestamp %d diff %d values [x]", tc.ts, r, tc.want, tc.diff)
		}
	}
}
