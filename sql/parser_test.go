package sql

import (
	"fmt"
	"strings"
	"testing"
)

// roundTripTests pair an input with its canonical rendering ("" means the
// input is already canonical). Every form of every statement appears here.
var roundTripTests = []struct{ in, want string }{
	// SELECT
	{"SELECT 1", ""},
	{"select 1;", "SELECT 1"},
	{"SELECT version()", ""},
	{"SELECT current_setting('x')", ""},
	{"SELECT pg_catalog.current_setting('server_version_num')", ""},
	{"SELECT * FROM t", ""},
	{"SELECT t.*, s.t.*, d.s.t.* FROM d.s.t", ""},
	{"SELECT ALL a FROM t", "SELECT a FROM t"},
	{"SELECT DISTINCT a, b FROM t", ""},
	{"SELECT a AS x, b y, c AS \"Z\" FROM t", "SELECT a AS x, b AS y, c AS \"Z\" FROM t"},
	{"SELECT 1 AS select", "SELECT 1 AS \"select\""},
	{"SELECT a FROM s.t AS x", ""},
	{"SELECT a FROM db.s.t x", "SELECT a FROM db.s.t AS x"},
	{"SELECT a FROM (SELECT 1 AS a) AS sub", ""},
	{"SELECT a FROM (SELECT 1 AS a)", ""},
	{"SELECT a FROM (SELECT 1, 2) AS x (a, b)", ""},
	{"SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS x(a, b)", "SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS x (a, b)"},
	{"SELECT x.column1 FROM (VALUES (1)) x WHERE column1 > 0", "SELECT x.column1 FROM (VALUES (1)) AS x WHERE column1 > 0"},
	{"SELECT * FROM (VALUES (1)) AS OF 5", ""},

	// VALUES
	{"VALUES (1)", ""},
	{"values (1, 'a'),(2,NULL);", "VALUES (1, 'a'), (2, NULL)"},
	{"VALUES (1 + 2, now()), ($1, -3) ORDER BY 1 DESC LIMIT 1 OFFSET 1", ""},
	{"CREATE VIEW v AS VALUES ('a', 'b'), ('c', 'd')", ""},
	{"CREATE VIEW v (x, y) AS VALUES (1, 2)", ""},
	{"SUBSCRIBE (VALUES (1)) WITH (PROGRESS)", ""},
	{"DECLARE c CURSOR FOR VALUES (1), (2)", ""},
	{"COPY (VALUES (1)) TO STDOUT", ""},
	{"SELECT * FROM generate_series(1, 3) AS g", ""},
	{"SELECT * FROM a JOIN b ON a.x = b.x", ""},
	{"SELECT * FROM a INNER JOIN b ON true", "SELECT * FROM a JOIN b ON true"},
	{"SELECT * FROM a LEFT OUTER JOIN b USING (x, y) RIGHT JOIN c ON c.x = a.x", "SELECT * FROM a LEFT JOIN b USING (x, y) RIGHT JOIN c ON c.x = a.x"},
	{"SELECT * FROM a FULL JOIN b ON true CROSS JOIN c", "SELECT * FROM a FULL JOIN b ON true CROSS JOIN c"},
	{"SELECT * FROM a JOIN (b JOIN c ON true) ON true", ""},
	{"SELECT * FROM (a JOIN b ON true)", "SELECT * FROM a JOIN b ON true"},
	{"SELECT * FROM a, b WHERE a.x = b.x", ""},
	{"SELECT a, count(*) FROM t WHERE b > 1 GROUP BY a HAVING count(*) > 2 ORDER BY a DESC NULLS FIRST, 2 NULLS LAST LIMIT 10 OFFSET 5", ""},
	{"SELECT a FROM t ORDER BY a ASC", "SELECT a FROM t ORDER BY a"},
	{"SELECT a FROM t OFFSET 5 ROWS LIMIT 3", "SELECT a FROM t LIMIT 3 OFFSET 5"},
	{"SELECT a FROM t LIMIT ALL", "SELECT a FROM t"},
	{"SELECT a FROM t AS OF 1700000000000", ""},
	{"SELECT a FROM t AS x AS OF AT LEAST now()", ""},
	{"SELECT a FROM t AS \"of\"", ""},
	{"SELECT 1 AS OF 5", ""},
	{"SELECT 1 AS of, 2 AS OF AT LEAST 5", "SELECT 1 AS \"of\", 2 AS OF AT LEAST 5"},
	{"SELECT 1 LIMIT ALL AS OF 5", "SELECT 1 AS OF 5"},
	{"SELECT \"exists\"(1), \"row\"(2), exists", ""},
	{"SELECT typname, oid FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON t.typnamespace = n.oid WHERE n.nspname = 'pg_catalog'",
		"SELECT typname, oid FROM pg_catalog.pg_type AS t JOIN pg_catalog.pg_namespace AS n ON t.typnamespace = n.oid WHERE n.nspname = 'pg_catalog'"},

	// Expressions
	{"SELECT a + b * c - d / e % f ^ g", ""},
	{"SELECT (a + b) * c", ""},
	{"SELECT a - (b - c), (a - b) - c", "SELECT a - (b - c), a - b - c"},
	{"SELECT -a, +a, - -a, -(-1), -a::int, (-a)::int, -+a", "SELECT -a, +a, - -a, - -1, -a::int, (-a)::int, - +a"},
	{"SELECT a || b || 'c', a -> 'k' ->> 'v', j #> '{a}', j @> '{}'", ""},
	{"SELECT a OR b AND NOT c", ""},
	{"SELECT (a OR b) AND c", ""},
	{"SELECT NOT (a AND b)", ""},
	{"SELECT a = b, a <> b, a != b, a < b, a <= b, a > b, a >= b", "SELECT a = b, a <> b, a <> b, a < b, a <= b, a > b, a >= b"},
	{"SELECT (a = b) = c", ""},
	{"SELECT a IS NULL, a IS NOT NULL, a ISNULL, a NOTNULL", "SELECT a IS NULL, a IS NOT NULL, a IS NULL, a IS NOT NULL"},
	{"SELECT a IS TRUE, a IS NOT FALSE, a IS UNKNOWN", ""},
	{"SELECT a IS DISTINCT FROM b, a IS NOT DISTINCT FROM b", ""},
	{"SELECT a = b IS NULL", ""},
	{"SELECT (a IS NULL) = b", ""},
	{"SELECT a IN (1, 2), a NOT IN (SELECT b FROM t)", ""},
	{"SELECT a BETWEEN 1 AND 2 AND b, a NOT BETWEEN b + 1 AND c", ""},
	{"SELECT a LIKE 'x%', a NOT LIKE 'y', a ILIKE 'z', a NOT ILIKE 'w'", ""},
	{"SELECT CASE WHEN a THEN 1 WHEN b THEN 2 ELSE 3 END, CASE a WHEN 1 THEN 'one' END", ""},
	{"SELECT CAST(a AS bigint), a::text, a::numeric(10,2)::text", "SELECT a::bigint, a::text, a::numeric(10, 2)::text"},
	{"SELECT a::double precision, a::timestamp with time zone, a::timestamp(3) without time zone, a::character varying(5)", ""},
	{"SELECT a::text[], a::pg_catalog.int4, a::regclass, a::mz_timestamp", ""},
	{"SELECT count(*), count(DISTINCT a), sum(ALL a), coalesce(a, b, 1), nullif(a, 0), greatest(a, b), least(a, b)", "SELECT count(*), count(DISTINCT a), sum(a), coalesce(a, b, 1), nullif(a, 0), greatest(a, b), least(a, b)"},
	{"SELECT now(), current_timestamp, CURRENT_USER, current_schema, current_schema(), left('abc', 2)", "SELECT now(), current_timestamp, current_user, current_schema, current_schema(), left('abc', 2)"},
	{"SELECT EXISTS (SELECT 1 FROM t), (SELECT max(a) FROM t)", ""},
	{"SELECT $1, $2::int", ""},
	{"SELECT 1, 1.5, .5, 1e10, 2.5E-3, 123456789012345678901234567890", ""},
	{"SELECT 'it''s', E'a\\tb', $$dollar 'quoted'$$, $tag$x$$y$tag$", "SELECT 'it''s', 'a\tb', 'dollar ''quoted''', 'x$$y'"},
	{"SELECT TRUE, FALSE, NULL", "SELECT true, false, NULL"},
	{"SELECT INTERVAL '1s', TIMESTAMP '2024-01-01', DATE '2024-01-01', mz_timestamp '1', jsonb '{}'", "SELECT interval '1s', timestamp '2024-01-01', date '2024-01-01', mz_timestamp '1', jsonb '{}'"},
	{"SELECT double precision '1.5', timestamp with time zone '2024-01-01 00:00:00+00'", ""},
	{"SELECT a.b, s.t.c, d.s.t.c, t.\"from\"", ""},
	{"SELECT \"Foo\", \"a\"\"b\", FOO, \"select\"", "SELECT \"Foo\", \"a\"\"b\", foo, \"select\""},
	{"SELECT a = NOT b", "SELECT a = (NOT b)"},
	{"SELECT NOT a = b", ""},
	{"SELECT (a LIKE b) IN (true)", ""},
	{"SELECT a IN (1) IN (true)", "SELECT (a IN (1)) IN (true)"},

	// CREATE TABLE
	{"CREATE TABLE t (a int)", ""},
	{"CREATE TABLE IF NOT EXISTS s.t (a int NOT NULL, b text NULL, c bigint)", "CREATE TABLE IF NOT EXISTS s.t (a int NOT NULL, b text, c bigint)"},
	{"create table t (a bool, b boolean, c smallint, d int2, e integer, f int4, g int8, h real, i float4, j double precision, k float8, l float, m numeric, n decimal(10,2), o varchar, p varchar(10), q character varying, r bytea, s timestamp, u timestamp without time zone, v timestamptz, w timestamp with time zone, x date, y jsonb, z json, aa uuid)",
		"CREATE TABLE t (a bool, b boolean, c smallint, d int2, e integer, f int4, g int8, h real, i float4, j double precision, k float8, l float, m numeric, n decimal(10, 2), o varchar, p varchar(10), q character varying, r bytea, s timestamp, u timestamp without time zone, v timestamptz, w timestamp with time zone, x date, y jsonb, z json, aa uuid)"},
	{"CREATE TABLE t ()", ""},
	{"CREATE TABLE t (\"Key\" text, value text) WITH (RETAIN HISTORY = FOR '1h')", "CREATE TABLE t (\"Key\" text, value text) WITH (RETAIN HISTORY FOR '1h')"},

	// CREATE VIEW
	{"CREATE VIEW v AS SELECT a FROM t", ""},
	{"CREATE VIEW IF NOT EXISTS v (x, y) AS SELECT a, b FROM t", ""},
	{"CREATE MATERIALIZED VIEW mv AS SELECT count(*) FROM t", ""},
	{"CREATE MATERIALIZED VIEW IF NOT EXISTS mv (c) WITH (RETAIN HISTORY FOR '10m') AS SELECT count(*) FROM t", ""},

	// CREATE SOURCE
	{"CREATE SOURCE c FROM LOAD GENERATOR COUNTER", ""},
	{"CREATE SOURCE IF NOT EXISTS c FROM LOAD GENERATOR COUNTER (TICK INTERVAL '500ms')", ""},
	{"create source kv from load generator key value (keys 16, snapshot rounds 1, transactional snapshot true, value size 64, tick interval '1s', seed 0, partitions 1, batch size 1)",
		"CREATE SOURCE kv FROM LOAD GENERATOR KEY VALUE (KEYS 16, SNAPSHOT ROUNDS 1, TRANSACTIONAL SNAPSHOT true, VALUE SIZE 64, TICK INTERVAL '1s', SEED 0, PARTITIONS 1, BATCH SIZE 1)"},
	{"CREATE SOURCE kv FROM LOAD GENERATOR KEY VALUE (KEYS = 4, TRANSACTIONAL SNAPSHOT) WITH (RETAIN HISTORY FOR '1m')", "CREATE SOURCE kv FROM LOAD GENERATOR KEY VALUE (KEYS 4, TRANSACTIONAL SNAPSHOT) WITH (RETAIN HISTORY FOR '1m')"},

	// DROP
	{"DROP TABLE t", ""},
	{"DROP VIEW IF EXISTS a, s.b CASCADE", ""},
	{"DROP MATERIALIZED VIEW mv RESTRICT", "DROP MATERIALIZED VIEW mv"},
	{"DROP SOURCE s", ""},
	{"DROP ROLE IF EXISTS r1, r2", ""},

	// ALTER
	{"ALTER TABLE t SET (RETAIN HISTORY FOR '1h')", ""},
	{"ALTER MATERIALIZED VIEW mv SET (RETAIN HISTORY = FOR '30s')", "ALTER MATERIALIZED VIEW mv SET (RETAIN HISTORY FOR '30s')"},
	{"ALTER SOURCE IF EXISTS s SET (RETAIN HISTORY FOR '1d')", ""},
	{"ALTER VIEW v RESET (RETAIN HISTORY)", ""},

	// Roles and privileges
	{"CREATE ROLE r", ""},
	{"CREATE ROLE r WITH LOGIN SUPERUSER PASSWORD 'secret'", "CREATE ROLE r LOGIN SUPERUSER PASSWORD 'secret'"},
	{"CREATE ROLE r NOLOGIN PASSWORD NULL", ""},
	{"ALTER ROLE r WITH PASSWORD 'x'", "ALTER ROLE r PASSWORD 'x'"},
	{"CREATE ROLE r LOGIN CONNECTION LIMIT 2", ""},
	{"ALTER ROLE r CONNECTION LIMIT -1 PASSWORD 'x'", ""},
	{"GRANT SELECT ON TABLE t TO r", "GRANT SELECT ON t TO r"},
	{"GRANT SELECT, INSERT, UPDATE, DELETE ON t1, s.t2 TO r1, PUBLIC", "GRANT SELECT, INSERT, UPDATE, DELETE ON t1, s.t2 TO r1, public"},
	{"GRANT ALL PRIVILEGES ON t TO r", "GRANT ALL ON t TO r"},
	{"REVOKE ALL ON t FROM r", ""},
	{"REVOKE INSERT ON TABLE t FROM r RESTRICT", "REVOKE INSERT ON t FROM r"},

	// DML
	{"INSERT INTO t VALUES (1)", ""},
	{"INSERT INTO s.t (a, b) VALUES (1, 'x'), ($1, $2)", ""},
	{"INSERT INTO t SELECT * FROM u", ""},
	{"INSERT INTO t (a) (SELECT 1)", "INSERT INTO t (a) SELECT 1"},
	{"UPDATE t SET a = a + 1", ""},
	{"UPDATE t SET a = 1, b = 'x' WHERE c > 2", ""},
	{"DELETE FROM t", ""},
	{"DELETE FROM t WHERE a IS NULL", ""},

	// COPY
	{"COPY t FROM STDIN", ""},
	{"COPY t (a, b) FROM STDIN WITH (FORMAT csv, DELIMITER '|', HEADER, NULL '', QUOTE '\"', ESCAPE '\\')", ""},
	{"COPY t FROM STDIN (FORMAT text)", "COPY t FROM STDIN WITH (FORMAT text)"},
	{"COPY t FROM STDIN WITH (HEADER true, FORMAT 'csv')", ""},
	{"COPY t FROM STDIN CSV HEADER", "COPY t FROM STDIN WITH (FORMAT csv, HEADER)"},
	{"COPY t FROM STDIN WITH CSV DELIMITER AS ';' NULL AS 'nil'", "COPY t FROM STDIN WITH (FORMAT csv, DELIMITER ';', NULL 'nil')"},
	{"COPY t FROM STDIN BINARY", "COPY t FROM STDIN WITH (FORMAT binary)"},
	{"COPY t TO STDOUT", ""},
	{"COPY (SELECT a FROM t) TO STDOUT WITH (FORMAT csv)", ""},
	{"COPY (SUBSCRIBE t) TO STDOUT", ""},
	{"COPY (SUBSCRIBE (SELECT * FROM t) WITH (PROGRESS)) TO STDOUT WITH (FORMAT binary)", ""},

	// SUBSCRIBE
	{"SUBSCRIBE t", ""},
	{"SUBSCRIBE TO s.t", "SUBSCRIBE s.t"},
	{"SUBSCRIBE [u12 AS materialize.public.orders] WITH (PROGRESS)", ""},
	{"subscribe to [u7 as t] envelope upsert (key (a))", "SUBSCRIBE [u7 AS t] ENVELOPE UPSERT (KEY (a))"},
	{"SUBSCRIBE (SELECT a FROM t WHERE b)", ""},
	{"SUBSCRIBE TO (SELECT 1)", "SUBSCRIBE (SELECT 1)"},
	{"SUBSCRIBE t ENVELOPE UPSERT (KEY (a))", ""},
	{"SUBSCRIBE t ENVELOPE DEBEZIUM (KEY (c, b))", ""},
	{"SUBSCRIBE t WITHIN TIMESTAMP ORDER BY a DESC NULLS LAST, mz_diff", ""},
	{"SUBSCRIBE t WITH (SNAPSHOT = false)", ""},
	{"SUBSCRIBE t WITH (SNAPSHOT false, PROGRESS true)", "SUBSCRIBE t WITH (SNAPSHOT = false, PROGRESS = true)"},
	{"SUBSCRIBE t WITH (SNAPSHOT, PROGRESS)", ""},
	{"SUBSCRIBE t AS OF 100", ""},
	{"SUBSCRIBE t AS OF AT LEAST 100 UP TO 200", ""},
	{"SUBSCRIBE t UP TO 200", ""},
	{"SUBSCRIBE t AS OF 1::mz_timestamp", ""},
	{"SUBSCRIBE t ENVELOPE UPSERT (KEY (k)) WITH (PROGRESS) AS OF 5 UP TO 9", ""},
	{"SUBSCRIBE t WITH (PROGRESS) ENVELOPE UPSERT (KEY (k))", "SUBSCRIBE t ENVELOPE UPSERT (KEY (k)) WITH (PROGRESS)"},
	{"SUBSCRIBE t WITH (PROGRESS) AS OF 5 UP TO 9 WITHIN TIMESTAMP ORDER BY a", "SUBSCRIBE t WITHIN TIMESTAMP ORDER BY a WITH (PROGRESS) AS OF 5 UP TO 9"},
	{"SUBSCRIBE t AS OF 5 ENVELOPE DEBEZIUM (KEY (a))", "SUBSCRIBE t ENVELOPE DEBEZIUM (KEY (a)) AS OF 5"},
	// WITH before the output clause, then AS OF and UP TO.
	{"SUBSCRIBE t WITH (PROGRESS) WITHIN TIMESTAMP ORDER BY a DESC AS OF 5", "SUBSCRIBE t WITHIN TIMESTAMP ORDER BY a DESC WITH (PROGRESS) AS OF 5"},
	{"SUBSCRIBE t WITH (SNAPSHOT = false) WITHIN TIMESTAMP ORDER BY a UP TO 9", "SUBSCRIBE t WITHIN TIMESTAMP ORDER BY a WITH (SNAPSHOT = false) UP TO 9"},
	{"SUBSCRIBE (SELECT a FROM t) WITH (PROGRESS) ENVELOPE UPSERT (KEY (a)) AS OF AT LEAST 5 UP TO 9", "SUBSCRIBE (SELECT a FROM t) ENVELOPE UPSERT (KEY (a)) WITH (PROGRESS) AS OF AT LEAST 5 UP TO 9"},
	{"DECLARE c CURSOR FOR SUBSCRIBE t WITH (PROGRESS) ENVELOPE DEBEZIUM (KEY (a)) AS OF 5", "DECLARE c CURSOR FOR SUBSCRIBE t ENVELOPE DEBEZIUM (KEY (a)) WITH (PROGRESS) AS OF 5"},

	// Cursors
	{"DECLARE c CURSOR FOR SUBSCRIBE t", ""},
	{"DECLARE c CURSOR WITHOUT HOLD FOR SUBSCRIBE t WITH (PROGRESS)", "DECLARE c CURSOR FOR SUBSCRIBE t WITH (PROGRESS)"},
	{"DECLARE c CURSOR FOR SELECT * FROM t", ""},
	{"FETCH c", "FETCH 1 c"},
	{"FETCH 10 c", ""},
	{"FETCH ALL c", ""},
	{"FETCH FORWARD 5 FROM c", "FETCH 5 c"},
	{"FETCH FORWARD ALL IN c", "FETCH ALL c"},
	{"FETCH NEXT FROM c", "FETCH 1 c"},
	{"FETCH forward", "FETCH 1 forward"},
	{"FETCH 0 c WITH (TIMEOUT = '1s')", ""},
	{"FETCH ALL c WITH (timeout='0s')", "FETCH ALL c WITH (TIMEOUT = '0s')"},
	{"FETCH 100 c WITH (TIMEOUT INTERVAL '5s')", "FETCH 100 c WITH (TIMEOUT = interval '5s')"},
	{"CLOSE c", ""},
	{"CLOSE ALL", ""},

	// Transactions
	{"BEGIN", ""},
	{"BEGIN WORK", "BEGIN"},
	{"BEGIN TRANSACTION ISOLATION LEVEL SERIALIZABLE", "BEGIN ISOLATION LEVEL SERIALIZABLE"},
	{"BEGIN ISOLATION LEVEL STRICT SERIALIZABLE, READ ONLY", ""},
	{"START TRANSACTION READ WRITE ISOLATION LEVEL REPEATABLE READ", "BEGIN ISOLATION LEVEL REPEATABLE READ, READ WRITE"},
	{"START TRANSACTION ISOLATION LEVEL READ COMMITTED", "BEGIN ISOLATION LEVEL READ COMMITTED"},
	{"COMMIT", ""},
	{"COMMIT WORK", "COMMIT"},
	{"END", "COMMIT"},
	{"END TRANSACTION", "COMMIT"},
	{"ROLLBACK", ""},
	{"ABORT", "ROLLBACK"},
	{"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", ""},
	{"SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", ""},

	// SET / RESET / SHOW
	{"SET extra_float_digits = 3", ""},
	{"SET extra_float_digits TO -3", "SET extra_float_digits = -3"},
	{"SET application_name = 'psql'", ""},
	{"SET SESSION search_path TO public, \"$user\"", "SET search_path = public, \"$user\""},
	{"SET LOCAL statement_timeout = 0", ""},
	{"SET x TO DEFAULT", "SET x = DEFAULT"},
	{"SET enable_subscribe_persist_fast_path = off", ""},
	{"SET x = on", ""},
	{"SET x = true", ""},
	{"SET x = \"default\"", ""},
	{"SET TIME ZONE 'UTC'", "SET timezone = 'UTC'"},
	{"SET TIME ZONE LOCAL", "SET timezone = DEFAULT"},
	{"SET TIME ZONE -5", "SET timezone = -5"},
	{"SET NAMES 'UTF8'", "SET client_encoding = 'UTF8'"},
	{"SET SCHEMA 'public'", "SET search_path = 'public'"},
	{"SET \"time\" = 1", ""},
	{"SET session = 1", "SET \"session\" = 1"},
	{"SET foo.bar = 'x'", ""},
	{"RESET x", ""},
	{"RESET ALL", ""},
	{"RESET TIME ZONE", "RESET timezone"},
	{"SHOW x", ""},
	{"SHOW ALL", ""},
	{"SHOW server_version", ""},
	{"SHOW TIME ZONE", "SHOW timezone"},
	{"SHOW TRANSACTION ISOLATION LEVEL", "SHOW transaction_isolation"},
	{"SHOW TABLES", ""},
	{"SHOW TABLES FROM public", ""},
	{"SHOW TABLES IN materialize.public", "SHOW TABLES FROM materialize.public"},
	{"SHOW SOURCES", ""},
	{"SHOW VIEWS", ""},
	{"SHOW MATERIALIZED VIEWS", ""},
	{"SHOW COLUMNS FROM t", ""},
	{"SHOW COLUMNS IN s.t", "SHOW COLUMNS FROM s.t"},
	{"SHOW CREATE MATERIALIZED VIEW mv", ""},
	{"SHOW \"tables\"", ""},
	{"SHOW tables.x", "SHOW \"tables\".x"},
	{"ALTER SYSTEM SET enable_subscribe_persist_fast_path = false", ""},
	{"ALTER SYSTEM SET max_result_size TO '1GB'", "ALTER SYSTEM SET max_result_size = '1GB'"},
	{"ALTER SYSTEM SET x TO DEFAULT", "ALTER SYSTEM SET x = DEFAULT"},
	{"ALTER SYSTEM RESET x", ""},
	{"ALTER SYSTEM RESET ALL", ""},
	{"DISCARD ALL", ""},
	{"DISCARD TEMPORARY", "DISCARD TEMP"},
	{"DEALLOCATE ALL", ""},
	{"DEALLOCATE PREPARE s1", "DEALLOCATE s1"},
	{"DEALLOCATE PREPARE prepare", "DEALLOCATE prepare"},
}

func TestRoundTrip(t *testing.T) {
	for _, tt := range roundTripTests {
		want := tt.want
		if want == "" {
			want = tt.in
		}
		first := mustParse(t, tt.in)
		if got := first.String(); got != want {
			t.Errorf("Parse(%q).String()\n got: %s\nwant: %s", tt.in, got, want)
			continue
		}
		second := mustParse(t, want)
		if got := second.String(); got != want {
			t.Errorf("canonical form is not stable: %q renders as %q", want, got)
		}
		if !equalIgnoringPos(first, second) {
			t.Errorf("Parse(%q) and Parse(%q) differ", tt.in, want)
		}
	}
}

func TestPrecedence(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a OR b AND c", "(a OR (b AND c))"},
		{"a AND b OR c", "((a AND b) OR c)"},
		{"NOT a AND b", "((NOT a) AND b)"},
		{"NOT a = b", "(NOT (a = b))"},
		{"NOT a IS NULL", "(NOT (a IS NULL))"},
		{"a = b IS NULL", "((a = b) IS NULL)"},
		{"a IS NULL = b", "((a IS NULL) = b)"},
		{"a < b + c", "(a < (b + c))"},
		{"a = b LIKE c", "(a = (b LIKE c))"},
		{"a LIKE b || c", "(a LIKE (b || c))"},
		{"a || b + c", "(a || (b + c))"},
		{"a + b * c", "(a + (b * c))"},
		{"a - b - c", "((a - b) - c)"},
		{"a * b ^ c", "(a * (b ^ c))"},
		{"-a ^ b", "((- a) ^ b)"},
		{"-a::int", "(- (a::int))"},
		{"a::int + b", "((a::int) + b)"},
		{"a BETWEEN b + 1 AND c * 2 AND d", "((a BETWEEN (b + 1) AND (c * 2)) AND d)"},
		{"a NOT BETWEEN 1 AND 2 OR x", "((a BETWEEN 1 AND 2) OR x)"},
		{"a IN (1, 2) = b", "((a IN (1, 2)) = b)"},
		{"a IN (1) IN (b)", "((a IN (1)) IN (b))"},
		{"a IS DISTINCT FROM b + 1", "(a IS DISTINCT FROM (b + 1))"},
		{"a = 1 OR b = 2 AND NOT c <> 3", "((a = 1) OR ((b = 2) AND (NOT (c <> 3))))"},
		{"1 = NOT a AND b", "((1 = (NOT a)) AND b)"},
		{"a -> 'b' = c", "((a -> 'b') = c)"},
		{"a IS NULL IS NULL", "((a IS NULL) IS NULL)"},
	}
	for _, tt := range tests {
		if got := paren(parseExpr(t, tt.in)); got != tt.want {
			t.Errorf("%s\n got: %s\nwant: %s", tt.in, got, tt.want)
		}
	}
}

func TestAST(t *testing.T) {
	tests := []struct {
		sql  string
		want Statement
	}{
		{"SELECT a AS x, t.* FROM s.t AS u WHERE a > $1 LIMIT 5 AS OF AT LEAST 10", &Select{
			Items: []SelectItem{
				{Expr: &ColumnRef{Column: "a"}, Alias: "x"},
				{Expr: &Star{Table: ObjectName{Name: "t"}}},
			},
			From:  []TableExpr{&TableName{Name: ObjectName{Schema: "s", Name: "t"}, Alias: "u"}},
			Where: &BinaryExpr{Op: OpGt, Left: &ColumnRef{Column: "a"}, Right: &Param{Index: 1}},
			Limit: &NumberLit{Text: "5"},
			AsOf:  &AsOf{AtLeast: true, Expr: &NumberLit{Text: "10"}},
		}},
		{`CREATE TABLE "T" (a int NOT NULL, "B" numeric(10,2), c text[])`, &CreateTable{
			Name: ObjectName{Name: "T"},
			Columns: []ColumnDef{
				{Name: "a", Type: TypeName{Name: "int"}, NotNull: true},
				{Name: "B", Type: TypeName{Name: "numeric", Modifiers: []int{10, 2}}},
				{Name: "c", Type: TypeName{Name: "text", Array: true}},
			},
		}},
		{"SUBSCRIBE TO t ENVELOPE DEBEZIUM (KEY (c, b)) WITH (SNAPSHOT = false, PROGRESS) AS OF 5 UP TO 9", &Subscribe{
			Relation: ObjectName{Name: "t"},
			Envelope: Envelope{Kind: EnvelopeDebezium, Key: []string{"c", "b"}},
			Options: []Option{
				{Name: "SNAPSHOT", Value: &BoolLit{}},
				{Name: "PROGRESS"},
			},
			AsOf: &AsOf{Expr: &NumberLit{Text: "5"}},
			UpTo: &NumberLit{Text: "9"},
		}},
		{"SUBSCRIBE (SELECT a FROM t) WITHIN TIMESTAMP ORDER BY mz_diff DESC", &Subscribe{
			Query: &Select{
				Items: []SelectItem{{Expr: &ColumnRef{Column: "a"}}},
				From:  []TableExpr{&TableName{Name: ObjectName{Name: "t"}}},
			},
			WithinTimestampOrderBy: []OrderItem{{Expr: &ColumnRef{Column: "mz_diff"}, Desc: true}},
		}},
		{"DECLARE c CURSOR FOR SUBSCRIBE t", &DeclareCursor{Name: "c", Query: &Subscribe{Relation: ObjectName{Name: "t"}}}},
		{"FETCH ALL c WITH (TIMEOUT = '1s')", &Fetch{Name: "c", All: true, Options: []Option{{Name: "TIMEOUT", Value: &StringLit{Value: "1s"}}}}},
		{"COPY t FROM STDIN CSV HEADER", &Copy{
			Table:     ObjectName{Name: "t"},
			Direction: CopyFrom,
			Options:   []Option{{Name: "FORMAT", Value: &ColumnRef{Column: "csv"}}, {Name: "HEADER"}},
		}},
		{"COPY (SUBSCRIBE t) TO STDOUT", &Copy{Query: &Subscribe{Relation: ObjectName{Name: "t"}}, Direction: CopyTo}},
		{"SET search_path = public, 'x', 1, -2", &SetVariable{Name: "search_path", Values: []Expr{
			&ColumnRef{Column: "public"}, &StringLit{Value: "x"}, &NumberLit{Text: "1"}, &NumberLit{Text: "-2"},
		}}},
		{"CREATE SOURCE c FROM LOAD GENERATOR COUNTER (TICK INTERVAL '1s')", &CreateSource{
			Name: ObjectName{Name: "c"}, Generator: "COUNTER",
			Options: []Option{{Name: "TICK INTERVAL", Value: &StringLit{Value: "1s"}}},
		}},
		{"ALTER TABLE t SET (RETAIN HISTORY FOR '1h')", &AlterObject{
			Kind: KindTable, Name: ObjectName{Name: "t"},
			Options: []Option{{Name: "RETAIN HISTORY", Value: &StringLit{Value: "1h"}}},
		}},
		{"ALTER TABLE t RESET (RETAIN HISTORY)", &AlterObject{
			Kind: KindTable, Name: ObjectName{Name: "t"}, Reset: true, Options: []Option{{Name: "RETAIN HISTORY"}},
		}},
		{"INSERT INTO t (a) VALUES (1), (2)", &Insert{
			Table: ObjectName{Name: "t"}, Columns: []string{"a"},
			Values: [][]Expr{{&NumberLit{Text: "1"}}, {&NumberLit{Text: "2"}}},
		}},
		{"SELECT CAST(x AS timestamp(3) with time zone)", &Select{Items: []SelectItem{{Expr: &Cast{
			X: &ColumnRef{Column: "x"}, Type: TypeName{Name: "timestamp with time zone", Modifiers: []int{3}},
		}}}}},
		{"SELECT count(*) FROM a LEFT JOIN b USING (k)", &Select{
			Items: []SelectItem{{Expr: &FuncCall{Name: ObjectName{Name: "count"}, Star: true}}},
			From: []TableExpr{&Join{Kind: JoinLeft,
				Left: &TableName{Name: ObjectName{Name: "a"}}, Right: &TableName{Name: ObjectName{Name: "b"}},
				Using: []string{"k"}}},
		}},
	}
	for _, tt := range tests {
		got := mustParse(t, tt.sql)
		if !equalIgnoringPos(got, tt.want) {
			t.Errorf("Parse(%q)\n got: %#v\nwant: %#v", tt.sql, got, tt.want)
		}
	}
}

func TestPositions(t *testing.T) {
	s := mustParse(t, "SELECT é, bb FROM s.t WHERE f(x) = $1").(*Select)
	checks := []struct {
		what      string
		got, want int
	}{
		{"é", s.Items[0].Expr.(*ColumnRef).Pos, 8},
		{"bb", s.Items[1].Expr.(*ColumnRef).Pos, 11},
		{"s.t", s.From[0].(*TableName).Name.Pos, 19},
		{"f", s.Where.(*BinaryExpr).Left.(*FuncCall).Name.Pos, 29},
		{"$1", s.Where.(*BinaryExpr).Right.(*Param).Pos, 36},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("position of %s: got %d, want %d", c.what, c.got, c.want)
		}
	}
}

func TestIdentifiers(t *testing.T) {
	tests := []struct{ in, name, render string }{
		{"Foo", "foo", "foo"},
		{`"Foo"`, "Foo", `"Foo"`},
		{`"foo"`, "foo", "foo"},
		{`"a b"`, "a b", `"a b"`},
		{`"a""b"`, `a"b`, `"a""b"`},
		{`"select"`, "select", `"select"`},
		{`"key"`, "key", "key"},
		{"ÄbC", "Äbc", `"Äbc"`},
		{"_x$1", "_x$1", "_x$1"},
		{`"1a"`, "1a", `"1a"`},
	}
	for _, tt := range tests {
		s := mustParse(t, "SELECT * FROM "+tt.in).(*Select)
		name := s.From[0].(*TableName).Name
		if name.Name != tt.name {
			t.Errorf("%s: name %q, want %q", tt.in, name.Name, tt.name)
		}
		if got := name.String(); got != tt.render {
			t.Errorf("%s: renders %s, want %s", tt.in, got, tt.render)
		}
	}
}

func TestLiterals(t *testing.T) {
	tests := []struct {
		in   string
		want Expr
	}{
		{"'abc'", &StringLit{Value: "abc"}},
		{"'it''s'", &StringLit{Value: "it's"}},
		{`'back\slash'`, &StringLit{Value: `back\slash`}},
		{`E'a\nb\tc\\d\'e'`, &StringLit{Value: "a\nb\tc\\d'e"}},
		{`e'\x41\101\u00e9\U0001F600\q'`, &StringLit{Value: "AAé😀q"}},
		{`E'\uD83D\uDE00'`, &StringLit{Value: "😀"}},
		{"'a'\n'b'", &StringLit{Value: "ab"}},
		{"'a'\r\n\t'b''c'\n''", &StringLit{Value: "ab'c"}},
		{"''", &StringLit{Value: ""}},
		{"''''", &StringLit{Value: "'"}},
		{"'a' = 'b'", &BinaryExpr{Op: OpEq, Left: &StringLit{Value: "a"}, Right: &StringLit{Value: "b"}}},
		{"'a' \n -- comment\n", &StringLit{Value: "a"}},
		{"$$it's$$", &StringLit{Value: "it's"}},
		{"$fn$ $$ $fn$", &StringLit{Value: " $$ "}},
		{"N'x'", &StringLit{Value: "x"}},
		{"42", &NumberLit{Text: "42"}},
		{"99999999999999999999999", &NumberLit{Text: "99999999999999999999999"}},
		{"1.25", &NumberLit{Text: "1.25"}},
		{"1e3", &NumberLit{Text: "1e3"}},
		{".5", &NumberLit{Text: ".5"}},
		{"5.", &NumberLit{Text: "5."}},
		{"$7", &Param{Index: 7}},
		{"INTERVAL '1 second'", &TypedLit{Type: TypeName{Name: "interval"}, Value: "1 second"}},
		{"date '2024-02-03'", &TypedLit{Type: TypeName{Name: "date"}, Value: "2024-02-03"}},
		{"TIMESTAMP WITH TIME ZONE 'x'", &TypedLit{Type: TypeName{Name: "timestamp with time zone"}, Value: "x"}},
		{"- 1", &UnaryExpr{Op: UnaryMinus, X: &NumberLit{Text: "1"}}},
	}
	for _, tt := range tests {
		if got := parseExpr(t, tt.in); !equalIgnoringPos(got, tt.want) {
			t.Errorf("%s: got %#v, want %#v", tt.in, got, tt.want)
		}
	}
}

func TestLexerOperators(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a=-1", "(a = (- 1))"},
		{"a<>-1", "(a <> (- 1))"},
		{"2*-3", "(2 * (- 3))"},
		{"a!=b", "(a <> b)"},
		{"a->>'x'", "(a ->> 'x')"},
		{"a+-+-b", "(a + (- (+ (- b))))"},
		{"a--b\n+1", "(a + 1)"},
		{"a/**/+/* x /* nested */ */1", "(a + 1)"},
	}
	for _, tt := range tests {
		if got := paren(parseExpr(t, tt.in)); got != tt.want {
			t.Errorf("%q: got %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestParseAll(t *testing.T) {
	stmts := mustParseAll(t, "  ;; SET a = 1; -- comment\n SELECT 1 ; /* c */ ; COMMIT;")
	var got []string
	for _, s := range stmts {
		got = append(got, s.String())
	}
	if want := "SET a = 1|SELECT 1|COMMIT"; strings.Join(got, "|") != want {
		t.Errorf("got %q, want %q", strings.Join(got, "|"), want)
	}
	for _, empty := range []string{"", "  ", ";", "-- only a comment", "/* x */ ;;"} {
		if stmts := mustParseAll(t, empty); len(stmts) != 0 {
			t.Errorf("ParseAll(%q) = %v, want none", empty, stmts)
		}
		if _, err := Parse(empty); err != ErrEmptyStatement {
			t.Errorf("Parse(%q) error = %v, want ErrEmptyStatement", empty, err)
		}
	}
	if _, err := Parse("SELECT 1; SELECT 2"); err == nil {
		t.Errorf("Parse of two statements succeeded")
	}
	if s := mustParse(t, "SELECT 1;"); s.String() != "SELECT 1" {
		t.Errorf("got %s", s)
	}
}

func TestOptionHelpers(t *testing.T) {
	s := mustParse(t, "SUBSCRIBE t WITH (SNAPSHOT = 'off', PROGRESS)").(*Subscribe)
	snap, ok := FindOption(s.Options, "SNAPSHOT")
	if !ok {
		t.Fatal("SNAPSHOT not found")
	}
	if b, err := snap.Bool(); err != nil || b {
		t.Errorf("SNAPSHOT.Bool() = %v, %v; want false", b, err)
	}
	prog, _ := FindOption(s.Options, "PROGRESS")
	if b, err := prog.Bool(); err != nil || !b {
		t.Errorf("PROGRESS.Bool() = %v, %v; want true", b, err)
	}
	if _, ok := FindOption(s.Options, "MISSING"); ok {
		t.Error("found a missing option")
	}

	for _, tt := range []struct {
		value string
		want  bool
		ok    bool
	}{
		{"true", true, true}, {"false", false, true}, {"on", true, true}, {"off", false, true},
		{"'yes'", true, true}, {"'n'", false, true}, {"1", true, true}, {"0", false, true},
		{"'t'", true, true}, {"'maybe'", false, false}, {"2", false, false}, {"now()", false, false},
	} {
		o := mustParse(t, "SUBSCRIBE t WITH (SNAPSHOT = "+tt.value+")").(*Subscribe).Options[0]
		b, err := o.Bool()
		if (err == nil) != tt.ok || (tt.ok && b != tt.want) {
			t.Errorf("SNAPSHOT = %s: Bool() = %v, %v", tt.value, b, err)
		}
		if err != nil {
			pe := err.(*ParseError)
			if pe.SQLState() != CodeInvalidParameterValue || pe.Position != 19 {
				t.Errorf("SNAPSHOT = %s: error %s at %d", tt.value, pe.SQLState(), pe.Position)
			}
		}
	}

	c := mustParse(t, "COPY t FROM STDIN WITH (FORMAT csv, DELIMITER '|')").(*Copy)
	if f, err := c.Options[0].Text(); err != nil || f != "csv" {
		t.Errorf("FORMAT.Text() = %q, %v", f, err)
	}
	if d, err := c.Options[1].Text(); err != nil || d != "|" {
		t.Errorf("DELIMITER.Text() = %q, %v", d, err)
	}
	h := mustParse(t, "COPY t FROM STDIN WITH (HEADER)").(*Copy)
	if _, err := h.Options[0].Text(); err == nil {
		t.Error("Text() of a bare option succeeded")
	}
}

func TestInspect(t *testing.T) {
	s := mustParse(t, "SELECT a, f(b + 1) FROM t JOIN (SELECT c FROM u) AS d ON t.x = d.c WHERE e IN (SELECT g FROM v) ORDER BY h")
	var cols []string
	Inspect(s, func(n Node) bool {
		if c, ok := n.(*ColumnRef); ok {
			cols = append(cols, c.String())
		}
		return true
	})
	if got, want := strings.Join(cols, " "), "a b c t.x d.c e g h"; got != want {
		t.Errorf("columns in walk order: got %q, want %q", got, want)
	}
	// Returning false prunes a subtree: skipping nested queries leaves only
	// the outer query's columns.
	cols = nil
	Inspect(s, func(n Node) bool {
		if c, ok := n.(*ColumnRef); ok {
			cols = append(cols, c.String())
		}
		_, nested := n.(*Select)
		return !nested || n == Node(s)
	})
	if got, want := strings.Join(cols, " "), "a b t.x d.c e h"; got != want {
		t.Errorf("columns outside subqueries: got %q, want %q", got, want)
	}
}

func TestDepthLimit(t *testing.T) {
	tooComplex := func(sql string) {
		t.Helper()
		_, err := Parse(sql)
		pe, ok := err.(*ParseError)
		if !ok || pe.SQLState() != CodeStatementTooComplex {
			t.Errorf("%.40s...: got %v, want %s", sql, err, CodeStatementTooComplex)
		}
	}
	n := MaxDepth + 10
	tooComplex("SELECT " + strings.Repeat("NOT ", n) + "true")
	tooComplex("SELECT " + strings.Repeat("- ", n) + "1")
	tooComplex("SELECT 1" + strings.Repeat(" + 1", n))
	tooComplex("SELECT a" + strings.Repeat(" IS NULL", n))
	tooComplex("SELECT " + strings.Repeat("(SELECT ", n/2) + "1" + strings.Repeat(")", n/2))
	tooComplex("SUBSCRIBE t WITH (SNAPSHOT = 1" + strings.Repeat(" + 1", n) + ")")
	// Parentheses deepen the parser's recursion but not the tree; only
	// absurd nesting fails.
	mustParse(t, "SELECT "+strings.Repeat("(", 2*MaxDepth)+"1"+strings.Repeat(")", 2*MaxDepth))
	tooComplex("SELECT " + strings.Repeat("(", 5*MaxDepth) + "1" + strings.Repeat(")", 5*MaxDepth))
	tooComplex("SELECT * FROM " + strings.Repeat("(", 5*MaxDepth) + "t" + strings.Repeat(")", 5*MaxDepth))
}

// TestLimitsCostBounded sends statements of about a megabyte that a
// limit rejects, and checks that the parser gives up soon after the limit
// is passed: the work done, counted in tokens lexed, must not grow with the
// length of the text. (Before, "SELECT 1+1+...+1" was lexed and parsed to
// its end, a second or so for 2 MB, before the depth limit rejected it.)
func TestLimitsCostBounded(t *testing.T) {
	const size = 1 << 20
	// rep repeats s until the text is about size bytes long.
	rep := func(s string) string { return strings.Repeat(s, size/len(s)) }
	chain := func(n int) string { return "1" + strings.Repeat("+1", n-1) } // n levels deep
	tooComplex := fmt.Sprintf("statement too complex: nesting exceeds %d levels", MaxDepth)
	tests := []struct {
		name, sql, code, msg string
	}{
		{"Plus", "SELECT 1" + rep("+1"), CodeStatementTooComplex, tooComplex},
		{"Or", "SELECT a" + rep(" OR a"), CodeStatementTooComplex, tooComplex},
		{"IsNull", "SELECT a" + rep(" IS NULL"), CodeStatementTooComplex, tooComplex},
		{"Cast", "SELECT a" + rep("::int"), CodeStatementTooComplex, tooComplex},
		{"Concat", "SELECT a" + rep(" || a"), CodeStatementTooComplex, tooComplex},
		// A chain of chains, each within the limit alone.
		{"ChainOfChains", "SELECT (" + chain(MaxDepth-2) + ")" + rep(" + ("+chain(MaxDepth-2)+")"), CodeStatementTooComplex, tooComplex},
		// Too deep at the start, then long and flat.
		{"DeepThenWide", "SELECT -(" + chain(MaxDepth) + ")" + rep(", 1"), CodeStatementTooComplex, tooComplex},
		{"DeepThenLongIn", "SELECT (" + chain(MaxDepth-1) + ") IN (1" + rep(", 1") + ")", CodeStatementTooComplex, tooComplex},
		{"DeepCallArg", "SELECT f(" + chain(MaxDepth) + rep(", 1") + ")", CodeStatementTooComplex, tooComplex},
		{"DeepCase", "SELECT CASE WHEN " + chain(MaxDepth) + " THEN 1" + rep(" WHEN 1 THEN 1") + " END", CodeStatementTooComplex, tooComplex},
		{"DeepSubquery", "SELECT (SELECT " + chain(MaxDepth-2) + rep(", 1") + ")", CodeStatementTooComplex, tooComplex},
		{"Joins", "SELECT * FROM t" + rep(" JOIN t ON true"), CodeStatementTooComplex, tooComplex},
		{"CrossJoins", "SELECT * FROM t" + rep(" CROSS JOIN t"), CodeStatementTooComplex, tooComplex},
		{"SubscribeOption", "SUBSCRIBE t WITH (SNAPSHOT = 1" + rep(" + 1") + ")", CodeStatementTooComplex, tooComplex},
		{"DeclareSubscribe", "DECLARE c CURSOR FOR SUBSCRIBE (SELECT 1" + rep(" + 1") + ")", CodeStatementTooComplex, tooComplex},
		{"InsertValues", "INSERT INTO t VALUES (" + chain(MaxDepth) + rep(", 1") + ")", CodeStatementTooComplex, tooComplex},
		{"SecondStatement", "SELECT 1; SELECT 1" + rep("+1"), CodeStatementTooComplex, tooComplex},
		// Parentheses deepen only the parser's recursion, which is bounded.
		{"Parens", "SELECT " + rep("("), CodeStatementTooComplex, tooComplex},
		{"ParenJoins", "SELECT * FROM " + rep("("), CodeStatementTooComplex, tooComplex},
		{"Unions", "SELECT 1" + rep(" UNION SELECT 1"), CodeFeatureNotSupported, "set operations (UNION, INTERSECT, EXCEPT) not supported"},
		// A name has at most four parts; the error quotes no more than five.
		{"ColumnName", "SELECT a" + rep(".a"), CodeSyntaxError, "improper qualified name (too many dotted names): a.a.a.a.a"},
		{"ColumnStar", "SELECT a" + rep(".a") + ".*", CodeSyntaxError, "improper qualified name (too many dotted names): a.a.a.a.a"},
		{"TableName", "SELECT * FROM a" + rep(".a"), CodeSyntaxError, "improper qualified name (too many dotted names): a.a.a.a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stats, err := parseAll(tt.sql)
			if err == nil {
				t.Fatalf("accepted, want %s %s", tt.code, tt.msg)
			}
			if pe, ok := err.(*ParseError); !ok || pe.SQLState() != tt.code || pe.Message != tt.msg {
				t.Fatalf("got %s, want %s %s", describe(err), tt.code, tt.msg)
			}
			// The statements are some 100 000 to 500 000 tokens long; the
			// longest prefix within the limits here some 6 000.
			if limit := 8 * MaxDepth; stats.lexed > limit {
				t.Errorf("lexed %d tokens before failing, want at most %d", stats.lexed, limit)
			}
		})
	}
}

// TestDepthLimitRoundTrip builds trees of many shapes as deep as MaxDepth
// allows and checks that their renderings, which may add parentheses, parse
// again: the limit is on the tree, so String() never produces text that
// Parse rejects.
func TestDepthLimitRoundTrip(t *testing.T) {
	shapes := map[string]func(k int) string{
		"unary":      func(k int) string { return "SELECT " + strings.Repeat("- ", k) + "1" },
		"not":        func(k int) string { return "SELECT " + strings.Repeat("NOT ", k) + "a" },
		"is":         func(k int) string { return "SELECT a" + strings.Repeat(" IS NULL", k) },
		"in":         func(k int) string { return "SELECT a" + strings.Repeat(" IN (1)", k) },
		"is-eq":      func(k int) string { return "SELECT a" + strings.Repeat(" IS NULL = b", k) },
		"is-like":    func(k int) string { return "SELECT a" + strings.Repeat(" IS NULL LIKE b", k) },
		"in-concat":  func(k int) string { return "SELECT a" + strings.Repeat(" IN (1) || b", k) },
		"left-chain": func(k int) string { return "SELECT a" + strings.Repeat(" - a", k) },
		"right-nest": func(k int) string { return "SELECT " + strings.Repeat("a - (", k) + "a" + strings.Repeat(")", k) },
		"cast":       func(k int) string { return "SELECT (-a)" + strings.Repeat("::int", k) },
		"subquery":   func(k int) string { return "SELECT " + strings.Repeat("(SELECT ", k) + "1" + strings.Repeat(")", k) },
		"derived": func(k int) string {
			return "SELECT * FROM " + strings.Repeat("(SELECT * FROM ", k) + "t" + strings.Repeat(")", k)
		},
		"join-right": func(k int) string {
			from := "c"
			for i := 0; i < k; i++ {
				from = "b JOIN (" + from + ") ON true"
			}
			return "SELECT * FROM " + from
		},
		"between": func(k int) string {
			return "SELECT " + strings.Repeat("a BETWEEN (", k) + "a" + strings.Repeat(") AND b", k)
		},
		"call": func(k int) string { return "SELECT " + strings.Repeat("f(", k) + "1" + strings.Repeat(")", k) },
		"case": func(k int) string {
			return "SELECT " + strings.Repeat("CASE WHEN a THEN ", k) + "1" + strings.Repeat(" END", k)
		},
		"exists": func(k int) string {
			return "SELECT " + strings.Repeat("EXISTS (SELECT ", k) + "1" + strings.Repeat(")", k)
		},
	}
	for name, shape := range shapes {
		t.Run(name, func(t *testing.T) {
			// Binary search for the deepest instance that parses.
			lo, hi := 1, MaxDepth+1 // shape(lo) parses, shape(hi) does not
			if _, err := Parse(shape(lo)); err != nil {
				t.Fatalf("shape(1) does not parse: %s", describe(err))
			}
			for hi-lo > 1 {
				mid := (lo + hi) / 2
				if _, err := Parse(shape(mid)); err == nil {
					lo = mid
				} else {
					hi = mid
				}
			}
			stmt := mustParse(t, shape(lo))
			if _, stats, _ := parseAll(shape(lo)); stats.badBound {
				t.Fatalf("the parser's lower bound of the height exceeds the height")
			}
			if h := height(stmt); h < MaxDepth-3 {
				t.Fatalf("deepest accepted tree has height %d, want about %d", h, MaxDepth)
			}
			text := stmt.String()
			again, err := Parse(text)
			if err != nil {
				t.Fatalf("rendering of a tree within MaxDepth fails to parse: %s", describe(err))
			}
			if again.String() != text || !equalIgnoringPos(stmt, again) {
				t.Fatalf("rendering parses to a different tree")
			}
		})
	}
}

// insertSQL is a writer's INSERT of rows rows of three values.
func insertSQL(rows int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO shaped VALUES ")
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "(%d,%d,'%d-%s')", i%100, i, 1700000000000000000+i, strings.Repeat("x", 43))
	}
	return b.String()
}

// TestParseInsertAllocates: parsing a 10-row INSERT, as a writer sends
// many a second, allocates its AST and little else: the tokens' slice is
// reused from parse to parse, a string constant is one allocation, and
// the height check keeps no slice per node (120 allocations before).
func TestParseInsertAllocates(t *testing.T) {
	src := insertSQL(10)
	if _, err := Parse(src); err != nil {
		t.Fatal(err)
	}
	const limit = 80 // the AST's nodes and lists are some 60
	if got := testing.AllocsPerRun(100, func() { _, _ = Parse(src) }); got > limit {
		t.Errorf("parsing a 10-row INSERT: %v allocations, want at most %d", got, limit)
	}
}

func BenchmarkParseInsert(b *testing.B) {
	src := insertSQL(10)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseTooDeep measures what a statement rejected by the depth
// limit costs: "SELECT 1+1+...+1" of a given size, one chain far deeper
// than MaxDepth. The parser gives up once the limit is passed, so the
// cost does not grow with the size.
func BenchmarkParseTooDeep(b *testing.B) {
	for _, size := range []int{64 << 10, 2 << 20} {
		src := "SELECT 1" + strings.Repeat("+1", size/2)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := Parse(src); err == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}
