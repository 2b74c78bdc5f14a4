package expr

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Interval is a Postgres interval: months, days and microseconds, kept
// apart because their lengths vary (a month is 28 to 31 days, a day 23 to
// 25 hours across DST). Comparison and IntervalDuration count a month as 30
// days and a day as 24 hours, as Postgres does.
type Interval struct {
	Months int32
	Days   int32
	Micros int64
}

const (
	usPerSec  = 1_000_000
	usPerMin  = 60 * usPerSec
	usPerHour = 60 * usPerMin
	usPerDay  = 24 * usPerHour
	msPerDay  = 86_400_000
)

// IntervalDuration converts an interval to a time.Duration, counting a
// month as 30 days and a day as 24 hours. It fails (22008) when the span
// does not fit a Duration (about 292 years).
func IntervalDuration(iv Interval) (time.Duration, error) {
	days := int64(iv.Months)*30 + int64(iv.Days)
	if days > math.MaxInt64/int64(time.Hour*24) || days < math.MinInt64/int64(time.Hour*24) {
		return 0, errIntervalRange
	}
	d := days * int64(24*time.Hour)
	us := iv.Micros
	if us > math.MaxInt64/1000 || us < math.MinInt64/1000 {
		return 0, errIntervalRange
	}
	ns := us * 1000
	if (ns > 0 && d > math.MaxInt64-ns) || (ns < 0 && d < math.MinInt64-ns) {
		return 0, errIntervalRange
	}
	return time.Duration(d + ns), nil
}

// Compare orders intervals by their length with 30-day months and 24-hour
// days, as Postgres' interval_cmp: '1 day' equals '24 hours'.
func (iv Interval) Compare(o Interval) int {
	aq, ar := iv.norm()
	bq, br := o.norm()
	switch {
	case aq < bq:
		return -1
	case aq > bq:
		return 1
	case ar < br:
		return -1
	case ar > br:
		return 1
	}
	return 0
}

// norm returns the interval's length as whole days and microseconds in
// [0, usPerDay), which cannot overflow, unlike the total microseconds.
func (iv Interval) norm() (days, us int64) {
	days = int64(iv.Months)*30 + int64(iv.Days) + floorDiv(iv.Micros, usPerDay)
	return days, iv.Micros - floorDiv(iv.Micros, usPerDay)*usPerDay
}

// String formats the interval as Postgres' default IntervalStyle does:
// "1 year 2 mons 3 days 04:05:06.5", "-1 days +02:00:00", "00:00:00".
func (iv Interval) String() string {
	var b []byte
	before, zero := false, true
	add := func(v int64, unit string) {
		if v == 0 {
			return
		}
		if !zero {
			b = append(b, ' ')
		}
		if before && v > 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, v, 10)
		b = append(b, ' ')
		b = append(b, unit...)
		if v != 1 {
			b = append(b, 's')
		}
		before, zero = v < 0, false
	}
	add(int64(iv.Months/12), "year")
	add(int64(iv.Months%12), "mon")
	add(int64(iv.Days), "day")
	if iv.Micros != 0 || zero {
		if !zero {
			b = append(b, ' ')
		}
		t := uint64(iv.Micros)
		switch {
		case iv.Micros < 0:
			b = append(b, '-')
			t = -t
		case before:
			b = append(b, '+')
		}
		h, rem := t/usPerHour, t%usPerHour
		m, rem := rem/usPerMin, rem%usPerMin
		s, frac := rem/usPerSec, rem%usPerSec
		b = appendPadded(b, h, 2)
		b = append(b, ':')
		b = appendPadded(b, m, 2)
		b = append(b, ':')
		b = appendPadded(b, s, 2)
		b = appendFraction(b, frac)
	}
	return string(b)
}

func appendPadded(b []byte, v uint64, width int) []byte {
	s := strconv.FormatUint(v, 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// appendFraction appends ".ffffff" without trailing zeros, or nothing.
func appendFraction(b []byte, us uint64) []byte {
	if us == 0 {
		return b
	}
	f := []byte(strconv.FormatUint(us+usPerSec, 10)[1:])
	for f[len(f)-1] == '0' {
		f = f[:len(f)-1]
	}
	b = append(b, '.')
	return append(b, f...)
}

func errIntervalSyntax(s string) *Error {
	return errf(CodeInvalidDatetimeFormat, "invalid input syntax for type interval: \"%s\"", s)
}

func errIntervalField(s string) *Error {
	return errf("22015", "interval field value out of range: \"%s\"", s)
}

// intervalUnits maps every unit spelling Postgres accepts to its unit.
var intervalUnits = map[string]string{
	"microsecond": "us", "microseconds": "us", "us": "us", "usec": "us", "usecs": "us", "useconds": "us", "usecond": "us",
	"millisecond": "ms", "milliseconds": "ms", "ms": "ms", "msec": "ms", "msecs": "ms", "mseconds": "ms", "msecond": "ms",
	"second": "s", "seconds": "s", "s": "s", "sec": "s", "secs": "s",
	"minute": "m", "minutes": "m", "m": "m", "min": "m", "mins": "m",
	"hour": "h", "hours": "h", "h": "h", "hr": "h", "hrs": "h",
	"day": "d", "days": "d", "d": "d",
	"week": "w", "weeks": "w", "w": "w",
	"month": "mon", "months": "mon", "mon": "mon", "mons": "mon",
	"year": "y", "years": "y", "y": "y", "yr": "y", "yrs": "y",
	"decade": "dec", "decades": "dec", "dec": "dec", "decs": "dec",
	"century": "c", "centuries": "c", "c": "c", "cent": "c",
	"millennium": "mil", "millennia": "mil", "mil": "mil", "mils": "mil", "millenniums": "mil",
}

// intervalAcc accumulates the fields of an interval being parsed, with
// float spill-over of fractional units as Postgres does it ('1.5 days' is
// 1 day 12:00:00; '1.5 years' is 1 year 6 mons).
type intervalAcc struct {
	months, days, us float64
}

func (a *intervalAcc) add(v float64, unit string) {
	ip, fp := math.Modf(v)
	switch unit {
	case "us":
		a.us += v
	case "ms":
		a.us += v * 1000
	case "s":
		a.us += v * usPerSec
	case "m":
		a.us += v * usPerMin
	case "h":
		a.us += v * usPerHour
	case "d":
		a.days += ip
		a.us += math.Round(fp * usPerDay)
	case "w":
		a.addDays(v * 7)
	case "mon":
		a.months += ip
		a.addDays(fp * 30)
	case "y":
		a.months += ip*12 + math.Round(fp*12)
	case "dec":
		a.months += ip*120 + math.Round(fp*120)
	case "c":
		a.months += ip*1200 + math.Round(fp*1200)
	case "mil":
		a.months += ip*12000 + math.Round(fp*12000)
	}
}

func (a *intervalAcc) addDays(v float64) {
	ip, fp := math.Modf(v)
	a.days += ip
	a.us += math.Round(fp * usPerDay)
}

// ParseInterval parses an interval as Postgres' interval input does, plus
// the compact forms Materialize accepts: '1s', '1 second', '5 minutes',
// '1h30m', '1 day 02:00:00', '00:01:00', '-1 hour', '2 weeks ago', '10'
// (seconds), and ISO 8601 durations 'P1DT2H' and 'PT0.5S'.
func ParseInterval(s string) (Interval, error) {
	in := strings.ToLower(strings.TrimSpace(s))
	if in == "" {
		return Interval{}, errIntervalSyntax(s)
	}
	var acc intervalAcc
	var ok bool
	if in[0] == 'p' {
		ok = parseISOInterval(in[1:], &acc)
	} else {
		ok = parsePGInterval(in, &acc)
	}
	if !ok {
		return Interval{}, errIntervalSyntax(s)
	}
	us := math.Round(acc.us)
	// Whole days of microseconds stay microseconds, as in Postgres
	// ('36 hours' is 36:00:00, not 1 day 12:00:00).
	if math.Abs(acc.months) > math.MaxInt32 || math.Abs(acc.days) > math.MaxInt32 ||
		math.Abs(us) >= math.MaxInt64 || math.IsNaN(us) {
		return Interval{}, errIntervalField(s)
	}
	return Interval{Months: int32(acc.months), Days: int32(acc.days), Micros: int64(us)}, nil
}

func parsePGInterval(in string, acc *intervalAcc) bool {
	in = strings.TrimPrefix(in, "@")
	ago := false
	if f := strings.Fields(in); len(f) > 0 && f[len(f)-1] == "ago" {
		ago = true
		in = strings.Join(f[:len(f)-1], " ")
	}
	// Tokens: clocks (h:m[:s]) and numbers with an optional unit, written
	// apart ('1 hour') or together ('1h30m').
	type token struct {
		clock string
		v     float64
		unit  string
	}
	var toks []token
	i, n := 0, len(in)
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	skipSpace := func() {
		for i < n && isSpace(in[i]) {
			i++
		}
	}
	letters := func(j int) int {
		for j < n && in[j] >= 'a' && in[j] <= 'z' {
			j++
		}
		return j
	}
	for {
		skipSpace()
		if i == n {
			break
		}
		start := i
		if in[i] == '+' || in[i] == '-' {
			i++
		}
		digits := i
		for i < n && (in[i] >= '0' && in[i] <= '9' || in[i] == '.') {
			i++
		}
		if i == digits || (i == digits+1 && in[digits] == '.') {
			return false
		}
		if i < n && in[i] == ':' {
			for i < n && (in[i] >= '0' && in[i] <= '9' || in[i] == '.' || in[i] == ':') {
				i++
			}
			if i < n && !isSpace(in[i]) {
				return false
			}
			toks = append(toks, token{clock: in[start:i]})
			continue
		}
		v, err := strconv.ParseFloat(in[start:i], 64)
		if err != nil || math.IsInf(v, 0) {
			return false
		}
		t := token{v: v}
		j := i
		for j < n && isSpace(in[j]) {
			j++
		}
		if e := letters(j); e > j {
			var ok bool
			if t.unit, ok = intervalUnits[in[j:e]]; !ok {
				return false
			}
			i = e
		} else if i < n && !isSpace(in[i]) {
			return false // '2024-05-01' is a date, not a span
		}
		toks = append(toks, t)
	}
	for k, t := range toks {
		switch {
		case t.clock != "":
			if !parseClock(t.clock, acc) {
				return false
			}
			continue
		case t.unit != "":
		case k == len(toks)-1:
			t.unit = "s" // a bare number at the end is seconds
		default:
			// Before a time of day, a bare number is days ('1 01:00').
			next := toks[k+1]
			switch next.unit {
			case "h", "m", "s", "ms", "us":
			default:
				if next.clock == "" {
					return false
				}
			}
			t.unit = "d"
		}
		acc.add(t.v, t.unit)
	}
	if ago {
		acc.months, acc.days, acc.us = -acc.months, -acc.days, -acc.us
	}
	return len(toks) > 0
}

// parseClock parses [+-]h:m[:s[.f]], or m:s.f (two fields with a fraction).
func parseClock(t string, acc *intervalAcc) bool {
	neg := false
	switch t[0] {
	case '-':
		neg, t = true, t[1:]
	case '+':
		t = t[1:]
	}
	parts := strings.Split(t, ":")
	if len(parts) > 3 {
		return false
	}
	var f [3]float64
	for k, p := range parts {
		if p == "" || (k < len(parts)-1 && strings.Contains(p, ".")) {
			return false
		}
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || math.IsInf(v, 0) {
			return false
		}
		f[k] = v
	}
	var us float64
	switch {
	case len(parts) == 2 && strings.Contains(parts[1], "."):
		us = f[0]*usPerMin + f[1]*usPerSec
	default:
		if f[1] >= 60 || f[2] >= 60 {
			return false
		}
		us = f[0]*usPerHour + f[1]*usPerMin + f[2]*usPerSec
	}
	if neg {
		us = -us
	}
	acc.us += us
	return true
}

// parseISOInterval parses the part of an ISO 8601 duration after "P":
// [nY][nM][nW][nD][T[nH][nM][nS]], with signed, fractional numbers.
func parseISOInterval(in string, acc *intervalAcc) bool {
	timePart, seen := false, false
	for len(in) > 0 {
		if in[0] == 't' {
			if timePart {
				return false
			}
			timePart, in = true, in[1:]
			continue
		}
		j := 0
		if j < len(in) && (in[j] == '-' || in[j] == '+') {
			j++
		}
		for j < len(in) && (in[j] >= '0' && in[j] <= '9' || in[j] == '.') {
			j++
		}
		if j == len(in) {
			return false
		}
		v, err := strconv.ParseFloat(in[:j], 64)
		if err != nil || math.IsInf(v, 0) {
			return false
		}
		var unit string
		switch c := in[j]; {
		case c == 'y' && !timePart:
			unit = "y"
		case c == 'm' && !timePart:
			unit = "mon"
		case c == 'w' && !timePart:
			unit = "w"
		case c == 'd' && !timePart:
			unit = "d"
		case c == 'h' && timePart:
			unit = "h"
		case c == 'm' && timePart:
			unit = "m"
		case c == 's' && timePart:
			unit = "s"
		default:
			return false
		}
		acc.add(v, unit)
		seen = true
		in = in[j+1:]
	}
	return seen
}

// Interval arithmetic, with Postgres' overflow errors.

func addInterval(a, b Interval) (Interval, error) {
	m := int64(a.Months) + int64(b.Months)
	d := int64(a.Days) + int64(b.Days)
	us, ok := addInt64(a.Micros, b.Micros)
	if !ok || m != int64(int32(m)) || d != int64(int32(d)) {
		return Interval{}, errIntervalRange
	}
	return Interval{int32(m), int32(d), us}, nil
}

func negInterval(a Interval) (Interval, error) {
	if a.Months == math.MinInt32 || a.Days == math.MinInt32 || a.Micros == math.MinInt64 {
		return Interval{}, errIntervalRange
	}
	return Interval{-a.Months, -a.Days, -a.Micros}, nil
}

// mulInterval multiplies by a float as Postgres' interval_mul does: the
// fractional months spill into days and the fractional days into time.
func mulInterval(a Interval, f float64) (Interval, error) {
	return scaleInterval(a, func(x float64) float64 { return x * f }, f)
}

// divInterval divides as Postgres' interval_div.
func divInterval(a Interval, f float64) (Interval, error) {
	if f == 0 {
		return Interval{}, errDivisionByZero
	}
	return scaleInterval(a, func(x float64) float64 { return x / f }, f)
}

func scaleInterval(a Interval, op func(float64) float64, f float64) (Interval, error) {
	if math.IsNaN(f) {
		return Interval{}, errIntervalRange
	}
	tsround := func(x float64) float64 { return math.RoundToEven(x*usPerSec) / usPerSec }
	m := op(float64(a.Months))
	d := op(float64(a.Days))
	if math.IsNaN(m) || math.Abs(m) > math.MaxInt32 || math.IsNaN(d) || math.Abs(d) > math.MaxInt32 {
		return Interval{}, errIntervalRange
	}
	var r Interval
	r.Months = int32(m)
	r.Days = int32(d)
	monthRemDays := tsround((m - float64(r.Months)) * 30)
	secRem := tsround((d - float64(r.Days) + monthRemDays - math.Trunc(monthRemDays)) * 86400)
	if math.Abs(secRem) >= 86400 {
		r.Days += int32(secRem / 86400)
		secRem -= math.Trunc(secRem/86400) * 86400
	}
	r.Days += int32(monthRemDays)
	us := math.RoundToEven(op(float64(a.Micros)) + secRem*usPerSec)
	if math.IsNaN(us) || math.Abs(us) >= math.MaxInt64 {
		return Interval{}, errIntervalRange
	}
	r.Micros = int64(us)
	return r, nil
}

func addInt64(a, b int64) (int64, bool) {
	c := a + b
	if (c > a) != (b > 0) {
		return 0, false
	}
	return c, true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
