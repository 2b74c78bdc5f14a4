package adapter_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// Column type modifiers through pgx: varchar(n) and numeric(p, s) hold on
// every write path (INSERT's VALUES and parameters, INSERT ... SELECT,
// UPDATE, COPY FROM in each format) with PostgreSQL's assignment rules,
// a bad row fails the whole statement, and RowDescription, SHOW COLUMNS
// and SHOW CREATE TABLE report the modifiers.

// Typmods as PostgreSQL encodes varchar(3) and numeric(5, 2).
const (
	typmodVarchar3   = 3 + 4
	typmodNumeric5_2 = (5<<16 | 2) + 4
)

func TestColumnTypeModifiers(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	for i, m := range execModes {
		t.Run(m.name, func(t *testing.T) {
			c := connectMode(t, s, m.mode)
			tbl := fmt.Sprintf("vc%d", i)
			mustExec(t, c, "CREATE TABLE "+tbl+" (v varchar(3), n numeric(5,2))")
			contents := func() []string {
				t.Helper()
				return queryRows(t, c, "SELECT v, n::text FROM "+tbl)
			}
			fail := func(code, q string, args ...any) {
				t.Helper()
				_, err := c.Exec(ctx, q, args...)
				wantCode(t, err, code, q)
			}

			// The QA repro: each statement fails and stores nothing. The
			// checks go on after a failure, so that each write path
			// reports its own.
			fail("22001", "INSERT INTO "+tbl+" VALUES ('abcdef', 2.345)")
			fail("22003", "INSERT INTO "+tbl+" VALUES ('abc', 1000)")
			fail("22001", "INSERT INTO "+tbl+" VALUES ('ab', 1), ('abcd', 1)")
			fail("22001", "INSERT INTO "+tbl+" (v) VALUES ($1)", "abcd")
			fail("22003", "INSERT INTO "+tbl+" (n) VALUES ($1)", "999.995")
			if got := contents(); len(got) != 0 {
				t.Errorf("failed INSERTs stored %q", got)
			}

			// Numeric rounds to the scale; trailing spaces past the
			// length are cut; an explicit cast truncates.
			mustExec(t, c, "INSERT INTO "+tbl+" VALUES ('abc', 2.345), ('ab    ', -2.345), ('abcdef'::varchar(3), 999.994)")
			if _, err := c.Exec(ctx, "INSERT INTO "+tbl+" VALUES ($1, $2)", "xy", "1.005"); err != nil {
				t.Fatalf("INSERT with parameters: %v", err)
			}
			want := []string{"ab |-2.35", "abc|2.35", "abc|999.99", "xy|1.01"}
			if got := contents(); !reflect.DeepEqual(got, want) {
				t.Errorf("after INSERT: got %q, want %q", got, want)
			}

			// UPDATE: a bad value in any row changes no row.
			fail("22003", "UPDATE "+tbl+" SET n = 9999.999")
			fail("22003", "UPDATE "+tbl+" SET n = n * 100")
			fail("22001", "UPDATE "+tbl+" SET v = v || 'z'")
			fail("22001", "UPDATE "+tbl+" SET v = $1 WHERE n > $2", "wxyz", "0")
			if got := contents(); !reflect.DeepEqual(got, want) {
				t.Errorf("after failed UPDATEs: got %q, want %q", got, want)
			}
			if _, err := c.Exec(ctx, "UPDATE "+tbl+" SET n = n + $1, v = 'q' WHERE v = 'xy'", "0.004"); err != nil {
				t.Fatalf("UPDATE: %v", err)
			}
			want = []string{"ab |-2.35", "abc|2.35", "abc|999.99", "q|1.01"}
			if got := contents(); !reflect.DeepEqual(got, want) {
				t.Errorf("after UPDATE: got %q, want %q", got, want)
			}

			// INSERT ... SELECT assigns too.
			fail("22001", "INSERT INTO "+tbl+" SELECT v || 'zz', n FROM "+tbl)
			mustExec(t, c, "INSERT INTO "+tbl+" SELECT v, n / 3 FROM "+tbl+" WHERE v = 'q'")
			want = []string{"ab |-2.35", "abc|2.35", "abc|999.99", "q|0.34", "q|1.01"}
			if got := contents(); !reflect.DeepEqual(got, want) {
				t.Errorf("after INSERT ... SELECT: got %q, want %q", got, want)
			}

			// RowDescription: a column keeps its modifier, a cast has its
			// own, an expression has none.
			rows, err := c.Query(ctx, "SELECT v, n, n::numeric(7,1) AS c, v || '' AS e FROM "+tbl)
			if err != nil {
				t.Fatal(err)
			}
			var mods []int32
			for _, f := range rows.FieldDescriptions() {
				mods = append(mods, f.TypeModifier)
			}
			rows.Close()
			if want := []int32{typmodVarchar3, typmodNumeric5_2, (7<<16 | 1) + 4, -1}; !reflect.DeepEqual(mods, want) {
				t.Errorf("SELECT typmods %v, want %v", mods, want)
			}
		})
	}
}

func TestColumnTypeModifiersCopyFrom(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeCacheStatement)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE vc (v varchar(3), n numeric(5,2))")
	pc := c.PgConn()
	contents := func() []string {
		t.Helper()
		return queryRows(t, c, "SELECT v, n::text FROM vc")
	}
	for _, tc := range []struct{ name, data, stmt, code string }{
		{"TextTooLong", "ok\t1\nabcdef\t1\n", "COPY vc FROM STDIN", "22001"},
		{"TextOverflow", "ok\t1\nok\t1000\n", "COPY vc FROM STDIN", "22003"},
		{"CSVTooLong", "ok,1\nabcd,1\n", "COPY vc FROM STDIN (FORMAT csv)", "22001"},
		{"CSVOverflow", "ok,1\nok,999.999\n", "COPY vc FROM STDIN (FORMAT csv)", "22003"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pc.CopyFrom(ctx, strings.NewReader(tc.data), tc.stmt)
			wantCode(t, err, tc.code, tc.stmt)
		})
	}
	t.Run("BinaryTooLong", func(t *testing.T) {
		_, err := c.CopyFrom(ctx, pgx.Identifier{"vc"}, []string{"v"}, pgx.CopyFromRows([][]any{{"ok"}, {"abcd"}}))
		wantCode(t, err, "22001", "binary COPY")
	})
	if got := contents(); len(got) != 0 {
		t.Errorf("failed COPYs stored %q", got)
	}
	if _, err := pc.CopyFrom(ctx, strings.NewReader("abc\t1.23456\nab  \t-0.005\n"), "COPY vc FROM STDIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.CopyFrom(ctx, strings.NewReader("x,999.994\n"), "COPY vc FROM STDIN (FORMAT csv)"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CopyFrom(ctx, pgx.Identifier{"vc"}, []string{"v", "n"}, pgx.CopyFromRows([][]any{{"y", "3.14159"}})); err != nil {
		t.Fatal(err)
	}
	want := []string{"ab |-0.01", "abc|1.23", "x|999.99", "y|3.14"}
	if got := contents(); !reflect.DeepEqual(got, want) {
		t.Errorf("after COPY: got %q, want %q", got, want)
	}
	// In a transaction the bad row fails the COPY at once.
	mustExec(t, c, "BEGIN")
	_, err := pc.CopyFrom(ctx, strings.NewReader("toolong\t1\n"), "COPY vc FROM STDIN")
	wantCode(t, err, "22001", "COPY in a transaction")
	mustExec(t, c, "ROLLBACK")
	if got := contents(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the failed COPY in a transaction: got %q, want %q", got, want)
	}
}

func TestColumnTypeModifiersDescribed(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeCacheStatement)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE vc (v varchar(3), n numeric(5,2) NOT NULL, ts timestamp(0), f float(24), t text)")
	want := []string{
		"f|true|real|", "n|false|numeric(5,2)|", "ts|true|timestamp(0) without time zone|",
		"t|true|text|", "v|true|character varying(3)|",
	}
	if got := queryRows(t, c, "SHOW COLUMNS FROM vc"); !reflect.DeepEqual(got, want) {
		t.Errorf("SHOW COLUMNS: got %q, want %q", got, want)
	}
	wantCreate := []string{`materialize.public.vc|CREATE TABLE materialize.public.vc (v character varying(3), n numeric(5,2) NOT NULL, ts timestamp(0) without time zone, f real, t text)`}
	if got := queryRows(t, c, "SHOW CREATE TABLE vc"); !reflect.DeepEqual(got, wantCreate) {
		t.Errorf("SHOW CREATE TABLE: got %q, want %q", got, wantCreate)
	}
	mustExec(t, c, "INSERT INTO vc VALUES ('abc', 1.005, '2026-01-02 03:04:05.6', 1, 'x')")
	if got, want := queryRows(t, c, "SELECT ts FROM vc"), []string{"2026-01-02 03:04:06 +0000 UTC"}; !reflect.DeepEqual(got, want) {
		t.Errorf("timestamp(0): got %q, want %q", got, want)
	}
	_, err := c.Exec(ctx, "CREATE TABLE bad (v varchar(0))")
	wantCode(t, err, "22023", "varchar(0)")

	// SUBSCRIBE's relation columns carry their modifiers too.
	var at uint64
	if err := c.QueryRow(ctx, "SELECT mz_now()::text::int8 FROM vc LIMIT 1").Scan(&at); err != nil {
		t.Fatal(err)
	}
	rows, err := c.Query(ctx, fmt.Sprintf("SUBSCRIBE (SELECT v, n, t FROM vc) AS OF %d UP TO %d", at, at+1))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int32{}
	for _, f := range rows.FieldDescriptions() {
		got[f.Name] = f.TypeModifier
	}
	for rows.Next() {
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wantMods := map[string]int32{"mz_timestamp": -1, "mz_diff": -1, "v": typmodVarchar3, "n": typmodNumeric5_2, "t": -1}
	if !reflect.DeepEqual(got, wantMods) {
		t.Errorf("SUBSCRIBE typmods %v, want %v", got, wantMods)
	}
}

// SHOW CREATE TABLE's statement creates the same table when run again:
// a table name that needs quotes is quoted, as its columns' names are.
func TestShowCreateTableQuotesName(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeCacheStatement)
	mustExec(t, c, `CREATE TABLE "Mixed Case" ("Col A" int)`)
	want := []string{`materialize.public.Mixed Case|CREATE TABLE materialize.public."Mixed Case" ("Col A" integer)`}
	if got := queryRows(t, c, `SHOW CREATE TABLE "Mixed Case"`); !reflect.DeepEqual(got, want) {
		t.Errorf("SHOW CREATE TABLE: got %q, want %q", got, want)
	}
}
