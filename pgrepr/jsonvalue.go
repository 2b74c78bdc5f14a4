package pgrepr

import (
	"math"
	"strconv"

	"github.com/shardtail/shardtail/row"
)

// AppendJSONValue appends the JSON encoding of d, a datum of type t or nil
// for NULL, to buf. It is the one encoding of a cell that every JSON output
// shares (the HTTP feed's rows, the sinks' keys and values), so a key and a
// value agree byte for byte on a shared column. The mapping is a contract
// that must not change between releases (pinned by golden tests):
//
//	NULL                          null
//	boolean                       true, false
//	smallint, integer             a number
//	real, double precision        a number in Postgres' shortest round-trip text;
//	                              NaN and ±Infinity, which JSON cannot hold, as null
//	bigint, numeric               a string of Postgres' text output: JavaScript's
//	                              doubles lose precision past 2^53, and a reader
//	                              that wants a number parses the string exactly
//	text                          a string
//	bytea                         a string of Postgres' hex output ("\\x0aff")
//	timestamp, timestamptz, date  a string of Postgres' text output (DateStyle
//	                              ISO; timestamptz in UTC with its "+00" offset)
//	jsonb                         the document itself, in jsonb's canonical text
//	uuid                          a string ("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
//
// Strings are escaped as Postgres' to_json escapes them. Like AppendText it
// panics if d's Go type is not t's.
func AppendJSONValue(buf []byte, t row.Type, d row.Datum) []byte {
	if d == nil {
		return append(buf, "null"...)
	}
	switch t {
	case row.TypeBool:
		v, ok := d.(bool)
		if !ok {
			panic(badDatum(t, d))
		}
		return strconv.AppendBool(buf, v)
	case row.TypeInt2, row.TypeInt4:
		return AppendText(buf, t, d)
	case row.TypeFloat4, row.TypeFloat8:
		var f float64
		switch v := d.(type) {
		case float32:
			f = float64(v)
		case float64:
			f = v
		default:
			panic(badDatum(t, d))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return append(buf, "null"...)
		}
		return AppendText(buf, t, d)
	case row.TypeJSONB:
		return AppendText(buf, t, d)
	case row.TypeText:
		v, ok := d.(string)
		if !ok {
			panic(badDatum(t, d))
		}
		return appendJSONString(buf, v)
	case row.TypeInt8:
		// The common case without a scratch buffer: digits need no escaping.
		v, ok := d.(int64)
		if !ok {
			panic(badDatum(t, d))
		}
		buf = append(buf, '"')
		buf = strconv.AppendInt(buf, v, 10)
		return append(buf, '"')
	}
	// Every other type's text output is ASCII with nothing JSON escapes
	// (digits, signs, '-', ':', '.', ' ', '+', hex, "NaN", "infinity"),
	// except bytea's leading backslash, doubled below.
	buf = append(buf, '"')
	start := len(buf)
	buf = AppendText(buf, t, d)
	if t == row.TypeBytea {
		// "\x…" → "\\x…": the only escaped character is the leading backslash.
		buf = append(buf, 0)
		copy(buf[start+1:], buf[start:len(buf)-1])
		buf[start] = '\\'
	}
	return append(buf, '"')
}
