package pgrepr

import (
	"math"
	"strconv"
	"time"
)

// Calendar constants. Postgres counts timestamps in microseconds and dates in
// days from 2000-01-01; row counts both from 1970-01-01.
const (
	usPerSec    = 1000000
	usPerDay    = 86400 * usPerSec
	pgEpochDays = 10957                  // days from 1970-01-01 to 2000-01-01
	pgEpochUs   = pgEpochDays * usPerDay // microseconds from 1970 to 2000

	// Postgres' valid range: Julian day 0 (4714-11-24 BC) up to, but not
	// including, 294277-01-01 for timestamps and 5874898-01-01 for dates.
	minDays        = -2440588   // 4714-11-24 BC, in days since 1970
	endDays        = 2145042906 // 5874898-01-01, in days since 1970
	minTimestamp   = minDays * usPerDay
	pgMinTimestamp = -211813488000000000 // 4714-11-24 BC, in µs since 2000
	pgEndTimestamp = 9223371331200000000 // 294277-01-01, in µs since 2000
)

// Infinities. Postgres reserves the extreme int64 (timestamps) and int32
// (dates) for 'infinity' and '-infinity'; row.Timestamp, row.TimestampTZ and
// row.Date use the same extremes of their own ranges, so that the
// conversion to and from Postgres' epoch maps infinity to infinity.
const (
	// TimestampInfinity is the row.Timestamp or row.TimestampTZ value of
	// 'infinity'.
	TimestampInfinity = math.MaxInt64
	// TimestampNegInfinity is the row.Timestamp or row.TimestampTZ value of
	// '-infinity'.
	TimestampNegInfinity = math.MinInt64
	// DateInfinity is the row.Date value of 'infinity'.
	DateInfinity = math.MaxInt32
	// DateNegInfinity is the row.Date value of '-infinity'.
	DateNegInfinity = math.MinInt32
)

// daysFromCivil returns the days since 1970-01-01 of the proleptic
// Gregorian date y-m-d, where y is an astronomical year (0 is 1 BC).
// It is exact for every int64 result (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	mp := m - 3
	if m <= 2 {
		mp = m + 9
	}
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(z int64) (y, m, d int64) {
	z += 719468
	era := z
	if era < 0 {
		era -= 146096
	}
	era /= 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	if mp < 10 {
		m = mp + 3
	} else {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

func isLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y, m int64) int64 {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// appendYMD appends "YYYY-MM-DD" (at least four year digits) and reports
// whether the year is BC, for which Postgres prints the positive year and
// appends " BC" at the very end of the value.
func appendYMD(buf []byte, y, m, d int64) ([]byte, bool) {
	bc := y <= 0
	if bc {
		y = 1 - y
	}
	if y < 1000 {
		buf = append(buf, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10))
	} else {
		buf = strconv.AppendInt(buf, y, 10)
	}
	buf = append(buf, '-', byte('0'+m/10), byte('0'+m%10), '-', byte('0'+d/10), byte('0'+d%10))
	return buf, bc
}

// appendTimestamp appends us (microseconds since 1970) in ISO DateStyle:
// "2024-01-02 03:04:05.12", with "+00" for timestamptz in UTC and " BC" for
// years before 1 AD. The fraction is trimmed of trailing zeros, as Postgres
// does.
func appendTimestamp(buf []byte, us int64, tz bool) []byte {
	switch us {
	case TimestampInfinity:
		return append(buf, "infinity"...)
	case TimestampNegInfinity:
		return append(buf, "-infinity"...)
	}
	// Floor division without the overflow that days*usPerDay would risk
	// near math.MinInt64.
	days, rem := us/usPerDay, us%usPerDay
	if rem < 0 {
		days--
		rem += usPerDay
	}
	y, m, d := civilFromDays(days)
	buf, bc := appendYMD(buf, y, m, d)
	secs, frac := rem/usPerSec, rem%usPerSec
	h, mi, s := secs/3600, secs/60%60, secs%60
	buf = append(buf, ' ',
		byte('0'+h/10), byte('0'+h%10), ':',
		byte('0'+mi/10), byte('0'+mi%10), ':',
		byte('0'+s/10), byte('0'+s%10))
	if frac != 0 {
		var f [7]byte
		f[0] = '.'
		n := 7
		for i := 6; i >= 1; i-- {
			f[i] = byte('0' + frac%10)
			frac /= 10
		}
		for f[n-1] == '0' {
			n--
		}
		buf = append(buf, f[:n]...)
	}
	if tz {
		buf = append(buf, "+00"...)
	}
	if bc {
		buf = append(buf, " BC"...)
	}
	return buf
}

// appendDate appends days (since 1970) as "2024-01-02", " BC" suffixed
// before 1 AD.
func appendDate(buf []byte, days int32) []byte {
	switch days {
	case DateInfinity:
		return append(buf, "infinity"...)
	case DateNegInfinity:
		return append(buf, "-infinity"...)
	}
	y, m, d := civilFromDays(int64(days))
	buf, bc := appendYMD(buf, y, m, d)
	if bc {
		buf = append(buf, " BC"...)
	}
	return buf
}

// now is the clock behind 'now', 'today', 'tomorrow' and 'yesterday';
// tests replace it.
var now = time.Now

// dtSpecial is a reserved word in date/time input.
type dtSpecial uint8

const (
	dtNone dtSpecial = iota
	dtInfinity
	dtNegInfinity
	dtEpoch
	dtNow
	dtToday
	dtTomorrow
	dtYesterday
)

// dateTime is the decoded fields of a date/time literal.
type dateTime struct {
	special     dtSpecial
	year        int64 // astronomical after BC adjustment
	month, day  int64
	tod         int64 // time of day in µs, up to and including 24:00:00
	tzOffset    int64 // seconds east of UTC
	hasTZ       bool
	hasTime     bool
	bc          bool
	compactDate bool
}

// isPGSpace reports whether c is whitespace to C's isspace, which is what
// Postgres' input functions skip.
func isPGSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func trimPGSpace(s string) string {
	i, j := 0, len(s)
	for i < j && isPGSpace(s[i]) {
		i++
	}
	for j > i && isPGSpace(s[j-1]) {
		j--
	}
	return s[i:j]
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// equalFold reports whether s equals the lower-case ASCII word w, ignoring
// ASCII case.
func equalFold(s, w string) bool {
	if len(s) != len(w) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[i] {
			return false
		}
	}
	return true
}

var dtSpecialWords = [...]struct {
	word string
	val  dtSpecial
}{
	{"infinity", dtInfinity}, {"+infinity", dtInfinity}, {"-infinity", dtNegInfinity},
	{"epoch", dtEpoch}, {"now", dtNow}, {"today", dtToday},
	{"tomorrow", dtTomorrow}, {"yesterday", dtYesterday},
}

// maxFieldDigits bounds numeric date/time fields, so that no field overflows
// int64 before the range checks see it.
const maxFieldDigits = 9

// scanDigits returns the value of the run of digits at s[i:] and the index
// after it. ok is false if the run is empty; over is true if it is longer
// than maxFieldDigits.
func scanDigits(s string, i int) (v int64, j int, ok, over bool) {
	j = i
	for j < len(s) && isDigit(s[j]) {
		if j-i < maxFieldDigits {
			v = v*10 + int64(s[j]-'0')
		}
		j++
	}
	return v, j, j > i, j-i > maxFieldDigits
}

// parseDateTime decodes the ISO-style date/time literals Postgres accepts
// for timestamp, timestamptz and date: "2024-01-02", "2024/01/02",
// "20240102", optionally followed by "T" or spaces and "HH:MM[:SS[.f]]",
// then any of a zone ("Z", "UTC", "GMT", "zulu", "+05", "-0530",
// "+05:30[:15]") and an era ("AD", "BC"); or one of the special words. typ
// names the type in syntax errors. Postgres' other input styles (month
// names, MDY order, named zones) are not accepted.
func parseDateTime(orig, typ string) (dateTime, *Error) {
	var dt dateTime
	s := trimPGSpace(orig)
	for _, w := range dtSpecialWords {
		if equalFold(s, w.word) {
			dt.special = w.val
			return dt, nil
		}
	}
	bad := func() (dateTime, *Error) { return dateTime{}, errDatetimeSyntax(typ, orig) }
	overflow := func() (dateTime, *Error) { return dateTime{}, errDatetimeField(orig) }
	mdOverflow := func() (dateTime, *Error) {
		return dateTime{}, errDatetimeField(orig).withHint(`Perhaps you need a different "datestyle" setting.`)
	}

	// Date: Y-M-D or Y/M/D with a year of three or more digits, or YYYYMMDD.
	y, i, ok, over := scanDigits(s, 0)
	if !ok {
		return bad()
	}
	if i < len(s) && (s[i] == '-' || s[i] == '/') {
		if i < 3 {
			return bad() // a two-digit leading field needs DateStyle rules
		}
		sep := s[i]
		var m, d int64
		var ok2, ok3, ov2, ov3 bool
		m, i, ok2, ov2 = scanDigits(s, i+1)
		if !ok2 || i >= len(s) || s[i] != sep {
			return bad()
		}
		d, i, ok3, ov3 = scanDigits(s, i+1)
		if !ok3 {
			return bad()
		}
		if over || ov2 || ov3 {
			return overflow()
		}
		dt.year, dt.month, dt.day = y, m, d
	} else if i == 8 {
		dt.year, dt.month, dt.day = y/10000, y/100%100, y%100
		dt.compactDate = true
	} else {
		return bad()
	}

	// Time: after "T" or whitespace.
	if i < len(s) && (s[i] == 'T' || s[i] == 't') && i+1 < len(s) && isDigit(s[i+1]) {
		i++
	} else {
		for i < len(s) && isPGSpace(s[i]) {
			i++
		}
	}
	if i < len(s) && isDigit(s[i]) {
		h, j, _, ov1 := scanDigits(s, i)
		if j >= len(s) || s[j] != ':' {
			return bad()
		}
		mi, j2, ok2, ov2 := scanDigits(s, j+1)
		if !ok2 {
			return bad()
		}
		i = j2
		var sec, fsec int64
		var ov3 bool
		if i < len(s) && s[i] == ':' {
			var ok3 bool
			sec, i, ok3, ov3 = scanDigits(s, i+1)
			if !ok3 {
				return bad()
			}
			if i < len(s) && s[i] == '.' {
				j := i + 1
				for j < len(s) && isDigit(s[j]) {
					j++
				}
				fsec = parseFraction(s[i:j])
				i = j
			}
		}
		if ov1 || ov2 || ov3 || mi > 59 || sec > 60 {
			return overflow()
		}
		dt.tod = ((h*60+mi)*60+sec)*usPerSec + fsec
		if dt.tod > usPerDay {
			return overflow()
		}
		dt.hasTime = true
	}

	// Zone and era, in either order, with or without spaces before them.
	for {
		for i < len(s) && isPGSpace(s[i]) {
			i++
		}
		if i >= len(s) {
			break
		}
		switch c := s[i]; {
		case c == '+' || c == '-':
			if dt.hasTZ {
				return bad()
			}
			j := i + 1
			for j < len(s) && (isDigit(s[j]) || s[j] == ':') {
				j++
			}
			off, ok, over := parseTZOffset(s[i:j])
			if !ok {
				return bad()
			}
			if over {
				return dateTime{}, errTZDisplacement(orig)
			}
			dt.tzOffset, dt.hasTZ = off, true
			i = j
		case isAlpha(c):
			j := i + 1
			for j < len(s) && isAlpha(s[j]) {
				j++
			}
			w := s[i:j]
			switch {
			case equalFold(w, "bc"):
				dt.bc = true
			case equalFold(w, "ad"):
			case equalFold(w, "z"), equalFold(w, "zulu"), equalFold(w, "utc"),
				equalFold(w, "gmt"), equalFold(w, "ut"):
				if dt.hasTZ {
					return bad()
				}
				dt.hasTZ = true
			default:
				return bad()
			}
			i = j
		default:
			return bad()
		}
	}

	// Validate the date the way Postgres' ValidateDate does.
	if dt.month < 1 || dt.month > 12 || dt.day < 1 || dt.day > 31 {
		if dt.compactDate {
			return overflow()
		}
		return mdOverflow()
	}
	if dt.year <= 0 {
		return overflow() // there is no year 0 in AD/BC notation
	}
	if dt.bc {
		dt.year = 1 - dt.year
	}
	if dt.day > daysIn(dt.year, dt.month) {
		return overflow()
	}
	return dt, nil
}

// parseFraction converts ".ddd" to microseconds exactly as Postgres does:
// rint(strtod(".ddd") * 1e6), which rounds half to even on the binary double
// and so differs from decimal rounding in the seventh digit.
func parseFraction(f string) int64 {
	digits := f[1:]
	if len(digits) <= 6 {
		var v int64
		for i := 0; i < 6; i++ {
			v *= 10
			if i < len(digits) {
				v += int64(digits[i] - '0')
			}
		}
		return v
	}
	x, err := strconv.ParseFloat("0"+f, 64)
	if err != nil {
		return 0
	}
	return int64(math.RoundToEven(x * usPerSec))
}

// parseTZOffset decodes "+HH", "+H", "+HHMM", "+HMM", "+HH:MM" and
// "+HH:MM:SS" into seconds east of UTC, with Postgres' limits (under 16
// hours, minutes and seconds under 60).
func parseTZOffset(z string) (off int64, ok, over bool) {
	sign := int64(1)
	if z[0] == '-' {
		sign = -1
	}
	h, i, okh, ovh := scanDigits(z, 1)
	if !okh {
		return 0, false, false
	}
	var m, sec int64
	var ovm, ovs bool
	switch {
	case i < len(z) && z[i] == ':':
		var okm bool
		m, i, okm, ovm = scanDigits(z, i+1)
		if !okm {
			return 0, false, false
		}
		if i < len(z) && z[i] == ':' {
			var oks bool
			sec, i, oks, ovs = scanDigits(z, i+1)
			if !oks {
				return 0, false, false
			}
		}
	case len(z) > 3:
		m, h = h%100, h/100
	}
	if i != len(z) {
		return 0, false, false
	}
	if ovh || ovm || ovs || h > 15 || m > 59 || sec > 59 {
		return 0, true, true
	}
	return sign * (h*3600 + m*60 + sec), true, false
}

// timestampFromText parses a timestamp (tz false: any zone is ignored, as
// Postgres does) or timestamptz (tz true: converted to UTC) literal into
// microseconds since 1970.
func timestampFromText(s string, tz bool) (int64, error) {
	typ := "timestamp"
	if tz {
		typ = "timestamp with time zone"
	}
	dt, err := parseDateTime(s, typ)
	if err != nil {
		return 0, err
	}
	switch dt.special {
	case dtInfinity:
		return TimestampInfinity, nil
	case dtNegInfinity:
		return TimestampNegInfinity, nil
	case dtEpoch:
		return 0, nil
	case dtNow:
		return now().UnixMicro(), nil
	case dtToday:
		return floorDiv(now().UnixMicro(), usPerDay) * usPerDay, nil
	case dtTomorrow:
		return (floorDiv(now().UnixMicro(), usPerDay) + 1) * usPerDay, nil
	case dtYesterday:
		return (floorDiv(now().UnixMicro(), usPerDay) - 1) * usPerDay, nil
	}
	// Postgres checks the fields against the Julian calendar's start first,
	// then the computed value against the valid range.
	if dt.year < -4713 || (dt.year == -4713 && dt.month < 11) || dt.year > 294277 {
		return 0, errDatetimeRange("timestamp", s)
	}
	// The year check bounds days far inside int64; the additions can still
	// overflow in row's last year, which is out of range.
	us := daysFromCivil(dt.year, dt.month, dt.day)
	if us > math.MaxInt64/usPerDay {
		return 0, errDatetimeRange("timestamp", s)
	}
	us *= usPerDay
	if us > math.MaxInt64-dt.tod {
		return 0, errDatetimeRange("timestamp", s)
	}
	us += dt.tod
	if off := dt.tzOffset * usPerSec; tz && off != 0 {
		if off < 0 && us > math.MaxInt64+off {
			return 0, errDatetimeRange("timestamp", s)
		}
		us -= off
	}
	if !validTimestamp(us) {
		return 0, errDatetimeRange("timestamp", s)
	}
	return us, nil
}

// validTimestamp reports whether us (since 1970) is a finite timestamp that
// both Postgres and row can hold: from 4714-11-24 BC up to the last
// microsecond before row's infinity (Postgres' own limit, 294277-01-01, is
// beyond int64 microseconds since 1970).
func validTimestamp(us int64) bool {
	return us >= minTimestamp && us < TimestampInfinity
}

// dateFromText parses a date literal; any time of day and zone are ignored,
// as Postgres does.
func dateFromText(s string) (int32, error) {
	dt, err := parseDateTime(s, "date")
	if err != nil {
		return 0, err
	}
	switch dt.special {
	case dtInfinity:
		return DateInfinity, nil
	case dtNegInfinity:
		return DateNegInfinity, nil
	case dtEpoch:
		return 0, nil
	case dtNow, dtToday:
		return int32(floorDiv(now().UnixMicro(), usPerDay)), nil
	case dtTomorrow:
		return int32(floorDiv(now().UnixMicro(), usPerDay) + 1), nil
	case dtYesterday:
		return int32(floorDiv(now().UnixMicro(), usPerDay) - 1), nil
	}
	if dt.year < -4713 || (dt.year == -4713 && dt.month < 11) || dt.year >= 5874898 {
		return 0, errDatetimeRange("date", s)
	}
	days := daysFromCivil(dt.year, dt.month, dt.day)
	if days < minDays || days >= endDays {
		return 0, errDatetimeRange("date", s)
	}
	return int32(days), nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// timestampToPG converts microseconds since 1970 to Postgres' binary value,
// microseconds since 2000, keeping the infinities.
func timestampToPG(us int64) int64 {
	switch us {
	case TimestampInfinity, TimestampNegInfinity:
		return us
	}
	if us < math.MinInt64+pgEpochUs {
		return math.MinInt64 + 1 // unreachable for valid datums; avoid wrapping
	}
	return us - pgEpochUs
}

// timestampFromPG is the inverse of timestampToPG, with Postgres' range
// check (timestamp_recv) and row's narrower upper bound.
func timestampFromPG(v int64) (int64, error) {
	switch v {
	case math.MaxInt64:
		return TimestampInfinity, nil
	case math.MinInt64:
		return TimestampNegInfinity, nil
	}
	if v < pgMinTimestamp || v >= pgEndTimestamp || v >= math.MaxInt64-pgEpochUs {
		return 0, newError(ErrOutOfRange, "22008", "timestamp out of range")
	}
	return v + pgEpochUs, nil
}

// dateToPG converts days since 1970 to Postgres' days since 2000.
func dateToPG(d int32) int32 {
	switch d {
	case DateInfinity, DateNegInfinity:
		return d
	}
	if d < math.MinInt32+pgEpochDays {
		return math.MinInt32 + 1
	}
	return d - pgEpochDays
}

// dateFromPG is the inverse of dateToPG, with date_recv's range check.
func dateFromPG(v int32) (int32, error) {
	switch v {
	case math.MaxInt32:
		return DateInfinity, nil
	case math.MinInt32:
		return DateNegInfinity, nil
	}
	d := int64(v) + pgEpochDays
	if d < minDays || d >= endDays {
		return 0, newError(ErrOutOfRange, "22008", "date out of range")
	}
	return int32(d), nil
}
