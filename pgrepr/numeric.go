package pgrepr

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/shardtail/shardtail/row"
)

// Postgres' numeric storage limits: a weight (base-10000 exponent of the
// first digit group) that fits int16 and a display scale of 14 bits.
const (
	numericMaxWeight = 32767
	numericMaxDscale = 0x3FFF
	numericMaxExp    = 1<<30 - 1 // INT_MAX/2: larger exponents overflow outright

	numericPos = 0x0000
	numericNeg = 0x4000
	numericNaN = 0xC000
)

// parseNumeric parses numeric input as Postgres' numeric_in does
// (whitespace, an optional sign, digits with an optional point, an optional
// exponent; NaN in any case) and returns the canonical text row.Numeric
// holds. Infinity, which Postgres 14 accepts, has no row.Numeric
// representation and is rejected as invalid syntax.
func parseNumeric(orig string) (row.Numeric, error) {
	s := trimPGSpace(orig)
	if equalFold(s, "nan") {
		return "NaN", nil
	}
	neg := false
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intDigits := s[start:i]
	fracDigits := ""
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		fracDigits = s[fs:i]
	}
	if intDigits == "" && fracDigits == "" {
		return "", errSyntax("numeric", orig)
	}
	var exp int64
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		var ok bool
		if exp, i, ok = scanExponent(s, i+1); !ok {
			return "", errSyntax("numeric", orig)
		}
		if exp >= numericMaxExp || exp <= -numericMaxExp {
			return "", errNumericOverflow()
		}
	}
	if i != len(s) {
		return "", errSyntax("numeric", orig)
	}
	n, err := canonicalNumeric(neg, intDigits, fracDigits, exp)
	if err != nil {
		return "", err
	}
	return row.Numeric(n), nil
}

// canonicalNumeric returns the canonical text (row.NormalizeNumeric's form:
// no exponent, no leading or trailing zeros, no sign on zero) of the decimal
// [-]intDigits.fracDigits × 10^exp, or Postgres' overflow error if numeric
// cannot store it. Postgres' display scale is the input's fractional digits
// minus the exponent; it must fit 14 bits even when the value is zero.
func canonicalNumeric(neg bool, intDigits, fracDigits string, exp int64) (string, error) {
	dscale := int64(len(fracDigits)) - exp
	if dscale > numericMaxDscale {
		return "", errNumericOverflow()
	}
	// Locate the significant digits in the concatenation intDigits+fracDigits.
	n := len(intDigits) + len(fracDigits)
	at := func(k int) byte {
		if k < len(intDigits) {
			return intDigits[k]
		}
		return fracDigits[k-len(intDigits)]
	}
	first := 0
	for first < n && at(first) == '0' {
		first++
	}
	if first == n {
		return "0", nil
	}
	last := n - 1
	for at(last) == '0' {
		last--
	}
	// The first significant digit's decimal exponent bounds the weight.
	if e10 := int64(len(intDigits)-1-first) + exp; floorDiv(e10, 4) > numericMaxWeight {
		return "", errNumericOverflow()
	}
	// pointExp is the power of ten of the last significant digit.
	pointExp := int64(len(intDigits)-1-last) + exp
	nd := last - first + 1
	var b strings.Builder
	size := nd + 2
	if pointExp > 0 {
		size += int(pointExp)
	} else if -pointExp >= int64(nd) {
		size += int(-pointExp) - nd + 1
	}
	b.Grow(size)
	if neg {
		b.WriteByte('-')
	}
	writeDigits := func(from, to int) {
		for k := from; k < to; k++ {
			b.WriteByte(at(k))
		}
	}
	switch {
	case pointExp >= 0:
		writeDigits(first, last+1)
		for k := int64(0); k < pointExp; k++ {
			b.WriteByte('0')
		}
	case -pointExp < int64(nd):
		split := last + 1 + int(pointExp)
		writeDigits(first, split)
		b.WriteByte('.')
		writeDigits(split, last+1)
	default:
		b.WriteString("0.")
		for k := int64(0); k < -pointExp-int64(nd); k++ {
			b.WriteByte('0')
		}
		writeDigits(first, last+1)
	}
	return b.String(), nil
}

// appendNumericBinary appends numeric_send's format of the decimal text s:
// ndigits, weight, sign, dscale (int16 each), then ndigits base-10000
// digits, most significant first, without leading or trailing zero digits.
// dscale is the number of fractional digits in s, which for canonical text
// is the number Postgres would display.
func appendNumericBinary(buf []byte, s string) []byte {
	if s == "NaN" {
		return append(buf, 0, 0, 0, 0, numericNaN>>8, 0, 0, 0)
	}
	neg := false
	p := s
	if len(p) > 0 && p[0] == '-' {
		neg, p = true, p[1:]
	}
	intPart, frac := p, ""
	if i := strings.IndexByte(p, '.'); i >= 0 {
		intPart, frac = p[:i], p[i+1:]
	}
	if (intPart == "" && frac == "") || !allDigits(intPart) || !allDigits(frac) || len(frac) > numericMaxDscale {
		// Not plain decimal text ("1e5", " 1"): a datum that bypassed
		// canonicalization. Normalize it rather than send garbage.
		n, err := parseNumeric(s)
		if err != nil || string(n) == s {
			panic("pgrepr: invalid numeric datum " + strconv.Quote(s))
		}
		return appendNumericBinary(buf, string(n))
	}
	for len(intPart) > 0 && intPart[0] == '0' {
		intPart = intPart[1:]
	}
	dscale := len(frac)
	fr := strings.TrimRight(frac, "0")
	ig, fg := (len(intPart)+3)/4, (len(fr)+3)/4
	group := func(g int) uint16 {
		var v uint16
		if g < ig {
			end := len(intPart) - (ig-1-g)*4
			for k := max(end-4, 0); k < end; k++ {
				v = v*10 + uint16(intPart[k]-'0')
			}
			return v
		}
		off := (g - ig) * 4
		for k := off; k < off+4; k++ {
			v *= 10
			if k < len(fr) {
				v += uint16(fr[k] - '0')
			}
		}
		return v
	}
	first, last := 0, ig+fg-1
	for first <= last && group(first) == 0 {
		first++
	}
	for last >= first && group(last) == 0 {
		last--
	}
	if first > last {
		// Zero is always positive, weight 0, whatever its scale.
		return append(buf, 0, 0, 0, 0, 0, 0, byte(dscale>>8), byte(dscale))
	}
	ndigits, weight := last-first+1, ig-1-first
	sign := uint16(numericPos)
	if neg {
		sign = numericNeg
	}
	buf = binary.BigEndian.AppendUint16(buf, uint16(ndigits))
	buf = binary.BigEndian.AppendUint16(buf, uint16(int16(weight)))
	buf = binary.BigEndian.AppendUint16(buf, sign)
	buf = binary.BigEndian.AppendUint16(buf, uint16(dscale))
	for g := first; g <= last; g++ {
		buf = binary.BigEndian.AppendUint16(buf, group(g))
	}
	return buf
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// numericFromBinary decodes numeric_recv's input into canonical text. As
// Postgres does, digits beyond dscale are truncated away, not rejected.
func numericFromBinary(b []byte) (row.Numeric, error) {
	if len(b) < 8 {
		return "", errBinary("insufficient data left in message")
	}
	ndigits := int(binary.BigEndian.Uint16(b))
	weight := int(int16(binary.BigEndian.Uint16(b[2:])))
	sign := binary.BigEndian.Uint16(b[4:])
	dscale := int(binary.BigEndian.Uint16(b[6:]))
	if len(b) < 8+2*ndigits {
		return "", errBinary("insufficient data left in message")
	}
	if len(b) > 8+2*ndigits {
		return "", errBinary("incorrect binary data format")
	}
	switch sign {
	case numericPos, numericNeg, numericNaN:
	case 0xD000, 0xF000:
		return "", errBinary("numeric infinity is not supported")
	default:
		return "", errBinary(`invalid sign in external "numeric" value`)
	}
	if dscale&numericMaxDscale != dscale {
		return "", errBinary(`invalid scale in external "numeric" value`)
	}
	digits := b[8 : 8+2*ndigits]
	digit := func(i int) int {
		if i < 0 || i >= ndigits {
			return 0
		}
		return int(binary.BigEndian.Uint16(digits[2*i:]))
	}
	for i := 0; i < ndigits; i++ {
		if digit(i) >= 10000 {
			return "", errBinary(`invalid digit in external "numeric" value`)
		}
	}
	if sign == numericNaN {
		return "NaN", nil
	}
	// Integer part: digit groups with exponent weight-i >= 0.
	var out []byte
	if sign == numericNeg {
		out = append(out, '-')
	}
	signLen := len(out)
	for i := 0; i <= weight; i++ {
		d := digit(i)
		if len(out) == signLen {
			if d == 0 {
				continue
			}
			out = strconv.AppendInt(out, int64(d), 10)
			continue
		}
		out = append(out, byte('0'+d/1000), byte('0'+d/100%10), byte('0'+d/10%10), byte('0'+d%10))
	}
	intEnd := len(out)
	if intEnd == signLen {
		out = append(out, '0')
		intEnd++
	}
	// Fraction: dscale digits from the groups after the point.
	out = append(out, '.')
	for k, i := 0, weight+1; k < dscale; i++ {
		d := digit(i)
		for _, c := range [4]byte{byte('0' + d/1000), byte('0' + d/100%10), byte('0' + d/10%10), byte('0' + d%10)} {
			if k < dscale {
				out = append(out, c)
				k++
			}
		}
	}
	for out[len(out)-1] == '0' {
		out = out[:len(out)-1]
	}
	if out[len(out)-1] == '.' {
		out = out[:len(out)-1]
	}
	if string(out[signLen:]) == "0" {
		return "0", nil
	}
	return row.Numeric(out), nil
}

// AppendNumericUint64Text appends v as numeric text; it is the fast path for
// SUBSCRIBE's mz_timestamp column, a uint64 sent as numeric. It does not
// allocate beyond growing buf.
func AppendNumericUint64Text(buf []byte, v uint64) []byte {
	return strconv.AppendUint(buf, v, 10)
}

// AppendNumericUint64Binary appends v in numeric's binary format (scale 0),
// exactly what AppendBinary produces for the numeric v, without building
// the text first. It is the binary fast path for mz_timestamp.
func AppendNumericUint64Binary(buf []byte, v uint64) []byte {
	if v == 0 {
		return append(buf, 0, 0, 0, 0, 0, 0, 0, 0)
	}
	var g [5]uint16 // least significant first; uint64 has at most 20 digits
	n := 0
	for ; v > 0; n++ {
		g[n] = uint16(v % 10000)
		v /= 10000
	}
	low := 0
	for g[low] == 0 {
		low++
	}
	nd, weight := n-low, n-1
	buf = append(buf, byte(nd>>8), byte(nd), byte(weight>>8), byte(weight), 0, 0, 0, 0)
	for i := n - 1; i >= low; i-- {
		buf = append(buf, byte(g[i]>>8), byte(g[i]))
	}
	return buf
}
