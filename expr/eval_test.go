package expr

import (
	"strings"
	"testing"

	"github.com/shardtail/shardtail/row"
)

// evalCases are expressions over t (see testRow) and their text output,
// "NULL", or "ERROR <sqlstate>" (optionally followed by ": message").
var evalCases = []struct{ expr, want string }{
	// Literals and their types.
	{"pg_typeof(1)", "integer"},
	{"pg_typeof(2147483648)", "bigint"},
	{"pg_typeof(-2147483648)", "integer"},
	{"pg_typeof(9223372036854775808)", "numeric"},
	{"pg_typeof(1.5)", "numeric"},
	{"pg_typeof('x')", "unknown"},
	{"pg_typeof(NULL)", "unknown"},
	{"'x'", "x"},
	{"NULL", "NULL"},
	{"1e3", "1000"},
	{"-(-2147483648)", "2147483648"},

	// Integer arithmetic.
	{"a + 1", "6"},
	{"a - 10", "-5"},
	{"a * a", "25"},
	{"a / 2", "2"},
	{"-7 / 2", "-3"},
	{"-7 % 3", "-1"},
	{"a + n", "NULL"},
	{"2147483647 + 1", "ERROR 22003: integer out of range"},
	{"(-2147483648) / -1", "ERROR 22003: integer out of range"},
	{"(-2147483648) % -1", "0"},
	{"9223372036854775807 + 1", "ERROR 22003: bigint out of range"},
	{"i8 * i8", "ERROR 22003: bigint out of range"},
	{"32767::int2 + 1::int2", "ERROR 22003: smallint out of range"},
	{"s + 1", "8"},
	{"pg_typeof(s + 1)", "integer"},
	{"pg_typeof(s + s)", "smallint"},
	{"pg_typeof(a + i8)", "bigint"},
	{"a / 0", "ERROR 22012: division by zero"},
	{"a % 0", "ERROR 22012: division by zero"},
	{"-a", "-5"},
	{"-(-2147483648)::int4", "ERROR 22003: integer out of range"},
	{"5 & 3", "1"},
	{"5 | 3", "7"},
	{"5 # 3", "6"},
	{"1 << 4", "16"},
	{"-16 >> 2", "-4"},

	// Numeric arithmetic.
	{"c + 1", "2.5"},
	{"c * c", "2.25"},
	{"1 / 3.0", "0.33333333333333333333"},
	{"10 / 3.0", "3.3333333333333333"},
	{"10000 / 3.0", "3333.3333333333333333"},
	{"2 / 3.0", "0.66666666666666666667"},
	{"0.1 + 0.2", "0.3"},
	{"10.5 % 3", "1.5"},
	{"-10.5 % 3", "-1.5"},
	{"c / 0", "ERROR 22012"},
	{"pg_typeof(a + c)", "numeric"},
	{"pg_typeof(c + f)", "double precision"},
	{"pg_typeof(1::real + 1)", "double precision"},
	{"pg_typeof(1::real + 1::real)", "real"},
	{"'NaN'::numeric + 1", "NaN"},
	{"2 ^ 10", "1024"},
	{"pg_typeof(2 ^ 10)", "double precision"},
	{"2.0 ^ 0.5", "1.414213562373095"},
	{"1.5 ^ 2", "2.25"},
	{"0 ^ -1", "ERROR 2201F"},
	{"1e100000 * 1e100000", "ERROR 22003: value overflows numeric format"},

	// Floats.
	{"f * 2", "5"},
	{"f / 0", "ERROR 22012: division by zero"},
	{"1e308::float8 * 10", "ERROR 22003: value out of range: overflow"},
	{"1e-308::float8 * 1e-308", "ERROR 22003: value out of range: underflow"},
	{"'NaN'::float8 + 1", "NaN"},
	{"'Infinity'::float8 + 1", "Infinity"},
	{"f % 2", "ERROR 42883: operator does not exist: double precision % integer"},

	// Comparisons, with promotion.
	{"a = 5", "t"},
	{"a = 5.0", "t"},
	{"a < 5.5", "t"},
	{"a > 4.9::float8", "t"},
	{"i8 > a", "t"},
	{"c = 1.50", "t"},
	{"b = 'hello'", "t"},
	{"b < 'hellp'", "t"},
	{"'B' < 'a'", "t"},
	{"a = '5'", "t"},
	{"a = 'x'", `ERROR 22P02: invalid input syntax for type integer: "x"`},
	{"a = b", "ERROR 42883: operator does not exist: integer = text"},
	{"d < ts", "t"},
	{"d = '2024-02-29'", "t"},
	{"NULL = NULL", "NULL"},
	{"n = 1", "NULL"},
	{"'NaN'::float8 = 'NaN'::float8", "t"},
	{"'NaN'::float8 > 'Infinity'::float8", "t"},
	{"interval '1 day' = interval '24 hours'", "t"},
	{"j = '{\"n\": 2, \"k\": [1, \"x\", null]}'", "t"},
	{"'1'::jsonb < '\"a\"'::jsonb", "f"},
	{"a IS DISTINCT FROM 5", "f"},
	{"a IS DISTINCT FROM n", "t"},
	{"n IS NOT DISTINCT FROM NULL", "t"},
	{"mz_now() > 1700000000000", "t"},
	{"mz_now() > ts", "f"},

	// Three-valued logic.
	{"true AND NULL", "NULL"},
	{"false AND NULL", "f"},
	{"true OR NULL", "t"},
	{"false OR NULL", "NULL"},
	{"NOT NULL::bool", "NULL"},
	{"NOT bo", "f"},
	{"n > 1 AND a > 1", "NULL"},
	{"n > 1 OR a > 1", "t"},
	{"'t' AND true", "t"},
	{"a AND true", "ERROR 42804: argument of AND must be type boolean, not type integer"},
	{"NOT a", "ERROR 42804: argument of NOT must be type boolean, not type integer"},
	{"bo IS TRUE", "t"},
	{"bo IS NOT FALSE", "t"},
	{"n > 1 IS UNKNOWN", "t"},
	{"n IS NULL", "t"},
	{"a IS NOT NULL", "t"},
	{"a IS TRUE", "ERROR 42804: argument of IS TRUE must be type boolean, not type integer"},

	// IN, BETWEEN, CASE, COALESCE, NULLIF, GREATEST, LEAST.
	{"a IN (1, 2, 5)", "t"},
	{"a IN (1, 2)", "f"},
	{"a IN (1, NULL)", "NULL"},
	{"a IN (5, NULL)", "t"},
	{"a NOT IN (1, NULL)", "NULL"},
	{"a NOT IN (1, 2)", "t"},
	{"n IN (1, 2)", "NULL"},
	{"a IN (5.0, 1)", "t"},
	{"a IN ('5', '6')", "t"},
	{"a IN (b)", "ERROR 42883: operator does not exist: integer = text"},
	{"a BETWEEN 1 AND 10", "t"},
	{"a NOT BETWEEN 1 AND 10", "f"},
	{"a BETWEEN 10 AND 1", "f"},
	{"a BETWEEN n AND 10", "NULL"},
	{"CASE WHEN a > 3 THEN 'big' ELSE 'small' END", "big"},
	{"CASE WHEN a > 10 THEN 1 END", "NULL"},
	{"CASE a WHEN 5 THEN 'five' WHEN 6 THEN 'six' END", "five"},
	{"pg_typeof(CASE WHEN a > 3 THEN 1 ELSE 2.5 END)", "numeric"},
	{"CASE WHEN a > 3 THEN 1 ELSE b END", "ERROR 42804: CASE types integer and text cannot be matched"},
	{"CASE WHEN a THEN 1 END", "ERROR 42804: argument of CASE/WHEN must be type boolean, not type integer"},
	{"CASE WHEN a < 0 THEN 1 / 0 ELSE 2 END", "2"},
	{"coalesce(n, a)", "5"},
	{"coalesce(n, NULL)", "NULL"},
	{"coalesce(NULL, 'x')", "x"},
	{"coalesce(a, b)", "ERROR 42804: COALESCE types integer and text cannot be matched"},
	{"coalesce(1, 1 / 0)", "1"},
	{"nullif(a, 5)", "NULL"},
	{"nullif(a, 6)", "5"},
	{"pg_typeof(nullif(a, 5.5))", "numeric"},
	{"pg_typeof(nullif(s, 5))", "smallint"},
	{"greatest(1, 2.5, a)", "5"},
	{"least(1, 2.5, a)", "1"},
	{"greatest(n, NULL)", "NULL"},
	{"least(a, n, 3)", "3"},
	{"greatest(a, b)", "ERROR 42804: GREATEST types integer and text cannot be matched"},

	// Strings and LIKE.
	{"b || 'x'", "hellox"},
	{"b || 1", "hello1"},
	{"1 || b", "1hello"},
	{"'x' || true", "xtrue"},
	{"'x' || NULL", "NULL"},
	{"1 || 2", "ERROR 42883: operator does not exist: integer || integer"},
	{"'\\x01'::bytea || '\\x02'::bytea", `\x0102`},
	{"b LIKE 'h%'", "t"},
	{"b LIKE '%o'", "t"},
	{"b LIKE '%ll%'", "t"},
	{"b LIKE 'h_llo'", "t"},
	{"b LIKE 'H%'", "f"},
	{"b ILIKE 'H%'", "t"},
	{"b NOT LIKE 'h%'", "f"},
	{"b NOT ILIKE '%L%'", "f"},
	{"'a%b' LIKE 'a\\%b'", "t"},
	{"'axb' LIKE 'a\\%b'", "f"},
	{"'a_b' LIKE 'a\\_b'", "t"},
	{"'abc' LIKE 'abc\\'", "f"},
	{"'abcd' LIKE 'abc\\'", "ERROR 22025: LIKE pattern must not end with escape character"},
	{"'aaa' LIKE '%a%a%a%'", "t"},
	{"'ab' LIKE '%a%a%'", "f"},
	{"'ümlaut' LIKE '_mlaut'", "t"},
	{"'ÜX' ILIKE 'üx'", "t"},
	{"n::text LIKE 'x'", "NULL"},
	{"a LIKE '5'", "ERROR 42883: operator does not exist: integer ~~ unknown"},
	{"b ~ 'l+'", "t"},
	{"b ~* 'L+'", "t"},
	{"b !~ '^h'", "f"},
	{"b ~ '('", "ERROR 2201B"},
	{"lower('ABC')", "abc"},
	{"upper(b)", "HELLO"},
	{"length(b)", "5"},
	{"length('ümlaut')", "6"},
	{"octet_length('ümlaut')", "7"},
	{"char_length(b)", "5"},
	{"substr(b, 2)", "ello"},
	{"substr(b, 2, 2)", "el"},
	{"substr(b, 0, 2)", "h"},
	{"substr(b, -1, 3)", "h"},
	{"substring(b, 3)", "llo"},
	{"substr(b, 2, -1)", "ERROR 22011: negative substring length not allowed"},
	{"btrim('  x  ')", "x"},
	{"trim('xxaxx', 'x')", "a"},
	{"ltrim('  x  ')", "x  "},
	{"rtrim('  x  ')", "  x"},
	{"replace(b, 'l', 'L')", "heLLo"},
	{"concat(b, 1, NULL, true)", "hello1t"},
	{"concat_ws('-', b, 1, NULL)", "hello-1"},
	{"left(b, 2)", "he"},
	{"left(b, -2)", "hel"},
	{"right(b, 2)", "lo"},
	{"right(b, -2)", "llo"},
	{"strpos(b, 'l')", "3"},
	{"strpos(b, 'z')", "0"},
	{"position(b, 'llo')", "3"},
	{"repeat('ab', 3)", "ababab"},
	{"reverse(b)", "olleh"},
	{"lpad(b, 8, '*')", "***hello"},
	{"rpad(b, 3)", "hel"},
	{"split_part('a,b,c', ',', 2)", "b"},
	{"split_part('a,b,c', ',', -1)", "c"},
	{"starts_with(b, 'he')", "t"},
	{"md5(b)", "5d41402abc4b2a76b9719d911017c592"},
	{"ascii(b)", "104"},
	{"chr(65)", "A"},
	{"to_hex(255)", "ff"},
	{"lower(a)", "ERROR 42883: function lower(integer) does not exist"},
	{"foo(a)", "ERROR 42883: function foo(integer) does not exist"},
	{"concat()", "ERROR 42883: function concat() does not exist"},

	// Numeric functions.
	{"abs(-5)", "5"},
	{"abs(c - 3)", "1.5"},
	{"round(2.5)", "3"},
	{"round(-2.5)", "-3"},
	{"round(2.5::float8)", "2"},
	{"round(1.2345, 2)", "1.23"},
	{"round(1234.5, -2)", "1200"},
	{"trunc(-1.99)", "-1"},
	{"trunc(1.999, 2)", "1.99"},
	{"ceil(1.2)", "2"},
	{"ceil(0.001)", "1"},
	{"floor(-1.2)", "-2"},
	{"sqrt(2.0)", "1.414213562373095"},
	{"sqrt(-1)", "ERROR 2201F: cannot take square root of a negative number"},
	{"mod(-7, 3)", "-1"},
	{"sign(-3.2)", "-1"},
	{"power(2, 3)", "8"},
	{"ln(0)", "ERROR 2201E: cannot take logarithm of zero"},
	{"exp(1.0)", "2.7182818284590452"},
	{"pg_typeof(round(5))", "double precision"},

	// Casts.
	{"'abc'::int", `ERROR 22P02: invalid input syntax for type integer: "abc"`},
	{"'99999'::int2", `ERROR 22003: value "99999" is out of range for type smallint`},
	{"a::text", "5"},
	{"true::text", "true"},
	{"true::int", "1"},
	{"0::bool", "f"},
	{"1.5::int", "2"},
	{"-2.5::int", "-3"},
	{"2.5::float8::int", "2"},
	{"3.5::float8::int", "4"},
	{"1e10::int", "ERROR 22003: integer out of range"},
	{"0.1::float8::numeric", "0.1"},
	{"'NaN'::numeric::int", "ERROR 0A000"},
	{"1.23456::numeric(4,2)", "1.23"},
	{"123.45::numeric(4,2)", "ERROR 22003: numeric field overflow"},
	{"'abcdef'::varchar(3)", "abc"},
	{"ts::date", "2024-03-15"},
	{"ts::timestamp", "2024-03-15 12:34:56.789"},
	{"d::timestamptz", "2024-02-29 00:00:00+00"},
	{"'2024-01-01 10:00:00.5'::timestamp(0)", "2024-01-01 10:00:01"},
	{"j::text", `{"k": [1, "x", null], "n": 2}`},
	{"'[1, 2'::jsonb", "ERROR 22P02"},
	{"'1.5'::jsonb::int", "2"},
	{"'\"x\"'::jsonb::int", "ERROR 22023: cannot cast jsonb string to type integer"},
	{"a::date", "ERROR 42846: cannot cast type integer to date"},
	{"1::foo", `ERROR 42704: type "foo" does not exist`},
	{"1::int[]", "ERROR 0A000"},
	{"'1 day'::interval", "1 day"},
	{"1700000000000::mz_timestamp", "1700000000000"},
	{"'2024-01-01'::mz_timestamp", "1704067200000"},
	{"(-1)::mz_timestamp", "ERROR 22008: mz_timestamp out of range"},
	// mz_timestamp is a uint64: numeric and text reach its whole range.
	{"18446744073709551615::mz_timestamp", "18446744073709551615"},
	{"9223372036854775808::mz_timestamp", "9223372036854775808"},
	{"18446744073709551615.4::mz_timestamp", "18446744073709551615"},
	{"18446744073709551615.5::mz_timestamp", "ERROR 22008: mz_timestamp out of range"},
	{"18446744073709551616::mz_timestamp", "ERROR 22008: mz_timestamp out of range"},
	{"1e19::mz_timestamp", "10000000000000000000"},
	{"1e20::mz_timestamp", "ERROR 22008: mz_timestamp out of range"},
	{"(-0.4)::mz_timestamp", "0"},
	{"(-0.5)::mz_timestamp", "ERROR 22008: mz_timestamp out of range"},
	{"'18446744073709551615'::mz_timestamp", "18446744073709551615"},
	{"' 18446744073709551615.0 '::mz_timestamp", "18446744073709551615"},
	{"'18446744073709551616'::mz_timestamp", "ERROR 22008: mz_timestamp out of range"},
	{"'18446744073709551616.0'::mz_timestamp", "ERROR 22008: mz_timestamp out of range"},
	{"18446744073709551615::numeric::mz_timestamp::numeric", "18446744073709551615"},
	{"18446744073709551615::mz_timestamp::text", "18446744073709551615"},
	{"1700000000000::mz_timestamp::timestamptz", "2023-11-14 22:13:20+00"},

	// Dates and times.
	{"now()", "2024-01-01 00:00:00+00"},
	{"current_timestamp", "2024-01-01 00:00:00+00"},
	{"current_date", "2024-01-01"},
	{"mz_now()", "1704067200000"},
	{"now() - interval '1 minute'", "2023-12-31 23:59:00+00"},
	{"ts + interval '1 month'", "2024-04-15 12:34:56.789+00"},
	{"date '2024-01-31' + interval '1 month'", "2024-02-29 00:00:00"},
	{"d + 1", "2024-03-01"},
	{"d - d", "0"},
	{"ts - d", "15 days 12:34:56.789"},
	{"ts - '1 hour'", `ERROR 22007: invalid input syntax for type timestamp with time zone: "1 hour"`},
	{"interval '1 day' * 2", "2 days"},
	{"interval '1 month' * 1.5", "1 mon 15 days"},
	{"-interval '1 day 2 hours'", "-1 days -02:00:00"},
	{"date_trunc('month', ts)", "2024-03-01 00:00:00+00"},
	{"date_trunc('week', ts)", "2024-03-11 00:00:00+00"},
	{"date_trunc('hour', interval '1 day 26:30:00')", "1 day 26:00:00"},
	{"date_trunc('fortnight', ts)", `ERROR 22023: unit "fortnight" not recognized for type timestamp with time zone`},
	{"date_part('year', ts)", "2024"},
	{"date_part('second', ts)", "56.789"},
	{"date_part('dow', ts)", "5"},
	{"date_part('epoch', ts)", "1710506096.789"},
	{"date_part('year', 'infinity'::timestamp)", "Infinity"},
	{"date_part('month', 'infinity'::timestamp)", "NULL"},
	{"extract('epoch', ts)", "1710506096.789"},
	{"to_timestamp(1700000000)", "2023-11-14 22:13:20+00"},

	// jsonb.
	{"j -> 'k'", `[1, "x", null]`},
	{"j -> 'missing'", "NULL"},
	{"j -> 'k' -> 1", `"x"`},
	{"j -> 'k' -> -1", "null"},
	{"j -> 'k' ->> 1", "x"},
	{"j -> 'k' ->> 2", "NULL"},
	{"j ->> 'n'", "2"},
	{"j -> 0", "NULL"},
	{"jsonb_typeof(j)", "object"},
	{"jsonb_typeof(j -> 'n')", "number"},
	{"jsonb_array_length(j -> 'k')", "3"},
	{"to_jsonb(ts)", `"2024-03-15T12:34:56.789+00:00"`},
	{"to_jsonb(b)", `"hello"`},
	{"jsonb_build_object('a', a, 'b', n)", `{"a": 5, "b": null}`},
	{"jsonb_build_array(a, b)", `[5, "hello"]`},
	{"j @> '{\"n\": 2}'", "t"},
	{"j - 'k'", `{"n": 2}`},
	{"'[1, 2]'::jsonb || '[3]'::jsonb", "[1, 2, 3]"},

	// Names and unsupported features.
	{"x", `ERROR 42703: column "x" does not exist`},
	{"t.x", "ERROR 42703: column t.x does not exist"},
	{"u.a", `ERROR 42P01: missing FROM-clause entry for table "u"`},
	{"t.a", "5"},
	{"public.t.a", "5"},
	{"count(*)", "ERROR 0A000: aggregates are not supported yet"},
	{"sum(a)", "ERROR 0A000: aggregates are not supported yet"},
	{"row_number()", "ERROR 0A000: window functions are not supported yet"},
	{"generate_series(1, 3)", "ERROR 0A000: set-returning functions are not supported yet"},
	{"(SELECT 1)", "ERROR 0A000: subqueries are not supported yet"},
	{"EXISTS (SELECT 1)", "ERROR 0A000"},
	{"a IN (SELECT 1)", "ERROR 0A000"},
	{"lower(DISTINCT b)", "ERROR 42809"},
	{"current_user", "ERROR 0A000"},
	{"'1' + '2'", "ERROR 42725: operator is not unique: unknown + unknown"},
	{"$0", "ERROR 42P02: there is no parameter $0"},
}

func TestEval(t *testing.T) {
	for _, tc := range evalCases {
		got := evalText(t, tc.expr)
		if got != tc.want && !(strings.HasPrefix(tc.want, "ERROR ") && strings.HasPrefix(got, tc.want)) {
			t.Errorf("%s\n   got:  %s\n   want: %s", tc.expr, got, tc.want)
		}
	}
}

func TestAmbiguousColumn(t *testing.T) {
	scope := NewScope(testSchema, "t")
	scope.AddRelation("u", row.Schema{Columns: []row.Column{{Name: "a", Type: row.TypeText}, {Name: "z", Type: row.TypeInt8}}})
	for src, want := range map[string]string{
		"a":       `ERROR 42702: column reference "a" is ambiguous`,
		"t.a + 1": "",
		"u.a":     "",
		"z + i8":  "",
	} {
		_, err := Compile(parseExpr(t, src), scope)
		got := ""
		if err != nil {
			got = errText(err)
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", src, got, want)
		}
	}
	x, err := Compile(parseExpr(t, "z + i8"), scope)
	if err != nil {
		t.Fatal(err)
	}
	r := append(append(row.Row{}, testRow...), "u", int64(1))
	if v, err := x.Eval(nil, r); err != nil || v != int64(9000000001) {
		t.Errorf("z + i8 = %v, %v; want 9000000001", v, err)
	}
}

func TestErrorHint(t *testing.T) {
	_, err := Compile(parseExpr(t, "a + b"), NewScope(testSchema, "t"))
	e, ok := err.(*Error)
	if !ok || e.SQLState() != CodeUndefinedFunction || !strings.Contains(e.Hint(), "explicit type casts") {
		t.Fatalf("got %#v", err)
	}
}

func TestNullable(t *testing.T) {
	for src, want := range map[string]bool{
		"i8":                                 false,
		"i8 + 1":                             false,
		"a + 1":                              true,
		"1":                                  false,
		"NULL::int":                          true,
		"coalesce(a, 0)":                     false,
		"coalesce(a, n)":                     true,
		"a IS NULL":                          false,
		"i8 = 1":                             false,
		"j -> 'k'":                           true,
		"nullif(i8, 1)":                      true,
		"upper('x')":                         false,
		"CASE WHEN i8 > 1 THEN 1 END":        true,
		"CASE WHEN i8 > 1 THEN 1 ELSE 2 END": false,
	} {
		x, err := Compile(parseExpr(t, src), NewScope(testSchema, "t"))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if x.Nullable() != want {
			t.Errorf("%s: Nullable() = %v, want %v", src, x.Nullable(), want)
		}
	}
}

func TestParams(t *testing.T) {
	for _, tc := range []struct {
		src      string
		declared []Type
		want     []Type
	}{
		{"a = $1", nil, []Type{TypeInt4}},
		{"$1 + 1.5", nil, []Type{TypeNumeric}},
		{"b LIKE $1", nil, []Type{TypeText}},
		{"$2", nil, []Type{TypeText, TypeText}},
		{"ts > $1", nil, []Type{TypeTimestampTZ}},
		{"$1 - interval '1 hour'", nil, []Type{TypeInterval}},
		{"a = $1", []Type{TypeInt8}, []Type{TypeInt8}},
		{"coalesce($1, a)", nil, []Type{TypeInt4}},
		{"$1 IS NULL", nil, []Type{TypeText}},
	} {
		scope := NewScope(testSchema, "t")
		scope.SetParamTypes(tc.declared)
		if _, err := Compile(parseExpr(t, tc.src), scope); err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		got := scope.ParamTypes()
		if len(got) != len(tc.want) {
			t.Fatalf("%s: params %v, want %v", tc.src, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: $%d is %s, want %s", tc.src, i+1, got[i], tc.want[i])
			}
		}
	}
	// Values are datums of the parameter type, or their text.
	for _, p := range []row.Datum{int32(5), "5"} {
		if got := evalText(t, "a = $1", p); got != "t" {
			t.Errorf("a = $1 with %#v: %s", p, got)
		}
	}
	if got := evalText(t, "a = $1", "x"); !strings.HasPrefix(got, "ERROR 22P02") {
		t.Errorf("a = $1 with 'x': %s", got)
	}
	if got := evalText(t, "a = $2", int32(5)); !strings.HasPrefix(got, "ERROR 42P02") {
		t.Errorf("a = $2 with one value: %s", got)
	}
	if got := evalText(t, "a = $1", nil); got != "NULL" {
		t.Errorf("a = $1 with NULL: %s", got)
	}
}

func TestNowNeedsTimestamp(t *testing.T) {
	scope := NewScope(testSchema, "t")
	x, err := Compile(parseExpr(t, "now() > ts"), scope)
	if err != nil {
		t.Fatal(err)
	}
	if !scope.UsesNow() {
		t.Error("UsesNow is false after now()")
	}
	if _, err := x.Eval(&EvalContext{}, testRow); err != ErrNoTimestamp {
		t.Errorf("Eval without Now: %v, want ErrNoTimestamp", err)
	}
	v, err := x.Eval(&EvalContext{Now: 1800000000000}, testRow)
	if err != nil || v != true {
		t.Errorf("Eval = %v, %v; want true", v, err)
	}
}

func TestString(t *testing.T) {
	for src, want := range map[string]string{
		"a + 1 > 10 AND b LIKE 'x%'":     "(((a + 1) > 10) AND (b LIKE 'x%'))",
		"1 + 2":                          "3",
		"c::int":                         "(c)::integer",
		"a = -1":                         "(a = (-1))",
		"ts > now() - interval '1 hour'": "(ts > (now() - '01:00:00'::interval))",
	} {
		x, err := Compile(parseExpr(t, src), NewScope(testSchema, "t"))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := x.String(); got != want {
			t.Errorf("%s: String() = %s, want %s", src, got, want)
		}
	}
}
