package pgrepr

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/shardtail/shardtail/row"
)

// pgxValue converts a datum to the value pgx's pgtype encodes the same SQL
// value from; ok is false where pgx has no exact equivalent (times outside
// years 1-9999, where Go's time formatting differs).
func pgxValue(t row.Type, d row.Datum) (any, bool) {
	inTimeRange := func(us int64) bool {
		y := time.UnixMicro(us).UTC().Year()
		return y >= 1 && y <= 9999
	}
	switch v := d.(type) {
	case row.Numeric:
		var n pgtype.Numeric
		if err := n.Scan(string(v)); err != nil {
			panic(err)
		}
		return n, true
	case row.Timestamp:
		switch int64(v) {
		case TimestampInfinity:
			return pgtype.Timestamp{InfinityModifier: pgtype.Infinity, Valid: true}, true
		case TimestampNegInfinity:
			return pgtype.Timestamp{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, true
		}
		return pgtype.Timestamp{Time: time.UnixMicro(int64(v)).UTC(), Valid: true}, inTimeRange(int64(v))
	case row.TimestampTZ:
		switch int64(v) {
		case TimestampInfinity:
			return pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}, true
		case TimestampNegInfinity:
			return pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, true
		}
		return pgtype.Timestamptz{Time: time.UnixMicro(int64(v)).UTC(), Valid: true}, inTimeRange(int64(v))
	case row.Date:
		switch int32(v) {
		case DateInfinity:
			return pgtype.Date{InfinityModifier: pgtype.Infinity, Valid: true}, true
		case DateNegInfinity:
			return pgtype.Date{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, true
		}
		return pgtype.Date{Time: time.Unix(int64(v)*86400, 0).UTC(), Valid: true}, inTimeRange(int64(v) * usPerDay)
	case row.JSON:
		return string(v), true
	case row.UUID:
		return [16]byte(v), true
	}
	return d, true
}

// TestPgxCrossCheck encodes random datums with pgx's pgtype and compares
// with AppendBinary (every type) and AppendText (where pgx formats text as
// Postgres does: pgx prints floats without exponents and timestamps in its
// own layout, so those are left to the golden tests), and decodes
// AppendBinary's output with pgx.
func TestPgxCrossCheck(t *testing.T) {
	m := pgtype.NewMap()
	rng := rand.New(rand.NewPCG(11, 12))
	textComparable := map[row.Type]bool{row.TypeInt2: true, row.TypeInt4: true, row.TypeInt8: true,
		row.TypeText: true, row.TypeBytea: true, row.TypeUUID: true, row.TypeDate: true, row.TypeJSONB: true, row.TypeNumeric: true}
	for _, typ := range allTypes {
		oid := OID(typ)
		for i := 0; i < 2000; i++ {
			d := randomDatum(rng, typ)
			v, ok := pgxValue(typ, d)
			if !ok {
				continue
			}
			want, err := m.Encode(oid, pgtype.BinaryFormatCode, v, nil)
			if err != nil {
				t.Fatalf("pgx encode %s %#v: %v", typ, v, err)
			}
			// pgx sends numeric zero with weight -1; Postgres (see the golden
			// values) sends weight 0, as pgrepr does.
			pgxZero := typ == row.TypeNumeric && d == row.Numeric("0")
			if got := AppendBinary(nil, typ, d); !bytes.Equal(got, want) && !pgxZero {
				t.Fatalf("AppendBinary(%s, %#v) = %x, pgx %x", typ, d, got, want)
			}
			if textComparable[typ] && !(typ == row.TypeNumeric && d == row.Numeric("NaN")) {
				want, err := m.Encode(oid, pgtype.TextFormatCode, v, nil)
				if err != nil {
					t.Fatalf("pgx text encode %s %#v: %v", typ, v, err)
				}
				if got := AppendText(nil, typ, d); !bytes.Equal(got, want) {
					t.Fatalf("AppendText(%s, %#v) = %q, pgx %q", typ, d, got, want)
				}
			}
			checkPgxDecode(t, m, typ, d)
		}
	}
}

// checkPgxDecode decodes AppendBinary's output with pgx and compares.
func checkPgxDecode(t *testing.T, m *pgtype.Map, typ row.Type, d row.Datum) {
	t.Helper()
	bin := AppendBinary([]byte{}, typ, d) // non-nil: pgx reads a nil value as NULL
	oid := OID(typ)
	fail := func(got any) { t.Fatalf("pgx decoded %s %x as %#v, want %#v", typ, bin, got, d) }
	switch typ {
	case row.TypeFloat4, row.TypeFloat8:
		var f float64
		if err := m.Scan(oid, pgtype.BinaryFormatCode, bin, &f); err != nil {
			t.Fatal(err)
		}
		want := float64(0)
		if typ == row.TypeFloat4 {
			want = float64(d.(float32))
		} else {
			want = d.(float64)
		}
		if math.Float64bits(f) != math.Float64bits(want) && !(f != f && want != want) {
			fail(f)
		}
	case row.TypeNumeric:
		var n pgtype.Numeric
		if err := m.Scan(oid, pgtype.BinaryFormatCode, bin, &n); err != nil {
			t.Fatal(err)
		}
		if n.NaN {
			if d != row.Numeric("NaN") {
				fail(n)
			}
			return
		}
		text, _ := n.MarshalJSON()
		got, err := row.NormalizeNumeric(string(text))
		if err != nil || got != d {
			fail(string(text))
		}
	case row.TypeTimestamp, row.TypeTimestampTZ, row.TypeDate:
		// Covered by the encode comparison above; pgx decodes into
		// time.Time, which adds nothing.
	default:
		var got any
		if err := m.Scan(oid, pgtype.BinaryFormatCode, bin, &got); err != nil {
			t.Fatal(err)
		}
		var ok bool
		switch w := d.(type) {
		case row.UUID:
			ok = got == [16]byte(w)
		case row.JSON:
			ok = true // pgx unmarshals into Go values; equality is checked via encode
		case []byte:
			ok = bytes.Equal(got.([]byte), w)
		default:
			ok = got == d
		}
		if !ok {
			fail(got)
		}
	}
}

func TestPgxTextNumericMatchesCanonical(t *testing.T) {
	for _, s := range []string{"0", "1", "-1", "0.5", "-0.001", "123456789012345678901234567890.123456789"} {
		var n pgtype.Numeric
		if err := n.Scan(s); err != nil {
			t.Fatal(err)
		}
		b, _ := n.MarshalJSON()
		if !strings.EqualFold(string(b), s) {
			t.Errorf("pgx %q != %q", b, s)
		}
	}
}
