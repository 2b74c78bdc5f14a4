package expr

import (
	"strings"
	"testing"
	"time"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

func TestEvalConst(t *testing.T) {
	ctx := &EvalContext{Now: testNow, Params: []row.Datum{"1700000000000"}}
	for _, tc := range []struct {
		src  string
		want Type
		out  row.Datum // nil: expect an error with code
		code string
	}{
		{"1700000000000", TypeMzTimestamp, uint64(1700000000000), ""},
		{"'1700000000000'", TypeMzTimestamp, uint64(1700000000000), ""},
		{"now() - interval '1 minute'", TypeMzTimestamp, uint64(testNow - 60000), ""},
		{"mz_now()", TypeMzTimestamp, uint64(testNow), ""},
		{"timestamptz '2024-01-01 00:00:01+00'", TypeMzTimestamp, uint64(1704067201000), ""},
		{"'2024-01-01 00:00:01+00'", TypeMzTimestamp, uint64(1704067201000), ""},
		{"1700000000000.4", TypeMzTimestamp, uint64(1700000000000), ""},
		{"$1", TypeMzTimestamp, uint64(1700000000000), ""},
		{"-1", TypeMzTimestamp, nil, CodeDatetimeFieldOverflow},
		{"'soon'", TypeMzTimestamp, nil, CodeInvalidTextRepresentation},
		{"a", TypeMzTimestamp, nil, CodeUndefinedColumn},
		{"'1s'", TypeInterval, Interval{Micros: usPerSec}, ""},
		{"'1h'", TypeInterval, Interval{Micros: usPerHour}, ""},
		{"interval '5 minutes'", TypeInterval, Interval{Micros: 5 * usPerMin}, ""},
		{"'abc'", TypeInterval, nil, CodeInvalidDatetimeFormat},
		{"10", TypeInt8, int64(10), ""},
		{"'10'", TypeInt8, int64(10), ""},
		{"10.6", TypeInt8, int64(11), ""},
		{"2 * 5", TypeInt8, int64(10), ""},
		{"'x'", TypeInt8, nil, CodeInvalidTextRepresentation},
		{"true", TypeInt8, nil, CodeDatatypeMismatch},
		{"1 + 1", TypeInvalid, int32(2), ""},
		{"'x'", TypeInvalid, "x", ""},
	} {
		st, err := sql.Parse("SELECT " + tc.src)
		if err != nil {
			t.Fatalf("parse %q: %v", tc.src, err)
		}
		got, err := EvalConst(st.(*sql.Select).Items[0].Expr, tc.want, ctx)
		if tc.code != "" {
			if sqlState(err) != tc.code {
				t.Errorf("%s as %s: %v, %v; want error %s", tc.src, tc.want, got, err, tc.code)
			}
			continue
		}
		if err != nil || got != tc.out {
			t.Errorf("%s as %s: %#v, %v; want %#v", tc.src, tc.want, got, err, tc.out)
		}
	}
	// now() without a timestamp.
	st, _ := sql.Parse("SELECT now()")
	if _, err := EvalConst(st.(*sql.Select).Items[0].Expr, TypeMzTimestamp, nil); err != ErrNoTimestamp {
		t.Errorf("now() without a context: %v", err)
	}
}

func TestParseInterval(t *testing.T) {
	for _, tc := range []struct {
		in, out string
		dur     time.Duration
	}{
		{"1s", "00:00:01", time.Second},
		{"1 second", "00:00:01", time.Second},
		{"5 minutes", "00:05:00", 5 * time.Minute},
		{"1h30m", "01:30:00", 90 * time.Minute},
		{"00:01:00", "00:01:00", time.Minute},
		{"1:30", "01:30:00", 90 * time.Minute},
		{"1 day", "1 day", 24 * time.Hour},
		{"2 days 03:00:00", "2 days 03:00:00", 51 * time.Hour},
		{"36 hours", "36:00:00", 36 * time.Hour},
		{"1.5 days", "1 day 12:00:00", 36 * time.Hour},
		{"1 week", "7 days", 7 * 24 * time.Hour},
		{"1 month", "1 mon", 30 * 24 * time.Hour},
		{"1.5 years", "1 year 6 mons", 540 * 24 * time.Hour},
		{"-1 hour", "-01:00:00", -time.Hour},
		{"2 hours ago", "-02:00:00", -2 * time.Hour},
		{"-1 days +02:00:00", "-1 days +02:00:00", -22 * time.Hour},
		{"100ms", "00:00:00.1", 100 * time.Millisecond},
		{"250 us", "00:00:00.00025", 250 * time.Microsecond},
		{"10", "00:00:10", 10 * time.Second},
		{"1 01:00", "1 day 01:00:00", 25 * time.Hour},
		{"P1D", "1 day", 24 * time.Hour},
		{"PT1H30M", "01:30:00", 90 * time.Minute},
		{"P1Y2M3DT4H5M6.5S", "1 year 2 mons 3 days 04:05:06.5", (423*24+4)*time.Hour + 5*time.Minute + 6500*time.Millisecond},
		{"@ 1 minute", "00:01:00", time.Minute},
		{"0", "00:00:00", 0},
	} {
		iv, err := ParseInterval(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got := iv.String(); got != tc.out {
			t.Errorf("%q: String() = %q, want %q", tc.in, got, tc.out)
		}
		if d, err := IntervalDuration(iv); err != nil || d != tc.dur {
			t.Errorf("%q: IntervalDuration = %v, %v; want %v", tc.in, d, err, tc.dur)
		}
		// The output parses back to the same interval.
		back, err := ParseInterval(iv.String())
		if err != nil || back != iv {
			t.Errorf("%q: %q parses back as %v, %v", tc.in, iv.String(), back, err)
		}
	}
	for _, in := range []string{"", "abc", "1 fortnight", "2024-05-01", "1 2", "1:2:3:4", "P", "PT1D", "--1 hour", "1e400 seconds"} {
		if _, err := ParseInterval(in); sqlState(err) != CodeInvalidDatetimeFormat {
			t.Errorf("%q: %v, want 22007", in, err)
		}
	}
	if _, err := ParseInterval("3000000000 days"); sqlState(err) != "22015" {
		t.Errorf("3000000000 days: %v, want 22015", err)
	}
	if _, err := IntervalDuration(Interval{Days: 200000}); sqlState(err) != CodeDatetimeFieldOverflow {
		t.Errorf("IntervalDuration(200000 days): %v", err)
	}
}

func TestIntervalCompare(t *testing.T) {
	mk := func(s string) Interval {
		iv, err := ParseInterval(s)
		if err != nil {
			t.Fatal(err)
		}
		return iv
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1 day", "24 hours", 0},
		{"1 month", "30 days", 0},
		{"1 month", "29 days", 1},
		{"-1 hour", "1 hour", -1},
		{"1 day -1 hour", "23 hours", 0},
	} {
		if got := mk(tc.a).Compare(mk(tc.b)); got != tc.want {
			t.Errorf("%s vs %s: %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestCompileAssign(t *testing.T) {
	for _, tc := range []struct {
		src  string
		to   Type
		want string
	}{
		{"'5'", TypeInt4, "5"},
		{"1.6", TypeInt4, "2"},
		{"i8", TypeInt2, "ERROR 22003: smallint out of range"},
		{"a", TypeText, "5"},
		{"true", TypeText, "true"},
		{"ts", TypeDate, "2024-03-15"},
		{"NULL", TypeJSONB, "NULL"},
		{"'{\"a\":1}'", TypeJSONB, `{"a": 1}`},
		{"'x'", TypeInt4, "ERROR 22P02"},
		{"true", TypeInt4, `ERROR 42804: column "col" is of type integer but expression is of type boolean`},
		{"b", TypeInt4, "ERROR 42804"},
		{"$1", TypeInt8, "7"},
	} {
		x, err := CompileAssign(parseExpr(t, tc.src), NewScope(testSchema, "t"), "col", tc.to)
		var got string
		if err == nil {
			var v row.Datum
			v, err = x.Eval(&EvalContext{Params: []row.Datum{"7"}}, testRow)
			switch {
			case err != nil:
			case v == nil:
				got = "NULL"
			case x.Type() != tc.to:
				got = "type " + x.Type().String()
			default:
				got = formatText(x.Type(), v)
			}
		}
		if err != nil {
			got = errText(err)
		}
		if got != tc.want && !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s as %s: %s, want %s", tc.src, tc.to, got, tc.want)
		}
	}
}
