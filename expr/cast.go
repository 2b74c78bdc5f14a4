package expr

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/row"
)

// castLevel is the context a conversion happens in, as Postgres'
// pg_cast.castcontext: implicit conversions apply anywhere (int4 to int8
// in an expression), assignment conversions when a value is stored or a
// constant is given (numeric to int4 for LIMIT), explicit ones only in
// CAST and ::.
type castLevel uint8

const (
	castImplicit castLevel = iota
	castAssignment
	castExplicit
)

// implicitCast reports whether from converts to to implicitly.
func implicitCast(from, to Type) bool {
	if from == to || from == TypeUnknown || to == typeAny {
		return true
	}
	switch fc := from.category(); {
	case fc != catOther && fc == to.category():
		return to.rank() > from.rank()
	case to == TypeMzTimestamp:
		switch from {
		case TypeInt2, TypeInt4, TypeInt8, TypeNumeric, TypeDate, TypeTimestamp, TypeTimestampTZ:
			return true
		}
	}
	return false
}

// castLevelOf returns the lowest level at which from converts to to, and
// false if it never does.
func castLevelOf(from, to Type) (castLevel, bool) {
	if implicitCast(from, to) {
		return castImplicit, true
	}
	switch fc := from.category(); {
	case fc == catNumeric && to.category() == catNumeric,
		fc == catDatetime && to.category() == catDatetime,
		to == TypeText:
		return castAssignment, true
	case from == TypeMzTimestamp:
		switch to {
		case TypeInt8, TypeNumeric, TypeTimestamp, TypeTimestampTZ:
			return castAssignment, true
		}
	case to == TypeMzTimestamp && from == TypeText:
		return castExplicit, true
	case from == TypeText:
		return castExplicit, true
	case from == TypeInt4 && to == TypeBool, from == TypeBool && to == TypeInt4:
		return castExplicit, true
	case from == TypeJSONB:
		switch to {
		case TypeBool, TypeInt2, TypeInt4, TypeInt8, TypeNumeric, TypeFloat4, TypeFloat8:
			return castExplicit, true
		}
	}
	return 0, false
}

// castFunc returns the conversion from from to to (with the modifier
// applied), if one exists at level or below. The function gets and
// returns non-NULL datums.
func castFunc(from, to Type, mod row.TypeMod, level castLevel) (func(row.Datum) (row.Datum, error), bool) {
	need, ok := castLevelOf(from, to)
	if !ok || need > level {
		return nil, false
	}
	f := baseCast(from, to)
	if f == nil {
		return nil, false
	}
	if !mod.Set {
		return f, true
	}
	m := modifier(to, mod, level == castExplicit)
	if from == to {
		return m, true
	}
	return func(d row.Datum) (row.Datum, error) {
		v, err := f(d)
		if err != nil {
			return nil, err
		}
		return m(v)
	}, true
}

func identity(d row.Datum) (row.Datum, error) { return d, nil }

// baseCast returns the conversion between two types, ignoring levels.
func baseCast(from, to Type) func(row.Datum) (row.Datum, error) {
	if from == to {
		return identity
	}
	switch {
	case from == TypeUnknown || from == TypeText:
		return func(d row.Datum) (row.Datum, error) { return ParseText(to, d.(string)) }
	case to == TypeText:
		return func(d row.Datum) (row.Datum, error) { return castToText(from, d), nil }
	case from.category() == catNumeric && to.category() == catNumeric:
		return numericCast(from, to)
	case from.category() == catDatetime && to.category() == catDatetime:
		return datetimeCast(from, to)
	case to == TypeMzTimestamp:
		return toMzTimestamp(from)
	case from == TypeMzTimestamp:
		return fromMzTimestamp(to)
	case from == TypeInt4 && to == TypeBool:
		return func(d row.Datum) (row.Datum, error) { return d.(int32) != 0, nil }
	case from == TypeBool && to == TypeInt4:
		return func(d row.Datum) (row.Datum, error) {
			if d.(bool) {
				return int32(1), nil
			}
			return int32(0), nil
		}
	case from == TypeJSONB:
		return jsonbToScalar(to)
	}
	return nil
}

// formatText returns the text output of a value, as Postgres' output
// function prints it (bool as "t"/"f").
func formatText(t Type, d row.Datum) string {
	switch v := d.(type) {
	case string:
		return v
	case uint64:
		return strconv.FormatUint(v, 10)
	case Interval:
		return v.String()
	}
	return string(pgrepr.AppendText(nil, t.Rep(), d))
}

// castToText is a cast to text: the output function, except that booleans
// become "true" and "false", as Postgres' bool-to-text cast does.
func castToText(t Type, d row.Datum) string {
	if b, ok := d.(bool); ok {
		return strconv.FormatBool(b)
	}
	return formatText(t, d)
}

// parseRowText parses the text of a column type through pgrepr.
func parseRowText(t row.Type, s string) (row.Datum, error) {
	return pgrepr.ParseText(t, s)
}

// numericCast converts between integer, numeric and float types with
// Postgres' rounding (numeric to integer: half away from zero; float to
// integer: half to even) and range checks.
func numericCast(from, to Type) func(row.Datum) (row.Datum, error) {
	switch to {
	case TypeInt2, TypeInt4, TypeInt8:
		return func(d row.Datum) (row.Datum, error) { return toInt(to, d) }
	case TypeNumeric:
		return toNumeric
	case TypeFloat4:
		return func(d row.Datum) (row.Datum, error) {
			switch v := d.(type) {
			case float64:
				r := float32(v)
				if isInf(r) && !math.IsInf(v, 0) {
					return nil, errFloatOverflow
				}
				if r == 0 && v != 0 {
					return nil, errFloatUnderflow
				}
				return r, nil
			case row.Numeric:
				f, err := numericToFloat(v, 32)
				return float32(f), err
			}
			i, _ := intValue(d)
			return float32(i), nil
		}
	case TypeFloat8:
		return func(d row.Datum) (row.Datum, error) {
			switch v := d.(type) {
			case float32:
				return float64(v), nil
			case row.Numeric:
				return numericToFloat(v, 64)
			}
			i, _ := intValue(d)
			return float64(i), nil
		}
	}
	return nil
}

func intValue(d row.Datum) (int64, bool) {
	switch v := d.(type) {
	case int16:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	}
	return 0, false
}

func intRangeErr(t Type) *Error {
	switch t {
	case TypeInt2:
		return errInt2Range
	case TypeInt4:
		return errInt4Range
	}
	return errInt8Range
}

// toInt converts a number to an integer type.
func toInt(to Type, d row.Datum) (row.Datum, error) {
	var i int64
	switch v := d.(type) {
	case float32, float64:
		f := toFloat64(v)
		f = math.RoundToEven(f)
		// Postgres' FLOAT8_FITS_IN_INT64: [-2^63, 2^63).
		if math.IsNaN(f) || f < -9223372036854775808.0 || f >= 9223372036854775808.0 {
			return nil, intRangeErr(to)
		}
		i = int64(f)
	case row.Numeric:
		if v == "NaN" {
			return nil, errf(CodeFeatureNotSupported, "cannot convert NaN to %s", to)
		}
		x := numDec(v)
		if numDigits(x)+int64(x.Exponent) > 20 {
			return nil, intRangeErr(to)
		}
		var err error
		if i, err = quantize(x, 0, apd.RoundHalfUp).Int64(); err != nil {
			return nil, intRangeErr(to)
		}
	default:
		i, _ = intValue(d)
	}
	switch to {
	case TypeInt2:
		if i < math.MinInt16 || i > math.MaxInt16 {
			return nil, errInt2Range
		}
		return int16(i), nil
	case TypeInt4:
		if i < math.MinInt32 || i > math.MaxInt32 {
			return nil, errInt4Range
		}
		return int32(i), nil
	}
	return i, nil
}

func toFloat64(d row.Datum) float64 {
	switch v := d.(type) {
	case float32:
		return float64(v)
	case float64:
		return v
	}
	i, _ := intValue(d)
	return float64(i)
}

// toNumeric converts an integer or float to numeric. Floats keep 15
// (float8) or 6 (float4) significant digits, as Postgres' float8_numeric
// does, so that 0.1::float8::numeric is 0.1.
func toNumeric(d row.Datum) (row.Datum, error) {
	var s string
	switch v := d.(type) {
	case float32:
		if isInf(v) {
			return nil, errf(CodeFeatureNotSupported, "cannot convert infinity to numeric")
		}
		if isNaN(v) {
			return row.Numeric("NaN"), nil
		}
		s = strconv.FormatFloat(float64(v), 'g', 6, 64)
	case float64:
		if math.IsInf(v, 0) {
			return nil, errf(CodeFeatureNotSupported, "cannot convert infinity to numeric")
		}
		if math.IsNaN(v) {
			return row.Numeric("NaN"), nil
		}
		s = strconv.FormatFloat(v, 'g', 15, 64)
	case row.Numeric:
		return v, nil
	default:
		i, _ := intValue(d)
		return row.Numeric(strconv.FormatInt(i, 10)), nil
	}
	n, err := row.NormalizeNumeric(s)
	if err != nil {
		return nil, errNumericRange
	}
	return n, nil
}

func numericToFloat(n row.Numeric, bits int) (float64, error) {
	if n == "NaN" {
		return math.NaN(), nil
	}
	f, err := strconv.ParseFloat(string(n), bits)
	if err != nil || (f == 0 && n != "0") {
		name := "double precision"
		if bits == 32 {
			name = "real"
		}
		return 0, errf(CodeNumericValueOutOfRange, "\"%s\" is out of range for type %s", n, name)
	}
	return f, nil
}

// datetimeCast converts between date, timestamp and timestamptz (the
// session time zone is UTC, so timestamp and timestamptz share values).
// Infinities map to infinities.
func datetimeCast(from, to Type) func(row.Datum) (row.Datum, error) {
	return func(d row.Datum) (row.Datum, error) {
		var us int64
		switch v := d.(type) {
		case row.Date:
			switch v {
			case pgrepr.DateInfinity:
				us = pgrepr.TimestampInfinity
			case pgrepr.DateNegInfinity:
				us = pgrepr.TimestampNegInfinity
			default:
				us = int64(v) * usPerDay
				if !validTimestamp(us) {
					return nil, errf(CodeDatetimeFieldOverflow, "date out of range for timestamp")
				}
			}
		case row.Timestamp:
			us = int64(v)
		case row.TimestampTZ:
			us = int64(v)
		}
		switch to {
		case TypeTimestamp:
			return row.Timestamp(us), nil
		case TypeTimestampTZ:
			return row.TimestampTZ(us), nil
		}
		return tsToDate(us), nil
	}
}

// tsToDate returns the date of a timestamp.
func tsToDate(us int64) row.Date {
	switch us {
	case pgrepr.TimestampInfinity:
		return pgrepr.DateInfinity
	case pgrepr.TimestampNegInfinity:
		return pgrepr.DateNegInfinity
	}
	return row.Date(floorDiv(us, usPerDay))
}

// minTimestamp is Postgres' earliest timestamp, 4714-11-24 00:00:00 BC, in
// microseconds since 1970.
const minTimestamp = -210866803200000000

// validTimestamp reports whether us is a finite timestamp that both
// Postgres and row can hold.
func validTimestamp(us int64) bool {
	return us >= minTimestamp && us < pgrepr.TimestampInfinity
}

// toMzTimestamp converts to mz_timestamp: integers and numerics are
// milliseconds; timestamps are their instant in milliseconds.
func toMzTimestamp(from Type) func(row.Datum) (row.Datum, error) {
	return func(d row.Datum) (row.Datum, error) {
		switch v := d.(type) {
		case row.Numeric:
			u, ok := numericToUint64(v)
			if !ok {
				return nil, errMzTsRange
			}
			return u, nil
		case row.Timestamp:
			return usToMz(int64(v))
		case row.TimestampTZ:
			return usToMz(int64(v))
		case row.Date:
			if v == pgrepr.DateInfinity || v == pgrepr.DateNegInfinity || v < 0 {
				return nil, errMzTsRange
			}
			return uint64(v) * msPerDay, nil
		}
		i, ok := intValue(d)
		if !ok || i < 0 {
			return nil, errMzTsRange
		}
		return uint64(i), nil
	}
}

// numericToUint64 rounds n half away from zero to an integer and reports
// whether it is in uint64's range. Numeric is the type of a literal past
// int8 (AS OF 18446744073709551615), so the conversion must not pass
// through int64, which would cut mz_timestamp's range in half.
func numericToUint64(n row.Numeric) (uint64, bool) {
	if n == "NaN" {
		return 0, false
	}
	x := numDec(n)
	// Twenty digits hold every uint64; more cannot, and bounding the
	// digits first keeps a literal like 1e100000 from building a huge
	// power of ten below.
	if !x.IsZero() && numDigits(x)+int64(x.Exponent) > 20 {
		return 0, false
	}
	q := quantize(x, 0, apd.RoundHalfUp)
	i := new(big.Int).Set(q.Coeff.MathBigInt())
	if q.Exponent > 0 {
		i.Mul(i, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(q.Exponent)), nil))
	}
	if q.Negative && i.Sign() != 0 || !i.IsUint64() {
		return 0, false
	}
	return i.Uint64(), true
}

func usToMz(us int64) (row.Datum, error) {
	if us < 0 || us == pgrepr.TimestampInfinity {
		return nil, errMzTsRange
	}
	return uint64(us / 1000), nil
}

func fromMzTimestamp(to Type) func(row.Datum) (row.Datum, error) {
	return func(d row.Datum) (row.Datum, error) {
		v := d.(uint64)
		switch to {
		case TypeNumeric:
			return row.Numeric(strconv.FormatUint(v, 10)), nil
		case TypeInt8:
			if v > math.MaxInt64 {
				return nil, errInt8Range
			}
			return int64(v), nil
		}
		if v > uint64(pgrepr.TimestampInfinity-1)/1000 {
			return nil, errTimestampRange
		}
		if to == TypeTimestamp {
			return row.Timestamp(int64(v) * 1000), nil
		}
		return row.TimestampTZ(int64(v) * 1000), nil
	}
}

// parseMzTimestamp parses mz_timestamp input: a number of milliseconds,
// or a timestamp with time zone.
func parseMzTimestamp(s string) (row.Datum, error) {
	t := strings.TrimSpace(s)
	if t != "" && strings.Trim(t, "0123456789") == "" {
		v, err := strconv.ParseUint(t, 10, 64)
		if err != nil {
			return nil, errMzTsRange
		}
		return v, nil
	}
	if n, err := row.NormalizeNumeric(t); err == nil && n != "NaN" {
		return toMzTimestamp(TypeNumeric)(n)
	}
	ts, err := pgrepr.ParseText(row.TypeTimestampTZ, s)
	if err != nil {
		return nil, errf(CodeInvalidTextRepresentation, "invalid input syntax for type mz_timestamp: \"%s\"", s)
	}
	return usToMz(int64(ts.(row.TimestampTZ)))
}

// modifier applies a type modifier: numeric(p, s) rounds to s digits and
// checks the precision; varchar(n) truncates (explicit) or rejects
// (otherwise, unless what it would cut is spaces) longer strings;
// timestamp(p) rounds to p fractional digits.
func modifier(t Type, mod row.TypeMod, explicit bool) func(row.Datum) (row.Datum, error) {
	switch t {
	case TypeNumeric:
		return func(d row.Datum) (row.Datum, error) {
			n := d.(row.Numeric)
			if n == "NaN" {
				return n, nil
			}
			r, err := numRound(numDec(n), int64(mod.Scale))
			if err != nil {
				return nil, err
			}
			x := numDec(r.(row.Numeric))
			if !x.IsZero() && numDigits(x)+int64(x.Exponent) > int64(mod.Precision-mod.Scale) {
				return nil, &Error{code: CodeNumericValueOutOfRange, msg: "numeric field overflow",
					hint: "A field with precision " + strconv.Itoa(mod.Precision) + ", scale " + strconv.Itoa(mod.Scale) +
						" must round to an absolute value less than 10^" + strconv.Itoa(mod.Precision-mod.Scale) + "."}
			}
			return r, nil
		}
	case TypeText:
		return func(d row.Datum) (row.Datum, error) {
			s := d.(string)
			if utf8.RuneCountInString(s) <= mod.Length {
				return s, nil
			}
			i, n := 0, 0
			for i = range s {
				if n == mod.Length {
					break
				}
				n++
			}
			// An assignment cuts only trailing spaces, as Postgres'
			// varchar(): 'ab  ' fits varchar(3) as 'ab ', 'abcd' does not.
			if !explicit && strings.TrimRight(s[i:], " ") != "" {
				return nil, errf("22001", "value too long for type character varying(%d)", mod.Length)
			}
			return s[:i], nil
		}
	case TypeTimestamp, TypeTimestampTZ:
		scale := int64(math.Pow10(6 - mod.Precision))
		return func(d row.Datum) (row.Datum, error) {
			var us int64
			switch v := d.(type) {
			case row.Timestamp:
				us = int64(v)
			case row.TimestampTZ:
				us = int64(v)
			}
			if us == pgrepr.TimestampInfinity || us == pgrepr.TimestampNegInfinity || scale == 1 {
				return d, nil
			}
			// Half away from zero, as Postgres' AdjustTimestampForTypmod.
			if us >= 0 {
				us = (us + scale/2) / scale * scale
			} else {
				us = -((-us + scale/2) / scale * scale)
			}
			if !validTimestamp(us) {
				return nil, errTimestampRange
			}
			if t == TypeTimestamp {
				return row.Timestamp(us), nil
			}
			return row.TimestampTZ(us), nil
		}
	}
	return identity
}
