package adapter_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// rawRows runs q (simple protocol) and renders each row's columns as text
// joined by spaces, NULL for NULL, in the order received.
func rawRows(ctx context.Context, c *pgx.Conn, q string) ([]string, error) {
	rows, err := c.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var parts []string
		for _, v := range rows.RawValues() {
			if v == nil {
				parts = append(parts, "NULL")
			} else {
				parts = append(parts, string(v))
			}
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out, rows.Err()
}

// columnNames returns the result columns q describes.
func columnNames(t *testing.T, c *pgx.Conn, q string) []string {
	t.Helper()
	rows, err := c.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for _, f := range rows.FieldDescriptions() {
		out = append(out, f.Name)
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

func wantRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// TestValuesQueries: VALUES is a query on its own and in FROM, with
// PostgreSQL's column names, in every protocol mode.
func TestValuesQueries(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec, pgx.QueryExecModeCacheStatement} {
		c := connectMode(t, s, mode)
		for _, tc := range []struct {
			q          string
			cols, want []string
		}{
			{"VALUES (1), (2)", []string{"column1"}, []string{"1", "2"}},
			{"VALUES ('a', 'b'), ('c', NULL)", []string{"column1", "column2"}, []string{"a|b", "c|<nil>"}},
			{"SELECT * FROM (VALUES (1, 'a')) AS x(a, b)", []string{"a", "b"}, []string{"1|a"}},
			{"SELECT b, a + 1 AS n FROM (VALUES (1, 'a'), (2, 'b'), (3, 'c')) AS x(a, b) WHERE a > 1", []string{"b", "n"}, []string{"b|3", "c|4"}},
			{"SELECT x.column2 FROM (VALUES (1, 'a')) x", []string{"column2"}, []string{"a"}},
			{"SELECT a, column2 FROM (VALUES (1, 'a')) AS x(a)", []string{"a", "column2"}, []string{"1|a"}},
			{"VALUES (3), (1), (2) ORDER BY 1 DESC LIMIT 2", []string{"column1"}, []string{"2", "3"}},
		} {
			wantRows(t, tc.q, queryRows(t, c, tc.q), tc.want)
			wantRows(t, tc.q+" (columns)", columnNames(t, c, tc.q), tc.cols)
		}
		// Order is kept without ORDER BY, as in PostgreSQL.
		got, err := rawRows(context.Background(), c, "VALUES (2), (1), (3)")
		if err != nil {
			t.Fatal(err)
		}
		wantRows(t, "VALUES order", got, []string{"2", "1", "3"})
		wantRows(t, "VALUES ($1)", queryRows(t, c, "SELECT * FROM (VALUES (1)) AS x(a) WHERE a = $1", 1), []string{"1"})
	}
	c := connect(t, s)
	ctx := context.Background()
	// A cursor over VALUES, and COPY of one.
	execAll(t, c, "BEGIN", "DECLARE v CURSOR FOR VALUES (1, 'a'), (2, 'b')")
	got, err := rawRows(ctx, c, "FETCH ALL v")
	if err != nil {
		t.Fatal(err)
	}
	wantRows(t, "FETCH ALL from a VALUES cursor", got, []string{"1 a", "2 b"})
	execAll(t, c, "COMMIT")
	var buf strings.Builder
	if _, err := c.PgConn().CopyTo(ctx, &buf, "COPY (VALUES (1, 'a'), (2, NULL)) TO STDOUT"); err != nil {
		t.Fatal(err)
	}
	if want := "1\ta\n2\t\\N\n"; buf.String() != want {
		t.Errorf("COPY (VALUES ...): got %q, want %q", buf.String(), want)
	}
	for _, tc := range []struct{ q, code string }{
		{"VALUES (1), ('x')", "22P02"},
		{"VALUES (1), (true)", "42804"},
		{"VALUES (1), (1, 2)", "42601"},
		{"SELECT * FROM (VALUES (1)) AS x(a, b)", "42P10"},
		{"CREATE MATERIALIZED VIEW m AS VALUES (1)", "0A000"},
	} {
		_, err := tryQueryRows(c, tc.q)
		wantCode(t, err, tc.code, tc.q)
	}
}

// TestConstantViewSubscribe: a view of a VALUES list plans, reads, and
// subscribes on both paths: its rows all at one timestamp, a FETCH without
// a count one row at a time, and then nothing, since the view never
// changes.
func TestConstantViewSubscribe(t *testing.T) {
	forPaths(t, func(t *testing.T, s *testserver.Server, flag string) {
		c := connect(t, s)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		execAll(t, c, "SET enable_subscribe_persist_fast_path = "+flag,
			"CREATE VIEW v AS VALUES ('a', 'b'), ('c', 'd')",
			"CREATE VIEW w (x) AS SELECT column2 FROM v WHERE column1 <> 'a'")
		wantRows(t, "SELECT * FROM v", queryRows(t, c, "SELECT * FROM v"), []string{"a|b", "c|d"})
		wantRows(t, "SELECT * FROM w", queryRows(t, c, "SELECT * FROM w"), []string{"d"})
		wantRows(t, "columns of v", columnNames(t, c, "SELECT * FROM v"), []string{"column1", "column2"})

		execAll(t, c, "BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE v")
		var got []string
		for range 2 {
			rows := fetch(t, ctx, c, "FETCH c WITH (TIMEOUT = '10s')")
			if len(rows) != 1 {
				t.Fatalf("FETCH without a count: got %q, want one row", rows)
			}
			got = append(got, rows...)
		}
		ts := strings.Fields(got[0])[0]
		for i, r := range got {
			f := strings.Fields(r)
			if f[0] != ts {
				t.Errorf("row %d at %s, want every row at %s", i, f[0], ts)
			}
			got[i] = strings.Join(f[1:], " ")
		}
		slices.Sort(got)
		wantRows(t, "SUBSCRIBE v", got, []string{"1 a b", "1 c d"})
		if rows := fetch(t, ctx, c, "FETCH c WITH (TIMEOUT = '1s')"); len(rows) != 0 {
			t.Errorf("FETCH after the view's rows: got %q, want none", rows)
		}
		execAll(t, c, "COMMIT")

		// PROGRESS and UP TO: the snapshot, its progress, then completion.
		for _, tc := range []struct {
			q    string
			want []string
		}{
			{"SUBSCRIBE v WITH (PROGRESS) AS OF 5 UP TO 7",
				[]string{"5 t NULL NULL NULL", "5 f 1 a b", "5 f 1 c d", "6 t NULL NULL NULL"}},
			{"SUBSCRIBE w AS OF 10 UP TO 11", []string{"10 1 d"}},
			{"SUBSCRIBE (SELECT x || '!' AS y FROM w) WITH (SNAPSHOT = false, PROGRESS) AS OF 3 UP TO 100",
				[]string{"3 t NULL NULL", "4 t NULL NULL"}},
			{"SUBSCRIBE (VALUES (1), (1), (2)) AS OF 0 UP TO 1", []string{"0 2 1", "0 1 2"}},
			{"SUBSCRIBE v AS OF 18446744073709551615 UP TO 18446744073709551615", nil},
		} {
			got, err := rawRows(ctx, c, tc.q)
			if err != nil {
				t.Errorf("%s: %v", tc.q, err)
				continue
			}
			wantRows(t, tc.q, got, tc.want)
		}
		_, err := rawRows(ctx, c, "SUBSCRIBE v AS OF 18446744073709551615 UP TO 1")
		wantCode(t, err, "22000", "constant view UP TO < AS OF")

		// A cursor's errors surface at its first FETCH: the view is gone.
		d := connect(t, s)
		execAll(t, d, "CREATE VIEW gone AS VALUES (1)", "BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE gone")
		execAll(t, c, "DROP VIEW gone")
		_, err = fetchErr(ctx, d, "FETCH c")
		wantCode(t, err, "42704", "FETCH from a dropped constant view")

		// w reads v: v cannot be dropped alone.
		_, err = c.Exec(ctx, "DROP VIEW v")
		wantCode(t, err, "2BP01", "DROP VIEW v with a dependent")
		execAll(t, c, "DROP VIEW w", "DROP VIEW v")
	})
}
