package expr

import "testing"

func TestScratch(t *testing.T) {
	for _, s := range []string{
		"1 + 2", "a + 1", "a + 1 > 10 AND b LIKE 'x%'", "b || 1", "'x' || true", "1/3.0", "10/3.0", "10000/3.0",
		"c * 2", "f / 0", "2147483647 + 1", "-2147483648", "pg_typeof(-2147483648)", "interval '1h30m'", "now()", "now() - interval '1 minute'",
		"ts + interval '1 month'", "date_trunc('month', ts)", "extract('epoch', ts)", "date_part('dow', ts)", "j -> 'k'", "j -> 'k' -> 1", "j ->> 'n'",
		"jsonb_typeof(j)", "coalesce(n, a)", "nullif(a, 5)", "greatest(1, 2.5, a)", "a IN (1, 5, NULL)", "a NOT IN (1, NULL)", "a BETWEEN 1 AND 10",
		"CASE WHEN a > 3 THEN 'big' ELSE 'small' END", "CASE a WHEN 5 THEN 'five' END", "'abc'::int", "1/0", "round(2.5)", "round(c)", "round(1.2345, 2)",
		"sqrt(2::numeric)", "md5('abc')", "substr('hello', 2, 3)", "length(b)", "upper(b)", "count(*)", "x", "t.x", "u.a", "a + 'x'", "a + b",
		"'2024-01-01'::timestamp", "1.5::int", "2.5::float8::int", "true::int", "'{\"a\":1}'::jsonb", "to_jsonb(ts)", "mz_now()", "d + 1", "d - d", "ts - ts",
		"$1 + 1", "a = $1", "(select 1)", "1 = 1.0", "10 % 3", "-7 / 2", "2 ^ 10", "2.0 ^ 0.5", "'a' < 'b'", "NULL = NULL", "NULL IS NULL", "a IS DISTINCT FROM n",
	} {
		t.Logf("%-50s => %s", s, evalText(t, s, int32(5)))
	}
}
