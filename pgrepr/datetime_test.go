package pgrepr

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shardtail/shardtail/row"
)

func TestCivilRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	days := []int64{0, -1, minDays, endDays - 1, math.MaxInt64 / usPerDay, math.MinInt64/usPerDay - 1, -719468, -719469}
	for i := 0; i < 100000; i++ {
		days = append(days, rng.Int64N(1<<33)-1<<32)
	}
	for _, d := range days {
		y, m, dd := civilFromDays(d)
		if m < 1 || m > 12 || dd < 1 || dd > daysIn(y, m) {
			t.Fatalf("civilFromDays(%d) = %d-%d-%d", d, y, m, dd)
		}
		if got := daysFromCivil(y, m, dd); got != d {
			t.Fatalf("daysFromCivil(civilFromDays(%d)) = %d", d, got)
		}
		if d > -1e6 && d < 3e6 {
			want := time.Unix(d*86400, 0).UTC()
			if int(y) != want.Year() || time.Month(m) != want.Month() || int(dd) != want.Day() {
				t.Fatalf("civilFromDays(%d) = %d-%d-%d, time says %s", d, y, m, dd, want)
			}
		}
	}
}

// TestAppendTimestampExtremes checks that datums outside Postgres' range
// (which the parsers never produce) still format without panicking.
func TestAppendTimestampExtremes(t *testing.T) {
	for _, us := range []int64{math.MinInt64 + 1, math.MaxInt64 - 1, minTimestamp - 1} {
		if b := AppendText(nil, row.TypeTimestampTZ, row.TimestampTZ(us)); len(b) < 20 {
			t.Errorf("%d: %q", us, b)
		}
		AppendBinary(nil, row.TypeTimestamp, row.Timestamp(us))
	}
	for _, d := range []int32{math.MinInt32 + 1, math.MaxInt32 - 1} {
		AppendText(nil, row.TypeDate, row.Date(d))
		AppendBinary(nil, row.TypeDate, row.Date(d))
	}
	if got := string(AppendText(nil, row.TypeTimestamp, row.Timestamp(math.MaxInt64-1))); got != "294247-01-10 04:00:54.775806" {
		t.Errorf("max timestamp: %q", got)
	}
}

func TestRelativeDateWords(t *testing.T) {
	defer func(f func() time.Time) { now = f }(now)
	now = func() time.Time { return time.Date(2024, 3, 1, 15, 4, 5, 123456789, time.UTC) }
	for _, c := range []struct {
		typ  row.Type
		in   string
		want string
	}{
		{row.TypeTimestampTZ, "now", "2024-03-01 15:04:05.123456+00"},
		{row.TypeTimestamp, " Today ", "2024-03-01 00:00:00"},
		{row.TypeTimestamp, "tomorrow", "2024-03-02 00:00:00"},
		{row.TypeTimestamp, "yesterday", "2024-02-29 00:00:00"},
		{row.TypeDate, "today", "2024-03-01"},
		{row.TypeDate, "tomorrow", "2024-03-02"},
		{row.TypeDate, "yesterday", "2024-02-29"},
		{row.TypeDate, "now", "2024-03-01"},
		{row.TypeDate, "epoch", "1970-01-01"},
	} {
		d, err := ParseText(c.typ, c.in)
		if err != nil {
			t.Errorf("%s %q: %v", c.typ, c.in, err)
			continue
		}
		if got := string(AppendText(nil, c.typ, d)); got != c.want {
			t.Errorf("%s %q = %q, want %q", c.typ, c.in, got, c.want)
		}
	}
}

func TestTimestampBinaryRange(t *testing.T) {
	for _, c := range []struct {
		pg int64
		ok bool
	}{
		{math.MaxInt64, true}, {math.MinInt64, true}, {0, true},
		{pgMinTimestamp, true}, {pgMinTimestamp - 1, false},
		{math.MaxInt64 - pgEpochUs - 1, true}, {math.MaxInt64 - pgEpochUs, false},
		{pgEndTimestamp, false},
	} {
		_, err := timestampFromPG(c.pg)
		if (err == nil) != c.ok {
			t.Errorf("timestampFromPG(%d): %v, want ok=%v", c.pg, err, c.ok)
		}
	}
}
