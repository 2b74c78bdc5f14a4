package pgrepr

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/shardtail/shardtail/row"
)

// ParseText parses s, the text format of a value of type t, as Postgres'
// input function for the type does, and returns the datum (never nil: the
// caller handles NULL, which has no text form). Errors are *Error values
// with Postgres' SQLSTATE and message, e.g. 22P02 `invalid input syntax for
// type integer: "x"` or 22003 `value "99999" is out of range for type
// smallint`.
//
// Text and jsonb input must be valid UTF-8 without NUL bytes (22021), as
// Postgres requires of a UTF8 database.
func ParseText(t row.Type, s string) (row.Datum, error) {
	switch t {
	case row.TypeBool:
		if v, ok := parseBool(s); ok {
			return v, nil
		}
		return nil, errSyntax("boolean", s)
	case row.TypeInt2:
		v, err := parseInt(s, math.MinInt16, math.MaxInt16, "smallint")
		if err != nil {
			return nil, err
		}
		return int16(v), nil
	case row.TypeInt4:
		v, err := parseInt(s, math.MinInt32, math.MaxInt32, "integer")
		if err != nil {
			return nil, err
		}
		return int32(v), nil
	case row.TypeInt8:
		v, err := parseInt(s, math.MinInt64, math.MaxInt64, "bigint")
		if err != nil {
			return nil, err
		}
		return v, nil
	case row.TypeFloat4:
		v, err := parseFloat(s, 32)
		if err != nil {
			return nil, err
		}
		if v != v {
			return math.Float32frombits(uint32(math.Float64bits(v)>>32)&0x80000000 | 0x7fc00000), nil
		}
		return float32(v), nil
	case row.TypeFloat8:
		v, err := parseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		return v, nil
	case row.TypeNumeric:
		v, err := parseNumeric(s)
		if err != nil {
			return nil, err
		}
		return v, nil
	case row.TypeText:
		if err := checkText(s); err != nil {
			return nil, err
		}
		return s, nil
	case row.TypeBytea:
		v, err := parseBytea(s)
		if err != nil {
			return nil, err
		}
		return v, nil
	case row.TypeTimestamp:
		v, err := timestampFromText(s, false)
		if err != nil {
			return nil, err
		}
		return row.Timestamp(v), nil
	case row.TypeTimestampTZ:
		v, err := timestampFromText(s, true)
		if err != nil {
			return nil, err
		}
		return row.TimestampTZ(v), nil
	case row.TypeDate:
		v, err := dateFromText(s)
		if err != nil {
			return nil, err
		}
		return row.Date(v), nil
	case row.TypeJSONB:
		v, err := parseJSON(s)
		if err != nil {
			return nil, err
		}
		return v, nil
	case row.TypeUUID:
		if v, ok := parseUUID(s); ok {
			return v, nil
		}
		return nil, errSyntax("uuid", s)
	}
	return nil, errUnsupportedType(t)
}

func errUnsupportedType(t row.Type) error {
	return newError(ErrSyntax, "42704", "unsupported type "+t.String())
}

// checkText reports 22021 if s is not valid UTF-8 or contains NUL.
func checkText(s string) error {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == 0 {
				return errEncoding([]byte{0})
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			end := min(i+4, len(s))
			for k := i + 1; k < end; k++ {
				if s[k] < 0x80 || s[k] >= 0xC0 {
					end = k
					break
				}
			}
			return errEncoding([]byte(s[i:end]))
		}
		i += n
	}
	return nil
}

// parseBool accepts what Postgres' boolin does: surrounding whitespace and
// any case of "t[rue]", "f[alse]", "y[es]", "n[o]", "on", "of[f]", "1", "0"
// (prefixes of the words count).
func parseBool(s string) (v, ok bool) {
	s = trimPGSpace(s)
	if s == "" {
		return false, false
	}
	prefix := func(word string, minLen int) bool {
		return len(s) >= minLen && len(s) <= len(word) && equalFold(s, word[:len(s)])
	}
	switch s[0] | 0x20 {
	case 't':
		return true, prefix("true", 1)
	case 'f':
		return false, prefix("false", 1)
	case 'y':
		return true, prefix("yes", 1)
	case 'n':
		return false, prefix("no", 1)
	case 'o':
		if prefix("on", 2) {
			return true, true
		}
		return false, prefix("off", 2)
	}
	switch s {
	case "1":
		return true, true
	case "0":
		return false, true
	}
	return false, false
}

// parseInt parses an integer as pg_strtoint16/32/64 do: surrounding
// whitespace, an optional sign, decimal digits only. Overflow is reported as
// soon as it happens, before any trailing garbage, as Postgres does.
func parseInt(orig string, lo, hi int64, typ string) (int64, error) {
	s := orig
	i := 0
	for i < len(s) && isPGSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i >= len(s) || !isDigit(s[i]) {
		return 0, errSyntax(typ, orig)
	}
	// Accumulate as a magnitude in uint64; the negative limit's magnitude
	// is one more than the positive one.
	limit := uint64(hi)
	if neg {
		limit = uint64(-(lo + 1)) + 1
	}
	var v uint64
	for i < len(s) && isDigit(s[i]) {
		d := uint64(s[i] - '0')
		if v > (limit-d)/10 {
			return 0, errIntRange(typ, orig)
		}
		v = v*10 + d
		i++
	}
	for i < len(s) && isPGSpace(s[i]) {
		i++
	}
	if i != len(s) {
		return 0, errSyntax(typ, orig)
	}
	if neg {
		return -int64(v-1) - 1, nil
	}
	return int64(v), nil
}

// parseFloat parses a float as float4in/float8in do with glibc's strtod:
// surrounding whitespace, decimal or hexadecimal ("0x1.8p3") notation,
// NaN, Inf and Infinity in any case with an optional sign. Results that
// overflow, or underflow to zero from a non-zero input, are out of range
// (denormals are accepted).
func parseFloat(orig string, bits int) (float64, error) {
	typ := "double precision"
	if bits == 32 {
		typ = "real"
	}
	s := trimPGSpace(orig)
	if s == "" {
		return 0, errSyntax(typ, orig)
	}
	body := s
	neg := false
	if body[0] == '+' || body[0] == '-' {
		neg = body[0] == '-'
		body = body[1:]
	}
	switch {
	case equalFold(body, "nan"):
		// glibc's NaN, with the input's sign, as Postgres stores it.
		nan := uint64(0x7ff8000000000000)
		if neg {
			nan |= 1 << 63
		}
		return math.Float64frombits(nan), nil
	case equalFold(body, "inf"), equalFold(body, "infinity"):
		if neg {
			return math.Inf(-1), nil
		}
		return math.Inf(1), nil
	}
	var nonzero, hasExp, ok bool
	if len(body) > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X') {
		nonzero, hasExp, ok = scanFloat(body[2:], isHexDigit, 'p')
		if ok && !hasExp {
			s += "p0" // strconv insists on the binary exponent
		}
	} else {
		nonzero, _, ok = scanFloat(body, isDigit, 'e')
	}
	if !ok {
		return 0, errSyntax(typ, orig)
	}
	v, err := strconv.ParseFloat(s, bits)
	if err != nil {
		if ne, isNum := err.(*strconv.NumError); isNum && ne.Err == strconv.ErrRange {
			return 0, errFloatRange(typ, orig)
		}
		return 0, errSyntax(typ, orig)
	}
	if v == 0 && nonzero {
		return 0, errFloatRange(typ, orig)
	}
	return v, nil
}

// scanFloat checks a float's mantissa and exponent after the sign (and
// after "0x" for hex): digits[.digits], at least one digit, where digit
// says what a digit is (decimal or hex), then optionally the exponent mark
// ('e' or 'p', either case) and a decimal exponent. It reports whether any
// mantissa digit is non-zero and whether there is an exponent.
func scanFloat(s string, digit func(byte) bool, mark byte) (nonzero, hasExp, ok bool) {
	i, digits := 0, 0
	mantissa := func() {
		for ; i < len(s) && digit(s[i]); i++ {
			digits++
			nonzero = nonzero || s[i] != '0'
		}
	}
	mantissa()
	if i < len(s) && s[i] == '.' {
		i++
		mantissa()
	}
	if digits == 0 {
		return false, false, false
	}
	if i < len(s) && s[i]|0x20 == mark { // ASCII lower case
		hasExp = true
		if _, i, ok = scanExponent(s, i+1); !ok {
			return false, false, false
		}
	}
	return nonzero, hasExp, i == len(s)
}

// scanExponent scans the [+-]digits of an exponent at s[i:] (after its
// mark) and returns its value, saturated just past numericMaxExp so that
// no input overflows it, and the index after it; ok is false when no digit
// follows the sign.
func scanExponent(s string, i int) (exp int64, next int, ok bool) {
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	for ; i < len(s) && isDigit(s[i]); i++ {
		if exp <= numericMaxExp {
			exp = exp*10 + int64(s[i]-'0')
		}
	}
	if neg {
		exp = -exp
	}
	return exp, i, i > start
}

func isHexDigit(c byte) bool { _, ok := unhex(c); return ok }

// parseBytea parses bytea input in hex format ("\x0a1b", whitespace allowed
// between digit pairs) or the traditional escape format (backslash-escaped
// backslashes and \ooo octal escapes, other bytes literal).
func parseBytea(s string) ([]byte, error) {
	if len(s) >= 2 && s[0] == '\\' && s[1] == 'x' {
		out := make([]byte, 0, (len(s)-2)/2)
		for i := 2; i < len(s); {
			c := s[i]
			if c == ' ' || c == '\n' || c == '\t' || c == '\r' {
				i++
				continue
			}
			hi, ok := unhex(c)
			if !ok {
				return nil, errHexDigit(s[i:])
			}
			i++
			if i >= len(s) {
				return nil, newError(ErrSyntax, "22023", "invalid hexadecimal data: odd number of digits")
			}
			lo, ok := unhex(s[i])
			if !ok {
				return nil, errHexDigit(s[i:])
			}
			i++
			out = append(out, byte(hi<<4|lo))
		}
		return out, nil
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c != '\\':
			out = append(out, c)
			i++
		case i+1 < len(s) && s[i+1] == '\\':
			out = append(out, '\\')
			i += 2
		case i+3 < len(s) && s[i+1] >= '0' && s[i+1] <= '3' &&
			s[i+2] >= '0' && s[i+2] <= '7' && s[i+3] >= '0' && s[i+3] <= '7':
			out = append(out, (s[i+1]-'0')<<6|(s[i+2]-'0')<<3|(s[i+3]-'0'))
			i += 4
		default:
			return nil, newError(ErrSyntax, "22P02", "invalid input syntax for type bytea")
		}
	}
	return out, nil
}

// errHexDigit is 22023 `invalid hexadecimal digit: "g"`, quoting the whole
// (possibly multi-byte) character at the start of rest.
func errHexDigit(rest string) *Error {
	_, n := utf8.DecodeRuneInString(rest)
	return newError(ErrSyntax, "22023", "invalid hexadecimal digit: "+quoteInput(rest[:n]))
}

// parseUUID accepts what Postgres' uuid_in does: 32 hex digits in any case,
// optionally with a hyphen after any group of four digits and optionally
// in braces; no whitespace.
func parseUUID(s string) (u row.UUID, ok bool) {
	i := 0
	braces := len(s) > 0 && s[0] == '{'
	if braces {
		i++
	}
	for k := 0; k < 16; k++ {
		if i+1 >= len(s) {
			return u, false
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return u, false
		}
		u[k] = byte(hi<<4 | lo)
		i += 2
		if i < len(s) && s[i] == '-' && k%2 == 1 && k < 15 {
			i++
		}
	}
	if braces {
		if i >= len(s) || s[i] != '}' {
			return u, false
		}
		i++
	}
	return u, i == len(s)
}
