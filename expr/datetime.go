package expr

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/row"
)

// Date and time values are microseconds (timestamps) or days (dates) since
// 1970-01-01; the session time zone is UTC, so timestamp and timestamptz
// differ only in type. Calendar fields come from package time, whose
// proleptic Gregorian calendar with a year 0 is Postgres' internal one.

const (
	tsInf    = pgrepr.TimestampInfinity
	tsNegInf = pgrepr.TimestampNegInfinity
	// Postgres' date range in days since 1970: 4714-11-24 BC up to
	// 5874898-01-01 (exclusive).
	minDateDays = -2440588
	endDateDays = 2145042906
)

func tsMicros(d row.Datum) int64 {
	switch v := d.(type) {
	case row.Timestamp:
		return int64(v)
	case row.TimestampTZ:
		return int64(v)
	case row.Date:
		return int64(v) * usPerDay
	}
	return 0
}

func mkTs(t Type, us int64) row.Datum {
	if t == TypeTimestampTZ {
		return row.TimestampTZ(us)
	}
	return row.Timestamp(us)
}

func isInfTs(us int64) bool { return us == tsInf || us == tsNegInf }

func utcTime(us int64) time.Time { return time.UnixMicro(us).UTC() }

// fromCivil returns the microseconds of y-m-d plus a time of day.
func fromCivil(y int, m time.Month, d int, tod int64) (int64, error) {
	if y < -4713 || y > 294277 {
		return 0, errTimestampRange
	}
	days := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
	us := days*usPerDay + tod
	if !validTimestamp(us) {
		return 0, errTimestampRange
	}
	return us, nil
}

func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// addIntervalTo adds an interval to a timestamp as Postgres does: months
// first, keeping the day of month unless the month is shorter; then days;
// then time.
func addIntervalTo(us int64, iv Interval) (int64, error) {
	if isInfTs(us) {
		return us, nil
	}
	if iv.Months != 0 {
		t := utcTime(us)
		y, m, d := t.Date()
		mm := int64(y)*12 + int64(m-1) + int64(iv.Months)
		ny := floorDiv(mm, 12)
		if ny < -4713 || ny > 294277 {
			return 0, errTimestampRange
		}
		nm := time.Month(mm-ny*12) + 1
		d = min(d, daysIn(int(ny), nm))
		var err error
		if us, err = fromCivil(int(ny), nm, d, us-floorDiv(us, usPerDay)*usPerDay); err != nil {
			return 0, err
		}
	}
	var ok bool
	if us, ok = addInt64(us, int64(iv.Days)*usPerDay); !ok {
		return 0, errTimestampRange
	}
	if us, ok = addInt64(us, iv.Micros); !ok || !validTimestamp(us) {
		return 0, errTimestampRange
	}
	return us, nil
}

func tsPlusInterval(t Type, sign int) func(a, b row.Datum) (row.Datum, error) {
	return func(a, b row.Datum) (row.Datum, error) {
		iv := b.(Interval)
		if sign < 0 {
			var err error
			if iv, err = negInterval(iv); err != nil {
				return nil, err
			}
		}
		us, err := addIntervalTo(tsMicros(a), iv)
		if err != nil {
			return nil, err
		}
		return mkTs(t, us), nil
	}
}

func datePlusInterval(sign int) func(a, b row.Datum) (row.Datum, error) {
	f := tsPlusInterval(TypeTimestamp, sign)
	return func(a, b row.Datum) (row.Datum, error) {
		ts, err := datetimeCast(TypeDate, TypeTimestamp)(a)
		if err != nil {
			return nil, err
		}
		return f(ts, b)
	}
}

func datePlusDays(sign int64) func(a, b row.Datum) (row.Datum, error) {
	return func(a, b row.Datum) (row.Datum, error) {
		d := a.(row.Date)
		if d == pgrepr.DateInfinity || d == pgrepr.DateNegInfinity {
			return d, nil
		}
		r := int64(d) + sign*int64(b.(int32))
		if r < minDateDays || r >= endDateDays {
			return nil, errDateRange
		}
		return row.Date(r), nil
	}
}

func dateMinusDate(a, b row.Datum) (row.Datum, error) {
	x, y := a.(row.Date), b.(row.Date)
	for _, d := range []row.Date{x, y} {
		if d == pgrepr.DateInfinity || d == pgrepr.DateNegInfinity {
			return nil, errf(CodeDatetimeFieldOverflow, "cannot subtract infinite dates")
		}
	}
	return int32(int64(x) - int64(y)), nil
}

// tsMinusTs is timestamp - timestamp: an interval of days and time, the
// days taken out of the time as justify_hours does.
func tsMinusTs(a, b row.Datum) (row.Datum, error) {
	x, y := tsMicros(a), tsMicros(b)
	if isInfTs(x) || isInfTs(y) {
		return nil, errf(CodeDatetimeFieldOverflow, "cannot subtract infinite timestamps")
	}
	us, ok := subInt64(x, y)
	if !ok {
		return nil, errIntervalRange
	}
	return Interval{Days: int32(us / usPerDay), Micros: us % usPerDay}, nil
}

// dateUnits maps the unit names of date_trunc and date_part to canonical
// ones, as Postgres' DecodeUnits.
var dateUnits = map[string]string{
	"microsecond": "microseconds", "microseconds": "microseconds", "us": "microseconds", "usec": "microseconds", "usecs": "microseconds", "useconds": "microseconds", "usecond": "microseconds",
	"millisecond": "milliseconds", "milliseconds": "milliseconds", "ms": "milliseconds", "msec": "milliseconds", "msecs": "milliseconds", "mseconds": "milliseconds", "msecond": "milliseconds",
	"second": "second", "seconds": "second", "sec": "second", "secs": "second", "s": "second",
	"minute": "minute", "minutes": "minute", "min": "minute", "mins": "minute", "m": "minute",
	"hour": "hour", "hours": "hour", "hr": "hour", "hrs": "hour", "h": "hour",
	"day": "day", "days": "day", "d": "day",
	"week": "week", "weeks": "week", "w": "week",
	"month": "month", "months": "month", "mon": "month", "mons": "month",
	"quarter": "quarter", "qtr": "quarter",
	"year": "year", "years": "year", "yr": "year", "yrs": "year", "y": "year",
	"decade": "decade", "decades": "decade", "dec": "decade", "decs": "decade",
	"century": "century", "centuries": "century", "c": "century", "cent": "century",
	"millennium": "millennium", "millennia": "millennium", "mil": "millennium", "mils": "millennium", "millenniums": "millennium",
	"epoch": "epoch", "dow": "dow", "isodow": "isodow", "doy": "doy", "isoyear": "isoyear",
	"julian": "julian", "j": "julian", "timezone": "timezone", "timezone_h": "timezone_hour",
	"timezone_hour": "timezone_hour", "timezone_m": "timezone_minute", "timezone_minute": "timezone_minute",
}

func errUnitNotRecognized(raw string, t Type) *Error {
	return errf(CodeInvalidParameterValue, "unit \"%s\" not recognized for type %s", raw, t)
}

func errUnitNotSupported(raw string, t Type) *Error {
	return errf(CodeFeatureNotSupported, "unit \"%s\" not supported for type %s", raw, t)
}

// dateTrunc is date_trunc(unit, timestamp[tz]).
func dateTrunc(t Type) func(_ *EvalContext, args []row.Datum) (row.Datum, error) {
	return func(_ *EvalContext, args []row.Datum) (row.Datum, error) {
		raw := args[0].(string)
		unit, ok := dateUnits[strings.ToLower(raw)]
		if !ok {
			return nil, errUnitNotRecognized(raw, t)
		}
		us := tsMicros(args[1])
		if isInfTs(us) {
			return args[1], nil
		}
		tm := utcTime(us)
		y, m, _ := tm.Date()
		tod := us - floorDiv(us, usPerDay)*usPerDay
		var r int64
		var err error
		switch unit {
		case "microseconds":
			r = us
		case "milliseconds":
			r = floorDiv(us, 1000) * 1000
		case "second":
			r = floorDiv(us, usPerSec) * usPerSec
		case "minute":
			r = floorDiv(us, usPerMin) * usPerMin
		case "hour":
			r = floorDiv(us, usPerHour) * usPerHour
		case "day":
			r = us - tod
		case "week":
			wd := (int64(tm.Weekday()) + 6) % 7 // days since Monday
			r = us - tod - wd*usPerDay
		case "month":
			r, err = fromCivil(y, m, 1, 0)
		case "quarter":
			r, err = fromCivil(y, (m-1)/3*3+1, 1, 0)
		case "year":
			r, err = fromCivil(y, 1, 1, 0)
		case "decade":
			if y > 0 {
				y = y / 10 * 10
			} else {
				y = -((8 - (y - 1)) / 10) * 10
			}
			r, err = fromCivil(y, 1, 1, 0)
		case "century":
			if y > 0 {
				y = (y+99)/100*100 - 99
			} else {
				y = -((99-(y-1))/100)*100 + 1
			}
			r, err = fromCivil(y, 1, 1, 0)
		case "millennium":
			if y > 0 {
				y = (y+999)/1000*1000 - 999
			} else {
				y = -((999-(y-1))/1000)*1000 + 1
			}
			r, err = fromCivil(y, 1, 1, 0)
		default:
			return nil, errUnitNotRecognized(raw, t)
		}
		if err != nil {
			return nil, err
		}
		if !validTimestamp(r) {
			return nil, errTimestampRange
		}
		return mkTs(t, r), nil
	}
}

// intervalTrunc is date_trunc(unit, interval): the fields below unit
// zeroed, as Postgres' interval_trunc.
func intervalTrunc(_ *EvalContext, args []row.Datum) (row.Datum, error) {
	raw := args[0].(string)
	iv := args[1].(Interval)
	unit, ok := dateUnits[strings.ToLower(raw)]
	if !ok {
		return nil, errUnitNotRecognized(raw, TypeInterval)
	}
	years, mons := iv.Months/12, iv.Months%12
	us := iv.Micros
	switch unit {
	case "millennium":
		return Interval{Months: years / 1000 * 12000}, nil
	case "century":
		return Interval{Months: years / 100 * 1200}, nil
	case "decade":
		return Interval{Months: years / 10 * 120}, nil
	case "year":
		return Interval{Months: years * 12}, nil
	case "quarter":
		return Interval{Months: years*12 + mons/3*3}, nil
	case "month":
		return Interval{Months: iv.Months}, nil
	case "day":
		return Interval{Months: iv.Months, Days: iv.Days}, nil
	case "hour":
		return Interval{Months: iv.Months, Days: iv.Days, Micros: us / usPerHour * usPerHour}, nil
	case "minute":
		return Interval{Months: iv.Months, Days: iv.Days, Micros: us / usPerMin * usPerMin}, nil
	case "second":
		return Interval{Months: iv.Months, Days: iv.Days, Micros: us / usPerSec * usPerSec}, nil
	case "milliseconds":
		return Interval{Months: iv.Months, Days: iv.Days, Micros: us / 1000 * 1000}, nil
	case "microseconds":
		return iv, nil
	case "week", "epoch", "dow", "isodow", "doy", "isoyear", "julian", "timezone", "timezone_hour", "timezone_minute":
		if unit == "week" {
			return nil, errUnitNotSupported(raw, TypeInterval)
		}
	}
	return nil, errUnitNotRecognized(raw, TypeInterval)
}

// datePart computes a field of a timestamp as a decimal: value / 10^scale.
// It returns ok false for an infinite timestamp's field, which is NULL,
// and inf ±1 for the fields that are infinite with it.
func datePart(t Type, raw string, us int64) (value int64, scale int, inf int, err error) {
	unit, ok := dateUnits[strings.ToLower(raw)]
	if !ok {
		return 0, 0, 0, errUnitNotRecognized(raw, t)
	}
	if isInfTs(us) {
		sign := 1
		if us == tsNegInf {
			sign = -1
		}
		switch unit {
		case "epoch", "year", "decade", "century", "millennium", "julian", "isoyear":
			return 0, 0, sign, nil
		}
		return 0, 0, 2, nil // NULL
	}
	tm := utcTime(us)
	y, m, d := tm.Date()
	sec := int64(tm.Second())
	frac := us - floorDiv(us, usPerSec)*usPerSec
	switch unit {
	case "microseconds":
		return sec*usPerSec + frac, 0, 0, nil
	case "milliseconds":
		return sec*usPerSec + frac, 3, 0, nil
	case "second":
		return sec*usPerSec + frac, 6, 0, nil
	case "minute":
		return int64(tm.Minute()), 0, 0, nil
	case "hour":
		return int64(tm.Hour()), 0, 0, nil
	case "day":
		return int64(d), 0, 0, nil
	case "month":
		return int64(m), 0, 0, nil
	case "quarter":
		return int64(m-1)/3 + 1, 0, 0, nil
	case "week":
		_, w := tm.ISOWeek()
		return int64(w), 0, 0, nil
	case "year":
		if y > 0 {
			return int64(y), 0, 0, nil
		}
		return int64(y) - 1, 0, 0, nil
	case "decade":
		if y >= 0 {
			return int64(y) / 10, 0, 0, nil
		}
		return -((8 - (int64(y) - 1)) / 10), 0, 0, nil
	case "century":
		if y > 0 {
			return (int64(y) + 99) / 100, 0, 0, nil
		}
		return -((99 - (int64(y) - 1)) / 100), 0, 0, nil
	case "millennium":
		if y > 0 {
			return (int64(y) + 999) / 1000, 0, 0, nil
		}
		return -((999 - (int64(y) - 1)) / 1000), 0, 0, nil
	case "dow":
		return int64(tm.Weekday()), 0, 0, nil
	case "isodow":
		wd := int64(tm.Weekday())
		if wd == 0 {
			wd = 7
		}
		return wd, 0, 0, nil
	case "doy":
		return int64(tm.YearDay()), 0, 0, nil
	case "isoyear":
		iy, _ := tm.ISOWeek()
		if iy <= 0 {
			iy--
		}
		return int64(iy), 0, 0, nil
	case "epoch":
		return us, 6, 0, nil
	case "timezone", "timezone_hour", "timezone_minute":
		if t == TypeTimestampTZ {
			return 0, 0, 0, nil
		}
	}
	return 0, 0, 0, errUnitNotSupported(raw, t)
}

// intervalPart computes a field of an interval, as datePart.
func intervalPart(raw string, iv Interval) (value int64, scale int, err error) {
	unit, ok := dateUnits[strings.ToLower(raw)]
	if !ok {
		return 0, 0, errUnitNotRecognized(raw, TypeInterval)
	}
	us := iv.Micros
	switch unit {
	case "microseconds":
		return us % usPerMin, 0, nil
	case "milliseconds":
		return us % usPerMin, 3, nil
	case "second":
		return us % usPerMin, 6, nil
	case "minute":
		return us / usPerMin % 60, 0, nil
	case "hour":
		return us / usPerHour, 0, nil
	case "day":
		return int64(iv.Days), 0, nil
	case "month":
		return int64(iv.Months % 12), 0, nil
	case "quarter":
		return int64(iv.Months%12)/3 + 1, 0, nil
	case "year":
		return int64(iv.Months / 12), 0, nil
	case "decade":
		return int64(iv.Months / 120), 0, nil
	case "century":
		return int64(iv.Months / 1200), 0, nil
	case "millennium":
		return int64(iv.Months / 12000), 0, nil
	case "epoch":
		// A year is 365.25 days, a month 30, as Postgres counts them.
		secs := int64(iv.Months/12)*36525*864 + int64(iv.Months%12)*30*86400 + int64(iv.Days)*86400
		return secs*usPerSec + us, 6, nil
	}
	return 0, 0, errUnitNotSupported(raw, TypeInterval)
}

// scaledFloat and scaledNumeric render value / 10^scale.
func scaledFloat(v int64, scale int) float64 { return float64(v) / math.Pow10(scale) }

func scaledNumeric(v int64, scale int) row.Numeric {
	s := strconv.FormatInt(v, 10)
	if scale > 0 {
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		for len(s) <= scale {
			s = "0" + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
		if neg {
			s = "-" + s
		}
	}
	n, _ := row.NormalizeNumeric(s)
	return n
}

// datePartFunc is date_part (float8) or extract (numeric) of a timestamp.
func datePartFunc(t Type, numeric bool) func(_ *EvalContext, args []row.Datum) (row.Datum, error) {
	return func(_ *EvalContext, args []row.Datum) (row.Datum, error) {
		raw := args[0].(string)
		if unit := dateUnits[strings.ToLower(raw)]; unit == "julian" {
			return julian(args[1], numeric)
		}
		v, scale, inf, err := datePart(t, raw, tsMicros(args[1]))
		switch {
		case err != nil:
			return nil, err
		case inf == 2:
			return nil, nil
		case inf != 0 && numeric:
			return nil, errf(CodeFeatureNotSupported, "cannot convert infinity to numeric")
		case inf != 0:
			return math.Inf(inf), nil
		case numeric:
			return scaledNumeric(v, scale), nil
		}
		return scaledFloat(v, scale), nil
	}
}

// julian is the Julian day with the time of day as its fraction.
func julian(d row.Datum, numeric bool) (row.Datum, error) {
	us := tsMicros(d)
	if isInfTs(us) {
		if numeric {
			return nil, errf(CodeFeatureNotSupported, "cannot convert infinity to numeric")
		}
		if us > 0 {
			return math.Inf(1), nil
		}
		return math.Inf(-1), nil
	}
	const julianEpoch = 2440588 // Julian day of 1970-01-01
	days := floorDiv(us, usPerDay)
	tod := us - days*usPerDay
	f := float64(days+julianEpoch) + float64(tod)/usPerDay
	if numeric {
		return toNumeric(f)
	}
	return f, nil
}

func intervalPartFunc(numeric bool) func(_ *EvalContext, args []row.Datum) (row.Datum, error) {
	return func(_ *EvalContext, args []row.Datum) (row.Datum, error) {
		v, scale, err := intervalPart(args[0].(string), args[1].(Interval))
		switch {
		case err != nil:
			return nil, err
		case numeric:
			return scaledNumeric(v, scale), nil
		}
		return scaledFloat(v, scale), nil
	}
}

// toTimestamp is to_timestamp(seconds since the epoch).
func toTimestamp(_ *EvalContext, args []row.Datum) (row.Datum, error) {
	f := args[0].(float64)
	switch {
	case math.IsNaN(f):
		return nil, errf(CodeDatetimeFieldOverflow, "timestamp cannot be NaN")
	case math.IsInf(f, 1):
		return row.TimestampTZ(tsInf), nil
	case math.IsInf(f, -1):
		return row.TimestampTZ(tsNegInf), nil
	}
	us := math.RoundToEven(f * usPerSec)
	if us < minTimestamp || us >= float64(tsInf) {
		return nil, errf(CodeDatetimeFieldOverflow, "timestamp out of range: \"%s\"", strconv.FormatFloat(f, 'g', -1, 64))
	}
	return row.TimestampTZ(int64(us)), nil
}

// now returns the query timestamp, in milliseconds.
func now(ctx *EvalContext) (uint64, error) {
	if ctx == nil || ctx.Now == 0 {
		return 0, ErrNoTimestamp
	}
	return ctx.Now, nil
}

func nowFunc(t Type) func(ctx *EvalContext, _ []row.Datum) (row.Datum, error) {
	return func(ctx *EvalContext, _ []row.Datum) (row.Datum, error) {
		ms, err := now(ctx)
		if err != nil {
			return nil, err
		}
		switch t {
		case TypeMzTimestamp:
			return ms, nil
		case TypeDate:
			return row.Date(ms / msPerDay), nil
		}
		if ms > uint64(tsInf-1)/1000 {
			return nil, errTimestampRange
		}
		return mkTs(t, int64(ms)*1000), nil
	}
}
