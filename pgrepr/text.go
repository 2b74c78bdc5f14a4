package pgrepr

import (
	"math"
	"reflect"
	"strconv"

	"github.com/shardtail/shardtail/row"
)

const hexDigits = "0123456789abcdef"

// AppendText appends the text format of d, a non-NULL datum of type t, to
// buf: exactly what Postgres prints with DateStyle ISO, TimeZone UTC,
// extra_float_digits >= 1 and bytea_output hex. The caller handles NULL (in
// a DataRow it is length -1, not text). It panics if d's Go type is not
// t's, which means a schema violation upstream (see row.CheckDatum).
//
// AppendText allocates nothing beyond growing buf.
func AppendText(buf []byte, t row.Type, d row.Datum) []byte {
	switch t {
	case row.TypeBool:
		if v, ok := d.(bool); ok {
			if v {
				return append(buf, 't')
			}
			return append(buf, 'f')
		}
	case row.TypeInt2:
		if v, ok := d.(int16); ok {
			return strconv.AppendInt(buf, int64(v), 10)
		}
	case row.TypeInt4:
		if v, ok := d.(int32); ok {
			return strconv.AppendInt(buf, int64(v), 10)
		}
	case row.TypeInt8:
		if v, ok := d.(int64); ok {
			return strconv.AppendInt(buf, v, 10)
		}
	case row.TypeFloat4:
		if v, ok := d.(float32); ok {
			return appendFloat(buf, float64(v), 32)
		}
	case row.TypeFloat8:
		if v, ok := d.(float64); ok {
			return appendFloat(buf, v, 64)
		}
	case row.TypeNumeric:
		if v, ok := d.(row.Numeric); ok {
			return append(buf, v...)
		}
	case row.TypeText:
		if v, ok := d.(string); ok {
			return append(buf, v...)
		}
	case row.TypeBytea:
		if v, ok := d.([]byte); ok {
			return appendByteaHex(buf, v)
		}
	case row.TypeTimestamp:
		if v, ok := d.(row.Timestamp); ok {
			return appendTimestamp(buf, int64(v), false)
		}
	case row.TypeTimestampTZ:
		if v, ok := d.(row.TimestampTZ); ok {
			return appendTimestamp(buf, int64(v), true)
		}
	case row.TypeDate:
		if v, ok := d.(row.Date); ok {
			return appendDate(buf, int32(v))
		}
	case row.TypeJSONB:
		if v, ok := d.(row.JSON); ok {
			return append(buf, v...)
		}
	case row.TypeUUID:
		if v, ok := d.(row.UUID); ok {
			return appendUUID(buf, v)
		}
	}
	panic(badDatum(t, d))
}

// badDatum describes a datum of the wrong type. It names d's type through
// reflect.TypeOf, which (unlike fmt's %T) does not let d escape: the
// encoders' datum parameter stays on the caller's stack, so that
// AppendVecField can hand them values read from a vector without
// allocating.
func badDatum(t row.Type, d row.Datum) string {
	name := "<nil>"
	if d != nil {
		name = reflect.TypeOf(d).String()
	}
	return "pgrepr: datum " + name + " is not a " + t.String()
}

// appendFloat formats f as Postgres 12+ does with extra_float_digits >= 1:
// the shortest decimal that reads back as the same value (Ryū, which
// strconv also implements), in fixed notation when the decimal exponent is
// in [-4, 15) for float8 or [-4, 6) for float4 and as "1.5e-07" otherwise,
// plus "NaN", "Infinity", "-Infinity" and "-0".
func appendFloat(buf []byte, f float64, bits int) []byte {
	switch {
	case f != f:
		return append(buf, "NaN"...)
	case math.IsInf(f, 1):
		return append(buf, "Infinity"...)
	case math.IsInf(f, -1):
		return append(buf, "-Infinity"...)
	}
	var scratch [32]byte
	e := strconv.AppendFloat(scratch[:0], f, 'e', -1, bits)
	// e is [-]d[.ddd]e±dd[d].
	mant := e
	neg := mant[0] == '-'
	if neg {
		mant = mant[1:]
	}
	ei := len(mant) - 4
	for mant[ei] != 'e' {
		ei--
	}
	exp := 0
	for _, c := range mant[ei+2:] {
		exp = exp*10 + int(c-'0')
	}
	if mant[ei+1] == '-' {
		exp = -exp
	}
	limit := 15
	if bits == 32 {
		limit = 6
	}
	if exp < -4 || exp >= limit {
		return append(buf, e...)
	}
	// Fixed notation from the digits: d or d.ddd before the 'e'.
	var digits [20]byte
	nd := 0
	for _, c := range mant[:ei] {
		if c != '.' {
			digits[nd] = c
			nd++
		}
	}
	if neg {
		buf = append(buf, '-')
	}
	if exp < 0 {
		buf = append(buf, '0', '.')
		for i := -1; i > exp; i-- {
			buf = append(buf, '0')
		}
		return append(buf, digits[:nd]...)
	}
	if nd <= exp+1 {
		buf = append(buf, digits[:nd]...)
		for i := nd; i <= exp; i++ {
			buf = append(buf, '0')
		}
		return buf
	}
	buf = append(buf, digits[:exp+1]...)
	buf = append(buf, '.')
	return append(buf, digits[exp+1:nd]...)
}

// appendByteaHex appends bytea's hex output format, "\x0a1b".
func appendByteaHex(buf []byte, b []byte) []byte {
	buf = append(buf, '\\', 'x')
	for _, c := range b {
		buf = append(buf, hexDigits[c>>4], hexDigits[c&15])
	}
	return buf
}

// appendUUID appends u in the lower-case 8-4-4-4-12 form.
func appendUUID(buf []byte, u row.UUID) []byte {
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			buf = append(buf, '-')
		}
		buf = append(buf, hexDigits[c>>4], hexDigits[c&15])
	}
	return buf
}
