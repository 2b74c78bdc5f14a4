package sql

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestErrors(t *testing.T) {
	tests := []struct {
		sql  string
		code string
		msg  string
		pos  int
	}{
		// Syntax errors name the token, or the end of input, at its 1-based
		// character position, as Postgres does.
		{"SELEC 1", CodeSyntaxError, `syntax error at or near "SELEC"`, 1},
		{"SELECT 1 +", CodeSyntaxError, "syntax error at end of input", 11},
		{"SELECT * FORM t", CodeSyntaxError, `syntax error at or near "FORM"`, 10},
		{"SELECT é FROM", CodeSyntaxError, "syntax error at end of input", 14},
		{"SELECT 'é' 'x'", CodeSyntaxError, `syntax error at or near "'x'"`, 12},
		{"SELECT a < b < c", CodeSyntaxError, `syntax error at or near "<"`, 14},
		{"SELECT 1 = = 2", CodeSyntaxError, `syntax error at or near "="`, 12},
		{"SELECT a LIKE b LIKE c", CodeSyntaxError, `syntax error at or near "LIKE"`, 17},
		{"SELECT * FROM select", CodeSyntaxError, `syntax error at or near "select"`, 15},
		{"SELECT * FROM t WHERE", CodeSyntaxError, "syntax error at end of input", 22},
		{"SELECT 1; SELEC 2", CodeSyntaxError, `syntax error at or near "SELEC"`, 11},
		{"BEGIN; SELECT (", CodeSyntaxError, "syntax error at end of input", 16},
		{"SELECT a.b.c.d.e", CodeSyntaxError, "improper qualified name (too many dotted names): a.b.c.d.e", 8},
		{"SELECT 1 AS", CodeSyntaxError, "syntax error at end of input", 12},
		{"VALUES (1), (2, 3)", CodeSyntaxError, "VALUES lists must all be the same length", 13},
		{"VALUES ()", CodeSyntaxError, `syntax error at or near ")"`, 9},
		{"VALUES", CodeSyntaxError, "syntax error at end of input", 7},
		{"CREATE VIEW v AS VALUES (1) AS OF 5", CodeSyntaxError, `syntax error at or near "AS"`, 29},
		{"SELECT f(1,)", CodeSyntaxError, `syntax error at or near ")"`, 12},
		{"SELECT x IN ()", CodeSyntaxError, `syntax error at or near ")"`, 14},
		{"SELECT CASE END", CodeSyntaxError, `syntax error at or near "END"`, 13},
		{"SELECT a ?| b", CodeSyntaxError, `syntax error at or near "?|"`, 10},
		{"SELECT {", CodeSyntaxError, `syntax error at or near "{"`, 8},
		{"CREATE TABLE t (a int NULL NOT NULL)", CodeSyntaxError, `conflicting NULL/NOT NULL declarations for column "a" of table "t"`, 17},
		{"CREATE TABLE t (a)", CodeSyntaxError, `syntax error at or near ")"`, 18},
		{"CREATE ROLE r CONNECTION LIMIT 1.5", CodeSyntaxError, `syntax error at or near "1.5"`, 32},
		{"ALTER ROLE r CONNECTION LIMIT = 2", CodeSyntaxError, `syntax error at or near "="`, 31},
		{"ALTER ROLE r CONNECTION LIMIT", CodeSyntaxError, "syntax error at end of input", 30},
		{"SUBSCRIBE t ENVELOPE UPSERT (KEY (a)) WITHIN TIMESTAMP ORDER BY a", CodeSyntaxError, "only one of ENVELOPE and WITHIN TIMESTAMP ORDER BY may be given", 39},
		{"SUBSCRIBE t ENVELOPE UPSERT (KEY (a)) AS OF 1 ENVELOPE UPSERT (KEY (a))", CodeSyntaxError, "only one of ENVELOPE and WITHIN TIMESTAMP ORDER BY may be given", 47},
		{"SUBSCRIBE t ENVELOPE UPSERT (a)", CodeSyntaxError, `syntax error at or near "a"`, 30},
		{"SUBSCRIBE t WITH (FOO)", CodeSyntaxError, `option "foo" not recognized`, 19},
		{"SUBSCRIBE [x12 AS t]", CodeSyntaxError, "invalid id x12", 12},
		{"SUBSCRIBE [u AS t]", CodeSyntaxError, "invalid id u", 12},
		{"SUBSCRIBE [u12 t]", CodeSyntaxError, `syntax error at or near "t"`, 16},
		{"SUBSCRIBE t WITH ()", CodeSyntaxError, `syntax error at or near ")"`, 19},
		{"SUBSCRIBE t WITH (SNAPSHOT =)", CodeSyntaxError, `syntax error at or near ")"`, 29},
		{"SUBSCRIBE t AS OF 1 WITH (PROGRESS)", CodeSyntaxError, `syntax error at or near "WITH"`, 21},
		{"SUBSCRIBE t ENVELOPE UPSERT (KEY (a)) WITH (PROGRESS) WITHIN TIMESTAMP ORDER BY a", CodeSyntaxError, "only one of ENVELOPE and WITHIN TIMESTAMP ORDER BY may be given", 55},
		{"SUBSCRIBE t WITH (PROGRESS) WITHIN TIMESTAMP ORDER BY a AS OF 1 ENVELOPE UPSERT (KEY (a))", CodeSyntaxError, "only one of ENVELOPE and WITHIN TIMESTAMP ORDER BY may be given", 65},
		{"SUBSCRIBE t WITH (PROGRESS) WITHIN TIMESTAMP ORDER BY a WITH (SNAPSHOT)", CodeSyntaxError, `syntax error at or near "WITH"`, 57},
		{"COPY t TO STDIN", CodeSyntaxError, `syntax error at or near "STDIN"`, 11},
		{"COPY (SELECT 1) FROM STDIN", CodeSyntaxError, `syntax error at or near "FROM"`, 17},
		{"COPY t FROM STDIN WITH (FORMAT csv, BOGUS 1)", CodeSyntaxError, `option "bogus" not recognized`, 37},
		{"CREATE SOURCE s FROM LOAD GENERATOR COUNTER (TICK 1)", CodeSyntaxError, `option "tick" not recognized`, 46},
		{"FETCH 99999999999999999999 c", CodeSyntaxError, `invalid FETCH count at or near "99999999999999999999"`, 7},
		{"GRANT SELECT, ALL ON t TO r", CodeSyntaxError, `syntax error at or near "ALL"`, 15},
		{"BEGIN ISOLATION LEVEL SERIALIZABLE, ISOLATION LEVEL SERIALIZABLE", CodeSyntaxError, "conflicting or redundant options", 37},
		{"SET x", CodeSyntaxError, "syntax error at end of input", 6},
		// An option repeated in a parenthesized list, as Materialize rejects it.
		{"SUBSCRIBE h WITH (PROGRESS, PROGRESS)", CodeSyntaxError, "PROGRESS specified more than once", 29},
		{"SUBSCRIBE h WITH (SNAPSHOT = false, PROGRESS, snapshot)", CodeSyntaxError, "SNAPSHOT specified more than once", 47},
		{"DECLARE c CURSOR FOR SUBSCRIBE h WITH (PROGRESS = true, PROGRESS = false)", CodeSyntaxError, "PROGRESS specified more than once", 57},
		{"FETCH 1 c WITH (TIMEOUT = '1s', TIMEOUT = '2s')", CodeSyntaxError, "TIMEOUT specified more than once", 33},
		{"COPY t TO STDOUT WITH (FORMAT csv, HEADER, FORMAT text)", CodeSyntaxError, "FORMAT specified more than once", 44},
		{"CREATE SOURCE s FROM LOAD GENERATOR COUNTER (TICK INTERVAL '1s', TICK INTERVAL '2s')", CodeSyntaxError, "TICK INTERVAL specified more than once", 66},
		{"CREATE TABLE t (a int) WITH (RETAIN HISTORY FOR '1h', RETAIN HISTORY FOR '2h')", CodeSyntaxError, "RETAIN HISTORY specified more than once", 55},
		{"ALTER VIEW v RESET (RETAIN HISTORY, RETAIN HISTORY)", CodeSyntaxError, "RETAIN HISTORY specified more than once", 37},
		// A role attribute set twice, as PostgreSQL rejects it.
		{"CREATE ROLE r LOGIN LOGIN", CodeSyntaxError, "conflicting or redundant options", 21},
		{"CREATE ROLE r WITH LOGIN PASSWORD 'a' NOLOGIN", CodeSyntaxError, "conflicting or redundant options", 39},
		{"ALTER ROLE r PASSWORD 'a' PASSWORD 'b'", CodeSyntaxError, "conflicting or redundant options", 27},
		{"ALTER ROLE r CONNECTION LIMIT 1 CONNECTION LIMIT 2", CodeSyntaxError, "conflicting or redundant options", 33},

		// Lexical errors point at the start of the bad token and quote the
		// rest of the input, like Postgres.
		{"SELECT 'abc", CodeSyntaxError, `unterminated quoted string at or near "'abc"`, 8},
		{`SELECT "abc`, CodeSyntaxError, `unterminated quoted identifier at or near "\"abc"`, 8},
		{"SELECT /* x", CodeSyntaxError, `unterminated /* comment at or near "/* x"`, 8},
		{"SELECT /* a /* b */", CodeSyntaxError, `unterminated /* comment at or near "/* a /* b */"`, 8},
		{"SELECT $$abc", CodeSyntaxError, `unterminated dollar-quoted string at or near "$$abc"`, 8},
		{`SELECT ""`, CodeSyntaxError, `zero-length delimited identifier at or near """"`, 8},
		{"SELECT $99999999999", CodeSyntaxError, `parameter number too large at or near "$99999999999"`, 8},
		{`SELECT E'\xff'`, CodeCharacterNotInRepertoire, `invalid byte sequence for encoding "UTF8": 0xff`, 8},
		{`SELECT E'\0'`, CodeCharacterNotInRepertoire, `invalid byte sequence for encoding "UTF8": 0x00`, 8},
		{"SELECT 'a\xff'", CodeCharacterNotInRepertoire, `invalid byte sequence for encoding "UTF8": 0xff`, 10},
		{"SELECT 'a\x00'", CodeCharacterNotInRepertoire, `invalid byte sequence for encoding "UTF8": 0x00`, 10},
		{`SELECT E'\u12'`, CodeInvalidEscapeSequence, "invalid Unicode escape", 8},
		{`SELECT E'\uD800x'`, CodeInvalidEscapeSequence, "invalid Unicode surrogate pair", 8},
		{`SELECT E'\U00110000'`, CodeInvalidEscapeSequence, "invalid Unicode escape value", 8},
		{"SELECT x'1F'", CodeFeatureNotSupported, "bit-string literals not supported", 8},

		// Recognised but unsupported syntax is 0A000.
		{"CREATE INDEX i ON t (a)", CodeFeatureNotSupported, "CREATE INDEX not supported", 8},
		{"CREATE OR REPLACE VIEW v AS SELECT 1", CodeFeatureNotSupported, "CREATE OR REPLACE not supported", 8},
		{"DROP INDEX i", CodeFeatureNotSupported, "DROP INDEX not supported", 6},
		{"SELECT a FROM t UNION SELECT b FROM u", CodeFeatureNotSupported, "set operations (UNION, INTERSECT, EXCEPT) not supported", 17},
		{"VALUES (1) UNION VALUES (2)", CodeFeatureNotSupported, "set operations (UNION, INTERSECT, EXCEPT) not supported", 12},
		{"SELECT * FROM t AS x (a)", CodeFeatureNotSupported, "column aliases in FROM not supported", 22},
		{"WITH x AS (SELECT 1) SELECT * FROM x", CodeFeatureNotSupported, "WITH (common table expressions) not supported", 1},
		{"EXPLAIN SELECT 1", CodeFeatureNotSupported, "EXPLAIN not supported", 1},
		{"FETCH -1 c", CodeFeatureNotSupported, "FETCH with a negative count not supported", 7},
		{"FETCH BACKWARD 1 c", CodeFeatureNotSupported, "FETCH BACKWARD not supported", 7},
		{"DECLARE c CURSOR WITH HOLD FOR SELECT 1", CodeFeatureNotSupported, "WITH HOLD cursors not supported", 18},
		{"COPY t FROM '/tmp/x'", CodeFeatureNotSupported, "COPY to or from a file or program not supported", 13},
		{"INSERT INTO t VALUES (DEFAULT)", CodeFeatureNotSupported, "DEFAULT in expressions not supported", 23},
		{"INSERT INTO t VALUES (1) RETURNING *", CodeFeatureNotSupported, "RETURNING not supported", 26},
		{"SELECT count(*) OVER ()", CodeFeatureNotSupported, "window functions not supported", 17},
		{"SELECT x::interval day", CodeFeatureNotSupported, "interval qualifiers not supported", 20},
		{"SELECT ts AT TIME ZONE 'UTC'", CodeFeatureNotSupported, "AT TIME ZONE not supported", 11},
		{"SELECT ARRAY[1]", CodeFeatureNotSupported, "ARRAY not supported", 8},
		{"SELECT a[1]", CodeFeatureNotSupported, "array subscripts not supported", 9},
		{"SELECT (1, 2)", CodeFeatureNotSupported, "row constructors not supported", 10},
		{"CREATE TABLE t (a int PRIMARY KEY)", CodeFeatureNotSupported, "column constraint PRIMARY not supported", 23},
		{"CREATE SOURCE s FROM KAFKA CONNECTION k", CodeFeatureNotSupported, "sources other than LOAD GENERATOR not supported", 22},
		{"ALTER TABLE t RENAME TO u", CodeFeatureNotSupported, "ALTER ... RENAME not supported", 15},
	}
	for _, tt := range tests {
		_, err := ParseAll(tt.sql)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("ParseAll(%q) = %v, want a *ParseError", tt.sql, err)
			continue
		}
		if pe.SQLState() != tt.code || pe.Message != tt.msg || pe.Position != tt.pos {
			t.Errorf("ParseAll(%q)\n got: %s %s at %d\nwant: %s %s at %d", tt.sql, pe.SQLState(), pe.Message, pe.Position, tt.code, tt.msg, tt.pos)
		}
		if pe.Error() != pe.Message {
			t.Errorf("Error() = %q, want the message", pe.Error())
		}
	}
}

func TestParseErrorSQLState(t *testing.T) {
	if got := (&ParseError{}).SQLState(); got != "42601" {
		t.Errorf("default SQLState = %q, want 42601", got)
	}
	var s interface{ SQLState() string } = &ParseError{Code: CodeFeatureNotSupported}
	if s.SQLState() != "0A000" {
		t.Errorf("SQLState = %q", s.SQLState())
	}
}

// TestIdentifierLength pins the bound on identifiers: MaxIdentifierLength
// bytes parse, one more is a syntax error at the identifier, whether it is
// quoted or not and whatever it names.
func TestIdentifierLength(t *testing.T) {
	max := strings.Repeat("a", MaxIdentifierLength)
	over := max + "a"
	// 128 two-byte runes: 256 bytes although only 128 characters.
	wide := strings.Repeat("é", 128)
	for _, ok := range []string{
		"CREATE TABLE " + max + " (a int)",
		`CREATE TABLE "` + strings.ToUpper(max) + `" (a int)`,
		`SELECT "` + strings.Repeat(`""`, MaxIdentifierLength) + `" FROM t`,
	} {
		if _, err := ParseAll(ok); err != nil {
			t.Errorf("ParseAll(%.40q...) = %v, want no error", ok, err)
		}
	}
	for _, tt := range []struct {
		sql string
		pos int
		len int
	}{
		{"CREATE TABLE " + over + " (a int)", 14, 256},
		{`CREATE TABLE "` + over + `" (a int)`, 14, 256},
		{"CREATE TABLE " + wide + " (a int)", 14, 256},
		{"CREATE TABLE t (" + over + " int)", 17, 256},
		{"SELECT * FROM t AS " + over, 20, 256},
		{"CREATE ROLE " + over, 13, 256},
		{"DECLARE " + over + " CURSOR FOR SELECT 1", 9, 256},
		{"SELECT 1; SELECT " + strings.Repeat("b", 1<<20), 18, 1 << 20},
		{`SELECT "` + strings.Repeat(`""`, MaxIdentifierLength+1) + `"`, 8, 256},
	} {
		_, err := ParseAll(tt.sql)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("ParseAll(%.40q...) = %v, want a *ParseError", tt.sql, err)
			continue
		}
		prefix := fmt.Sprintf("identifier is too long (len: %d, max: 255, value: ", tt.len)
		if pe.SQLState() != CodeSyntaxError || !strings.HasPrefix(pe.Message, prefix) || pe.Position != tt.pos {
			t.Errorf("ParseAll(%.40q...)\n got: %s %.80s at %d\nwant: %s %s... at %d", tt.sql, pe.SQLState(), pe.Message, pe.Position, CodeSyntaxError, prefix, tt.pos)
		}
		if len(pe.Message) > 2*MaxIdentifierLength+64 {
			t.Errorf("ParseAll(%.40q...): a %d-byte message echoes the whole name", tt.sql, len(pe.Message))
		}
	}
}
