package adapter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgproto3/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/shardtail/shardtail/internal/testsupport/clients"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/pgwire"
)

// Real clients against a real server on loopback: psql, pgx (simple and
// extended protocol, text and binary formats, COPY), node-postgres and
// psycopg2 each connect, create, insert, query and get errors with the right
// SQLSTATE; then the SQL surface of the issue (auth, privileges, error codes,
// session variables, transactions, SHOW, ALTER, load generators, DROP,
// UPDATE/DELETE), each through pgx. A missing client fails its test: the CI
// script installs every one of them.

// Helpers shared by the adapter's client tests.

// pgCode returns the SQLSTATE of a server error, or "" when err is not one.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// wantCode fails unless err is a server error with SQLSTATE code.
func wantCode(t testing.TB, err error, code, what string) *pgconn.PgError {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Errorf("%s: got error %v, want SQLSTATE %s", what, err, code)
		return nil
	}
	if pe.Code != code {
		t.Errorf("%s: got SQLSTATE %s (%s), want %s", what, pe.Code, pe.Message, code)
	}
	return pe
}

// mustExec runs statements one by one and fails on the first error.
func mustExec(t testing.TB, c *pgx.Conn, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := c.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// queryRows runs q and returns its rows rendered as "v1|v2|...", sorted.
func queryRows(t testing.TB, c *pgx.Conn, q string, args ...any) []string {
	t.Helper()
	got, err := tryQueryRows(c, q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return got
}

func tryQueryRows(c *pgx.Conn, q string, args ...any) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = fmt.Sprint(v)
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// connectWith opens a pgx connection as user (with password, if any) in the
// given default execution mode.
func connectWith(t testing.TB, s *testserver.Server, user, password string, mode pgx.QueryExecMode) (*pgx.Conn, error) {
	t.Helper()
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s/materialize?sslmode=disable&connect_timeout=10", s.Addr))
	if err != nil {
		t.Fatal(err)
	}
	// Set, not in the URL: a role name may hold any character.
	cfg.User, cfg.Password = user, password
	cfg.DefaultQueryExecMode = mode
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c, nil
}

func connectMode(t testing.TB, s *testserver.Server, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	c, err := connectWith(t, s, "materialize", "", mode)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls f until it returns nil or the deadline passes, and returns
// f's last error.
func waitFor(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// psql

func TestClientPsql(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	for _, tc := range []struct {
		name   string
		stdin  string
		cmds   []string
		stdout string
		stderr string // substring; "" wants none
		code   int
	}{
		{name: "CreateInsertSelect", cmds: []string{
			"CREATE TABLE pt (a int8 NOT NULL, b text)",
			"INSERT INTO pt VALUES (1, 'one'), (2, 'two'), (3, NULL)",
			"SELECT a, b FROM pt ORDER BY a"},
			stdout: "CREATE TABLE\nINSERT 0 3\n1|one\n2|two\n3|\n"},
		{name: "CopyFromStdin", stdin: "4\tfour\n5\t\\N\n\\.\n", cmds: []string{"COPY pt FROM STDIN", "SELECT a FROM pt WHERE a > 3 ORDER BY a"},
			stdout: "COPY 2\n4\n5\n"},
		{name: "CopyToStdout", cmds: []string{"COPY (SELECT a, b FROM pt WHERE a < 3 ORDER BY a) TO STDOUT"},
			stdout: "1\tone\n2\ttwo\n"},
		{name: "Transaction", cmds: []string{"BEGIN", "INSERT INTO pt VALUES (10, 'rolled back')", "ROLLBACK",
			"BEGIN", "INSERT INTO pt VALUES (11, 'committed')", "COMMIT", "SELECT a FROM pt WHERE a >= 10"},
			stdout: "BEGIN\nINSERT 0 1\nROLLBACK\nBEGIN\nINSERT 0 1\nCOMMIT\n11\n"},
		{name: "UnknownRelation", cmds: []string{"SELECT * FROM nope"}, code: 1,
			stderr: "ERROR:  42P01: unknown catalog item 'nope'"},
		{name: "UnknownColumn", cmds: []string{"SELECT nope FROM pt"}, code: 1, stderr: "ERROR:  42703: "},
		{name: "DuplicateTable", cmds: []string{"CREATE TABLE pt (a int)"}, code: 1, stderr: "ERROR:  42P07: "},
		{name: "TypeMismatch", cmds: []string{"INSERT INTO pt VALUES (true, 'x')"}, code: 1, stderr: "ERROR:  42804: "},
		{name: "InvalidText", cmds: []string{"SELECT a FROM pt WHERE a = 'zz'"}, code: 1,
			stderr: `ERROR:  22P02: invalid input syntax for type bigint: "zz"`},
		// psql prints LINE/caret only when the ErrorResponse has a position.
		{name: "SyntaxErrorPosition", cmds: []string{"SELECT a FROM pt WHERE"}, code: 1,
			stderr: "ERROR:  42601: syntax error at end of input\nLINE 1: SELECT a FROM pt WHERE\n                              ^"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "SyntaxErrorPosition" {
			}
			host, port := s.HostPort()
			res := clients.Psql(t, clients.Conn{Host: host, Port: port}, tc.stdin, []string{"-v", "VERBOSITY=verbose"}, tc.cmds...)
			if res.Code != tc.code || res.Stdout != tc.stdout || (tc.stderr == "" && res.Stderr != "") || !strings.Contains(res.Stderr, tc.stderr) {
				t.Errorf("psql %q:\nexit %d, stdout %q, stderr %q\nwant exit %d, stdout %q, stderr containing %q",
					tc.cmds, res.Code, res.Stdout, res.Stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// pgx

// execModes are the pgx execution modes: the simple protocol and the three
// shapes of the extended protocol.
var execModes = []struct {
	name string
	mode pgx.QueryExecMode
}{
	{"Simple", pgx.QueryExecModeSimpleProtocol},
	{"Extended", pgx.QueryExecModeCacheStatement},
	{"ExtendedDescribe", pgx.QueryExecModeDescribeExec},
	{"ExtendedExec", pgx.QueryExecModeExec},
}

func TestClientPgx(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	for i, m := range execModes {
		t.Run(m.name, func(t *testing.T) {
			c := connectMode(t, s, m.mode)
			tbl := fmt.Sprintf("px%d", i)
			mustExec(t, c, fmt.Sprintf("CREATE TABLE %s (a int8 NOT NULL, b text, f float8, ok bool)", tbl))
			for k := range 3 {
				tag, err := c.Exec(ctx, fmt.Sprintf("INSERT INTO %s VALUES ($1, $2, $3, $4)", tbl), int64(k), fmt.Sprintf("r'%d", k), float64(k)+0.5, k%2 == 0)
				if err != nil {
					t.Fatal(err)
				}
				if tag.String() != "INSERT 0 1" {
					t.Errorf("tag %q", tag)
				}
			}
			want := []string{"0|r'0|0.5|true", "1|r'1|1.5|false", "2|r'2|2.5|true"}
			if got := queryRows(t, c, "SELECT a, b, f, ok FROM "+tbl); !reflect.DeepEqual(got, want) {
				t.Errorf("SELECT: got %q, want %q", got, want)
			}
			if got := queryRows(t, c, "SELECT a FROM "+tbl+" WHERE a >= $1 AND b <> $2", int64(1), "r'2"); !reflect.DeepEqual(got, []string{"1"}) {
				t.Errorf("SELECT with parameters: got %q", got)
			}
			// Result formats: the extended protocol lets the client choose.
			if m.mode != pgx.QueryExecModeSimpleProtocol {
				for _, f := range []int16{pgx.TextFormatCode, pgx.BinaryFormatCode} {
					var a int64
					var b string
					var fl float64
					var ok bool
					err := c.QueryRow(ctx, "SELECT a, b, f, ok FROM "+tbl+" WHERE a = $1", pgx.QueryResultFormats{f}, int64(1)).Scan(&a, &b, &fl, &ok)
					if err != nil || a != 1 || b != "r'1" || fl != 1.5 || ok {
						t.Errorf("format %d: got %d %q %v %v, err %v", f, a, b, fl, ok, err)
					}
				}
			}
			_, err := c.Exec(ctx, "SELECT * FROM nope")
			wantCode(t, err, "42P01", "unknown relation")
			_, err = c.Exec(ctx, "SELECT zz FROM "+tbl)
			wantCode(t, err, "42703", "unknown column")
			// The connection is still usable after errors.
			if got := queryRows(t, c, "SELECT a FROM "+tbl+" WHERE a = 0"); len(got) != 1 {
				t.Errorf("after errors: %q", got)
			}
		})
	}
}

// TestClientPgxTypes round-trips every supported column type through pgx,
// in binary and text result formats.
func TestClientPgxTypes(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	ts := time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC)
	day := time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)
	const uuid = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
	for i, m := range execModes {
		t.Run(m.name, func(t *testing.T) {
			c := connectMode(t, s, m.mode)
			tbl := fmt.Sprintf("ty%d", i)
			mustExec(t, c, "CREATE TABLE "+tbl+" (i int8, i4 int4, i2 int2, f float8, n numeric, b bool, s text, by bytea, ts timestamptz, d date, j jsonb, u uuid)")
			_, err := c.Exec(ctx, "INSERT INTO "+tbl+" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
				int64(-42), int32(7), int16(3), 2.25, "12.345", true, "héllo\tworld", []byte{0, 1, 2, 255}, ts, day, `{"k": 1}`, uuid)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Exec(ctx, "INSERT INTO "+tbl+" (i) VALUES ($1)", nil)
			if err != nil {
				t.Fatalf("NULL parameter: %v", err)
			}
			formats := []int16{pgx.TextFormatCode, pgx.BinaryFormatCode}
			if m.mode == pgx.QueryExecModeSimpleProtocol {
				formats = formats[:1]
			}
			for _, f := range formats {
				var (
					i8   int64
					i4   int32
					i2   int16
					fl   float64
					n    float64
					b    bool
					str  string
					by   []byte
					gotT time.Time
					gotD time.Time
					j    map[string]any
					u    string
				)
				err := c.QueryRow(ctx, "SELECT i, i4, i2, f, n, b, s, by, ts, d, j, u FROM "+tbl+" WHERE i IS NOT NULL", pgx.QueryResultFormats{f}).
					Scan(&i8, &i4, &i2, &fl, &n, &b, &str, &by, &gotT, &gotD, &j, &u)
				if err != nil {
					t.Fatalf("format %d: %v", f, err)
				}
				got := []any{i8, i4, i2, fl, n, b, str, by, gotT.UTC(), gotD, j, u}
				want := []any{int64(-42), int32(7), int16(3), 2.25, 12.345, true, "héllo\tworld", []byte{0, 1, 2, 255}, ts, day, map[string]any{"k": 1.0}, uuid}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("format %d:\n got %v\nwant %v", f, got, want)
				}
				var null *int32
				if err := c.QueryRow(ctx, "SELECT i4 FROM "+tbl+" WHERE i IS NULL", pgx.QueryResultFormats{f}).Scan(&null); err != nil || null != nil {
					t.Errorf("format %d: NULL row: %v %v", f, null, err)
				}
			}
		})
	}
}

// TestClientPgxLiterals inserts string literals and NULL into typed
// columns, as psql users and client-side-interpolating drivers do.
func TestClientPgxLiterals(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE lit (a int8 NOT NULL, n int4, ts timestamptz, by bytea, j jsonb, u uuid, d date)",
		`INSERT INTO lit VALUES ('5', NULL, '2024-01-02 03:04:05+00', '\x0102', '{"k": 1}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-01-02')`)
	_, err := c.Exec(ctx, "INSERT INTO lit (a) VALUES ('abc')")
	wantCode(t, err, "22P02", "invalid text for int8")
	_, err = c.Exec(ctx, "INSERT INTO lit (a) VALUES (NULL)")
	wantCode(t, err, "23502", "NULL into NOT NULL")
	want := []string{"5|<nil>|2024-01-02 03:04:05 +0000 UTC|[1 2]|map[k:1]|[160 238 188 153 156 11 78 248 187 109 107 185 189 56 10 17]|2024-01-02 00:00:00 +0000 UTC"}
	if got := queryRows(t, c, "SELECT * FROM lit"); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestClientPgxCopy(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeCacheStatement)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE cp (a int8 NOT NULL, b text)")
	pc := c.PgConn()

	t.Run("FromText", func(t *testing.T) {
		tag, err := pc.CopyFrom(ctx, strings.NewReader("1\tone\n2\t\\N\n3\ttab\\there\n"), "COPY cp FROM STDIN")
		if err != nil || tag.String() != "COPY 3" {
			t.Fatalf("tag %q, err %v", tag, err)
		}
	})
	t.Run("FromCSV", func(t *testing.T) {
		tag, err := pc.CopyFrom(ctx, strings.NewReader("4,\"comma, quoted\"\n5,\n"), "COPY cp FROM STDIN (FORMAT csv)")
		if err != nil || tag.String() != "COPY 2" {
			t.Fatalf("tag %q, err %v", tag, err)
		}
	})
	t.Run("FromBinary", func(t *testing.T) {
		// pgx.CopyFrom describes the table, then sends COPY ... FROM STDIN BINARY.
		n, err := c.CopyFrom(ctx, pgx.Identifier{"cp"}, []string{"a", "b"}, pgx.CopyFromRows([][]any{{int64(6), "six"}, {int64(7), nil}}))
		if err != nil || n != 2 {
			t.Fatalf("n %d, err %v", n, err)
		}
	})
	t.Run("BadRowChangesNothing", func(t *testing.T) {
		_, err := pc.CopyFrom(ctx, strings.NewReader("100\tok\nnot-a-number\tbad\n"), "COPY cp FROM STDIN")
		wantCode(t, err, "22P02", "COPY with a bad row")
		_, err = pc.CopyFrom(ctx, strings.NewReader("101\tok\n\\N\tnull a\n"), "COPY cp FROM STDIN")
		wantCode(t, err, "23502", "COPY NULL into NOT NULL")
		if got := queryRows(t, c, "SELECT a FROM cp WHERE a >= 100"); len(got) != 0 {
			t.Errorf("failed COPY left rows %q", got)
		}
	})
	t.Run("ToText", func(t *testing.T) {
		var buf bytes.Buffer
		tag, err := pc.CopyTo(ctx, &buf, "COPY (SELECT a, b FROM cp ORDER BY a) TO STDOUT")
		if err != nil {
			t.Fatal(err)
		}
		want := "1\tone\n2\t\\N\n3\ttab\\there\n4\tcomma, quoted\n5\t\\N\n6\tsix\n7\t\\N\n"
		if buf.String() != want || tag.String() != "COPY 7" {
			t.Errorf("got %q (%s), want %q", buf.String(), tag, want)
		}
	})
	t.Run("ToCSV", func(t *testing.T) {
		var buf bytes.Buffer
		if _, err := pc.CopyTo(ctx, &buf, "COPY cp TO STDOUT (FORMAT csv)"); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		slices.Sort(lines)
		want := []string{"1,one", "2,", "3,tab\there", "4,\"comma, quoted\"", "5,", "6,six", "7,"}
		if !reflect.DeepEqual(lines, want) {
			t.Errorf("got %q, want %q", lines, want)
		}
	})
	// COPY (SUBSCRIBE) honours the same options as COPY of a query, on
	// both paths: the shared encodings of the fast path are cached per
	// options, so a default-options COPY at the same time keeps its bytes.
	for _, fast := range []string{"on", "off"} {
		t.Run("SubscribeOptions/fast="+fast, func(t *testing.T) {
			mustExec(t, c, "SET enable_subscribe_persist_fast_path = "+fast)
			var at uint64
			if err := c.QueryRow(ctx, "SELECT mz_now()::text::int8 FROM cp LIMIT 1").Scan(&at); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct{ opts, header, row2 string }{
				{"", "", "2\t\\N"},
				{"(DELIMITER '|', NULL 'nil', HEADER)", "mz_timestamp|mz_diff|a|b", "2|nil"},
				{"(FORMAT csv, DELIMITER ';', HEADER)", "mz_timestamp;mz_diff;a;b", "2;"},
			} {
				var buf bytes.Buffer
				q := fmt.Sprintf("COPY (SUBSCRIBE (SELECT a, b FROM cp WHERE a <= 2) AS OF %d UP TO %d) TO STDOUT %s", at, at+1, tc.opts)
				if _, err := pc.CopyTo(ctx, &buf, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
				if tc.header != "" {
					if lines[0] != tc.header {
						t.Errorf("%s: header %q, want %q", q, lines[0], tc.header)
					}
					lines = lines[1:]
				}
				var got []string
				for _, l := range lines {
					// Drop mz_timestamp: the rest is the row with its diff.
					if i := strings.IndexAny(l, "\t|;"); i >= 0 {
						got = append(got, l[i+1:])
					}
				}
				slices.Sort(got)
				sep := "\t"
				switch {
				case strings.Contains(tc.opts, "'|'"):
					sep = "|"
				case strings.Contains(tc.opts, "';'"):
					sep = ";"
				}
				want := []string{"1" + sep + "1" + sep + "one", "1" + sep + tc.row2}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: got %q, want %q", q, got, want)
				}
			}
		})
	}
}

// node-postgres

// nodeClientScript drives node-postgres: the simple protocol (no
// parameters), the extended protocol (parameters, a named statement),
// transactions and errors.
const nodeClientScript = `
const { Client } = require('pg');
(async () => {
  const c = new Client({ host: process.env.H, port: +process.env.P, user: 'materialize', database: 'materialize' });
  const out = {};
  const code = async (q, v) => { try { await c.query(q, v); return 'ok'; } catch (e) { return e.code; } };
  await c.connect();
  await c.query('CREATE TABLE nt (a int8 NOT NULL, b text)');
  out.insert = (await c.query('INSERT INTO nt VALUES ($1, $2), ($3, $4)', [1, 'one', 2, null])).rowCount;
  out.simple = (await c.query('SELECT a, b FROM nt ORDER BY a')).rows;
  out.param = (await c.query({ name: 'byA', text: 'SELECT b FROM nt WHERE a = $1', values: [1] })).rows;
  out.named = (await c.query({ name: 'byA', text: 'SELECT b FROM nt WHERE a = $1', values: [2] })).rows;
  await c.query('BEGIN'); await c.query('INSERT INTO nt VALUES (3, $1)', ['rolled back']); await c.query('ROLLBACK');
  await c.query('BEGIN'); await c.query('INSERT INTO nt VALUES (4, $1)', ['committed']); await c.query('COMMIT');
  out.tx = (await c.query('SELECT a FROM nt WHERE a > 2')).rows;
  out.update = (await c.query('UPDATE nt SET b = $1 WHERE a = $2', ['uno', 1])).rowCount;
  out.delete = (await c.query('DELETE FROM nt WHERE a = 4')).rowCount;
  out.errors = [await code('SELECT * FROM nope'), await code('SELECT zz FROM nt'), await code('CREATE TABLE nt (a int)'),
    await code('SELEC 1'), await code('INSERT INTO nt VALUES ($1, $2)', ['abc', 'x']), await code('SELECT a FROM nt WHERE a = $1', ['x'])];
  out.after = (await c.query('SELECT a, b FROM nt ORDER BY a')).rows;
  out.limit = (await c.query('SELECT a FROM nt ORDER BY a LIMIT $1 OFFSET $2', [1, 1])).rows;
  await c.end();
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e); process.exit(1); });
`

func TestClientNodePostgres(t *testing.T) {
	node := clients.Node(t)
	s := testserver.Start(t, testserver.Options{})
	host, port := s.HostPort()
	out := clients.Script(t, 60*time.Second, host, port, node, "-e", nodeClientScript)
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// node-postgres returns int8 as a string.
	want := map[string]any{
		"insert": 2.0,
		"simple": []any{map[string]any{"a": "1", "b": "one"}, map[string]any{"a": "2", "b": nil}},
		"param":  []any{map[string]any{"b": "one"}},
		"named":  []any{map[string]any{"b": nil}},
		"tx":     []any{map[string]any{"a": "4"}},
		"update": 1.0, "delete": 1.0,
		"errors": []any{"42P01", "42703", "42P07", "42601", "22P02", "22P02"},
		"after":  []any{map[string]any{"a": "1", "b": "uno"}, map[string]any{"a": "2", "b": nil}},
		"limit":  []any{map[string]any{"a": "2"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("node-postgres:\n got %v\nwant %v", got, want)
	}
}

// psycopg2

// pythonClientScript drives psycopg2 (client-side parameter interpolation,
// the simple protocol, implicit BEGIN outside autocommit).
const pythonClientScript = `
import json, os, psycopg2
c = psycopg2.connect(host=os.environ['H'], port=int(os.environ['P']), user='materialize', dbname='materialize')
c.autocommit = True
cur = c.cursor()
out = {}
cur.execute('CREATE TABLE yt (a int8 NOT NULL, b text)')
cur.execute('INSERT INTO yt VALUES (%s, %s), (%s, %s)', (1, "it's", 2, None))
out['insert'] = cur.rowcount
cur.execute('SELECT a, b FROM yt ORDER BY a')
out['rows'] = cur.fetchall()
cur.execute('SELECT b FROM yt WHERE a = %s', (1,))
out['param'] = cur.fetchall()
c.autocommit = False
cur.execute('INSERT INTO yt VALUES (3, %s)', ('rolled back',))
c.rollback()
cur.execute('INSERT INTO yt VALUES (4, %s)', ('committed',))
c.commit()
c.autocommit = True
cur.execute('SELECT a FROM yt WHERE a > 2')
out['tx'] = cur.fetchall()
cur.execute('UPDATE yt SET b = %s WHERE a = %s', ('uno', 1))
out['update'] = cur.rowcount
errors = []
for q in ['SELECT * FROM nope', 'SELECT zz FROM yt', 'CREATE TABLE yt (a int)', 'SELEC 1', "SELECT a FROM yt WHERE a = 'x'"]:
    try:
        cur.execute(q)
        errors.append('ok')
    except psycopg2.Error as e:
        errors.append(e.pgcode)
out['errors'] = errors
cur.execute('SELECT a, b FROM yt ORDER BY a')
out['after'] = cur.fetchall()
c.close()
print(json.dumps(out))
`

func TestClientPsycopg2(t *testing.T) {
	python := clients.Python(t)
	s := testserver.Start(t, testserver.Options{})
	host, port := s.HostPort()
	out := clients.Script(t, 60*time.Second, host, port, python, "-c", pythonClientScript)
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]any{
		"insert": 2.0,
		"rows":   []any{[]any{1.0, "it's"}, []any{2.0, nil}},
		"param":  []any{[]any{"it's"}},
		"tx":     []any{[]any{4.0}},
		"update": 1.0,
		"errors": []any{"42P01", "42703", "42P07", "42601", "22P02"},
		"after":  []any{[]any{1.0, "uno"}, []any{2.0, nil}, []any{4.0, "committed"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("psycopg2:\n got %v\nwant %v", got, want)
	}
}

// Authentication and privileges

func TestPasswordAuth(t *testing.T) {
	for _, auth := range []pgwire.AuthMethod{pgwire.AuthSCRAM, pgwire.AuthCleartext} {
		t.Run(auth.String(), func(t *testing.T) {
			s := testserver.Start(t, testserver.Options{PGWire: pgwire.Config{Auth: auth}})
			admin := connectMode(t, s, pgx.QueryExecModeCacheStatement)
			mustExec(t, admin, "CREATE ROLE r LOGIN PASSWORD 'pw'", "CREATE TABLE secret (a int8)", "INSERT INTO secret VALUES (1)")
			_, err := admin.Exec(context.Background(), "CREATE ROLE r LOGIN PASSWORD 'again'")
			wantCode(t, err, "42710", "duplicate role")

			_, err = connectWith(t, s, "r", "wrong", pgx.QueryExecModeCacheStatement)
			wantCode(t, err, "28P01", "wrong password")
			_, err = connectWith(t, s, "r", "", pgx.QueryExecModeCacheStatement)
			if err == nil {
				t.Error("login without a password succeeded")
			}
			_, err = connectWith(t, s, "nobody", "pw", pgx.QueryExecModeCacheStatement)
			if err == nil {
				t.Error("login as an unknown role succeeded")
			}
			r, err := connectWith(t, s, "r", "pw", pgx.QueryExecModeCacheStatement)
			if err != nil {
				t.Fatalf("login with the right password: %v", err)
			}
			ctx := context.Background()
			_, err = r.Exec(ctx, "SELECT * FROM secret")
			wantCode(t, err, "42501", "SELECT without a grant")
			_, err = r.Exec(ctx, "INSERT INTO secret VALUES (2)")
			wantCode(t, err, "42501", "INSERT without a grant")
			_, err = r.Exec(ctx, "DROP TABLE secret")
			wantCode(t, err, "42501", "DROP by a non-owner")
			_, err = r.Exec(ctx, "CREATE ROLE r2 LOGIN")
			wantCode(t, err, "42501", "CREATE ROLE by a non-superuser")

			mustExec(t, admin, "GRANT SELECT ON secret TO r")
			if got := queryRows(t, r, "SELECT a FROM secret"); !reflect.DeepEqual(got, []string{"1"}) {
				t.Errorf("after GRANT SELECT: %q", got)
			}
			_, err = r.Exec(ctx, "INSERT INTO secret VALUES (2)")
			wantCode(t, err, "42501", "INSERT with only SELECT granted")
			mustExec(t, admin, "REVOKE SELECT ON secret FROM r")
			_, err = r.Exec(ctx, "SELECT * FROM secret")
			wantCode(t, err, "42501", "SELECT after REVOKE")
			if got := queryRows(t, admin, "SELECT a FROM secret"); !reflect.DeepEqual(got, []string{"1"}) {
				t.Errorf("denied writes changed the table: %q", got)
			}
			t.Run("GrantOnView", func(t *testing.T) {
				mustExec(t, admin, "CREATE VIEW secret_view AS SELECT a FROM secret", "GRANT SELECT ON secret_view TO r")
				if got, err := tryQueryRows(r, "SELECT a FROM secret_view"); err != nil || !reflect.DeepEqual(got, []string{"1"}) {
					t.Errorf("SELECT from a granted view: %q, %v", got, err)
				}
			})
		})
	}
}

// Errors

// TestErrorCodes checks that bad statements get the right SQLSTATE and
// change nothing, in both protocols.
func TestErrorCodes(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	admin := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, admin,
		"CREATE TABLE t (a int8 NOT NULL, b text)",
		"INSERT INTO t VALUES (1, 'x'), (2, 'y')",
		"CREATE MATERIALIZED VIEW m AS SELECT a FROM t WHERE a > 1",
		"CREATE VIEW v AS SELECT b FROM t",
		"CREATE SOURCE src FROM LOAD GENERATOR COUNTER (TICK INTERVAL '1h')",
	)
	for _, tc := range []struct {
		name, stmt, code string
	}{
		{name: "UnknownRelation", stmt: "SELECT * FROM nope", code: "42P01"},
		{name: "UnknownRelationInsert", stmt: "INSERT INTO nope VALUES (1)", code: "42P01"},
		{name: "UnknownRelationDrop", stmt: "DROP TABLE nope", code: "42P01"},
		{name: "UnknownColumn", stmt: "SELECT zz FROM t", code: "42703"},
		{name: "UnknownColumnWhere", stmt: "SELECT a FROM t WHERE zz = 1", code: "42703"},
		{name: "UnknownColumnInsert", stmt: "INSERT INTO t (a, zz) VALUES (1, 'x')", code: "42703"},
		{name: "UnknownColumnUpdate", stmt: "UPDATE t SET zz = 1", code: "42703"},
		{name: "TypeMismatchInsert", stmt: "INSERT INTO t VALUES (true, 'x')", code: "42804"},
		{name: "TypeMismatchUpdate", stmt: "UPDATE t SET a = true WHERE a = 1", code: "42804"},
		{name: "InvalidTextWhere", stmt: "SELECT a FROM t WHERE a = 'zz'", code: "22P02"},
		{name: "InvalidTextInsert", stmt: "INSERT INTO t VALUES ('zz', 'x')", code: "22P02"},
		{name: "NullIntoNotNull", stmt: "INSERT INTO t VALUES (NULL, 'x')", code: "23502"},
		{name: "InvalidTextMultiRow", stmt: "INSERT INTO t VALUES (3, 'ok'), (CAST('zz' AS int8), 'bad')", code: "22P02"},
		{name: "NotNull", stmt: "INSERT INTO t (b) VALUES ('no a')", code: "23502"},
		{name: "DuplicateTable", stmt: "CREATE TABLE t (a int)", code: "42P07"},
		{name: "DuplicateMaterializedView", stmt: "CREATE MATERIALIZED VIEW m AS SELECT a FROM t", code: "42P07"},
		{name: "DuplicateAcrossKinds", stmt: "CREATE VIEW t AS SELECT a FROM m", code: "42P07"},
		{name: "DuplicateSource", stmt: "CREATE SOURCE v FROM LOAD GENERATOR COUNTER", code: "42P07"},
		{name: "InsertIntoMaterializedView", stmt: "INSERT INTO m VALUES (5)", code: "42809"},
		{name: "UpdateMaterializedView", stmt: "UPDATE m SET a = 5", code: "42809"},
		{name: "DeleteFromView", stmt: "DELETE FROM v", code: "42809"},
		{name: "InsertIntoSource", stmt: "INSERT INTO src VALUES (5)", code: "42809"},
		{name: "CopyIntoSource", stmt: "COPY src FROM STDIN", code: "42809"},
		{name: "DropWrongKind", stmt: "DROP TABLE m", code: "42809"},
		{name: "DropWithDependents", stmt: "DROP TABLE t", code: "2BP01"},
		{name: "Join", stmt: "SELECT * FROM t, m", code: "0A000"},
		{name: "Aggregate", stmt: "SELECT a FROM t GROUP BY a", code: "0A000"},
		{name: "Syntax", stmt: "SELEC 1", code: "42601"},
		// A 1 MB name is refused before it reaches the catalog.
		{name: "NameTooLong", stmt: "CREATE TABLE " + strings.Repeat("n", 1<<20) + " (a int)", code: "42601"},
		{name: "DDLInTransaction", stmt: "BEGIN; CREATE TABLE tx (a int)", code: "25000"},
		// A subscribe could not show the block's writes (they wait for
		// COMMIT): Materialize's transactions read or write.
		{name: "SubscribeAfterWrite", stmt: "BEGIN; INSERT INTO t VALUES (9, 'w'); DECLARE c CURSOR FOR SUBSCRIBE t; FETCH 1 c", code: "25000"},
		{name: "WriteAfterSubscribe", stmt: "BEGIN; DECLARE c CURSOR FOR SUBSCRIBE t; FETCH 1 c; INSERT INTO t VALUES (9, 'w')", code: "25006"},
		// By statement, not by the rows it touched.
		{name: "SubscribeAfterEmptyWrite", stmt: "BEGIN; DELETE FROM t WHERE a = 12345; DECLARE c CURSOR FOR SUBSCRIBE t; FETCH 1 c", code: "25000"},
		{name: "EmptyWriteAfterSubscribe", stmt: "BEGIN; DECLARE c CURSOR FOR SUBSCRIBE t; FETCH 1 c; DELETE FROM t WHERE a = 12345", code: "25006"},
	} {
		for _, m := range execModes[:2] {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				if strings.Contains(tc.stmt, ";") && m.mode != pgx.QueryExecModeSimpleProtocol {
					t.Skip("several statements need the simple protocol")
				}
				c := connectMode(t, s, m.mode)
				before := queryRows(t, c, "SELECT a, b FROM t")
				_, err := c.Exec(context.Background(), tc.stmt)
				wantCode(t, err, tc.code, tc.stmt)
				if after := queryRows(t, c, "SELECT a, b FROM t"); !reflect.DeepEqual(before, after) {
					t.Errorf("%s changed t: %q -> %q", tc.stmt, before, after)
				}
				if got := queryRows(t, c, "SHOW TABLES"); !reflect.DeepEqual(got, []string{"t|"}) {
					t.Errorf("%s changed the tables: %q", tc.stmt, got)
				}
			})
		}
	}
	t.Run("SyntaxErrorPosition", func(t *testing.T) {
		c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
		for _, tc := range []struct {
			stmt string
			pos  int32
		}{
			{"SELEC 1", 1},
			{"SELECT a FROM t WHERE a = = 1", 27},
			{"SELECT a FROM t WHERE", 22},
		} {
			_, err := c.Exec(context.Background(), tc.stmt)
			if pe := wantCode(t, err, "42601", tc.stmt); pe != nil && pe.Position != tc.pos {
				t.Errorf("%s: position %d, want %d", tc.stmt, pe.Position, tc.pos)
			}
		}
	})
	t.Run("ErrorsLeaveConnectionUsable", func(t *testing.T) {
		c := connectMode(t, s, pgx.QueryExecModeCacheStatement)
		for range 3 {
			_, err := c.Exec(context.Background(), "SELECT * FROM nope")
			wantCode(t, err, "42P01", "repeat")
		}
		if got := queryRows(t, c, "SELECT a FROM t WHERE a = $1", int64(1)); !reflect.DeepEqual(got, []string{"1"}) {
			t.Errorf("got %q", got)
		}
	})
}

// Session

func TestSetShowReset(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	for _, m := range execModes[:2] {
		t.Run(m.name, func(t *testing.T) {
			c := connectMode(t, s, m.mode)
			show := func(name string) string {
				t.Helper()
				var v string
				if err := c.QueryRow(context.Background(), "SHOW "+name).Scan(&v); err != nil {
					t.Fatalf("SHOW %s: %v", name, err)
				}
				return v
			}
			if got := show("application_name"); got != "" {
				t.Errorf("default application_name %q", got)
			}
			mustExec(t, c, "SET application_name = 'shardtail test'")
			if got := show("application_name"); got != "shardtail test" {
				t.Errorf("after SET: %q", got)
			}
			if got := c.PgConn().ParameterStatus("application_name"); got != "shardtail test" {
				t.Errorf("ParameterStatus after SET: %q", got)
			}
			mustExec(t, c, "SET TIME ZONE 'Etc/UTC'", "SET extra_float_digits TO 2", "SET search_path = public")
			if got := show("timezone"); got != "Etc/UTC" {
				t.Errorf("timezone %q", got)
			}
			// Values the server would not honour: refused, not pretended.
			for _, set := range []string{"SET TIME ZONE 'America/New_York'", "SET TimeZone = 'Mars/Phobos'", "SET DateStyle = 'Klingon'",
				"SET DateStyle = 'German, DMY'", "SET IntervalStyle = 'iso_8601'", "SET client_encoding = 'LATIN1'",
				"SET standard_conforming_strings = off"} {
				_, err := c.Exec(context.Background(), set)
				wantCode(t, err, "22023", set)
			}
			_, err := c.Exec(context.Background(), "SET integer_datetimes = off")
			wantCode(t, err, "55P02", "SET integer_datetimes")
			mustExec(t, c, "SET standard_conforming_strings = on")
			for _, name := range []string{"standard_conforming_strings", "integer_datetimes"} {
				if got := c.PgConn().ParameterStatus(name); got != "on" {
					t.Errorf("ParameterStatus %s: %q", name, got)
				}
			}
			mustExec(t, c, "SET DateStyle = 'iso, mdy'", "SET DateStyle = ISO", "RESET DateStyle")
			if got := show("extra_float_digits"); got != "2" {
				t.Errorf("extra_float_digits %q", got)
			}
			mustExec(t, c, "RESET application_name", "RESET timezone")
			if got := show("application_name"); got != "" {
				t.Errorf("after RESET: %q", got)
			}
			if got := show("timezone"); got != "UTC" {
				t.Errorf("timezone after RESET: %q", got)
			}
			mustExec(t, c, "SET application_name = 'again'", "RESET ALL")
			if got := show("application_name"); got != "" {
				t.Errorf("after RESET ALL: %q", got)
			}
			_, err = c.Exec(context.Background(), "SHOW no_such_variable")
			wantCode(t, err, "42704", "SHOW unknown")
			_, err = c.Exec(context.Background(), "SET no_such_variable = 1")
			wantCode(t, err, "42704", "SET unknown")
			if got := queryRows(t, c, "SHOW ALL"); len(got) < 10 {
				t.Errorf("SHOW ALL: %q", got)
			}
		})
	}
	t.Run("SetRolledBack", func(t *testing.T) {
		c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
		mustExec(t, c, "BEGIN", "SET application_name = 'in tx'", "ROLLBACK")
		var v string
		if err := c.QueryRow(context.Background(), "SHOW application_name").Scan(&v); err != nil || v != "" {
			t.Errorf("after ROLLBACK: %q %v", v, err)
		}
	})
	// SET LOCAL lasts until the block ends, committed or not; a SET in the
	// block after it outlives a COMMIT; outside a block it does nothing.
	t.Run("SetLocal", func(t *testing.T) {
		c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
		show := func() string {
			var v string
			if err := c.QueryRow(context.Background(), "SHOW application_name").Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		mustExec(t, c, "SET application_name = 'session'", "BEGIN", "SET LOCAL application_name = 'local'")
		if got := show(); got != "local" {
			t.Errorf("in the block: %q", got)
		}
		mustExec(t, c, "COMMIT")
		if got := show(); got != "session" {
			t.Errorf("after COMMIT: %q", got)
		}
		mustExec(t, c, "BEGIN", "SET LOCAL application_name = 'local'", "ROLLBACK")
		if got := show(); got != "session" {
			t.Errorf("after ROLLBACK: %q", got)
		}
		mustExec(t, c, "BEGIN", "SET LOCAL application_name = 'local'", "SET application_name = 'set'", "COMMIT")
		if got := show(); got != "set" {
			t.Errorf("after SET LOCAL, SET and COMMIT: %q", got)
		}
		mustExec(t, c, "SET LOCAL application_name = 'outside'")
		if got := show(); got != "set" {
			t.Errorf("after SET LOCAL outside a block: %q", got)
		}
	})
}

func TestTransactions(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	admin := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, admin, "CREATE TABLE tx (a int8 NOT NULL, b text)", "CREATE TABLE tx2 (a int8)")
	for i, m := range execModes[:2] {
		t.Run(m.name, func(t *testing.T) {
			c := connectMode(t, s, m.mode)
			base := int64(100 * (i + 1))
			tx, err := c.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for k := range 3 {
				if _, err := tx.Exec(ctx, "INSERT INTO tx VALUES ($1, 'rolled back')", base+int64(k)); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if got := queryRows(t, c, "SELECT a FROM tx WHERE a >= $1 AND a < $2", base, base+100); len(got) != 0 {
				t.Errorf("rolled-back writes visible: %q", got)
			}
			tx, err = c.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for k := range 3 {
				if _, err := tx.Exec(ctx, "INSERT INTO tx VALUES ($1, 'committed')", base+10+int64(k)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := tx.Exec(ctx, "INSERT INTO tx2 VALUES ($1)", base); err != nil {
				t.Fatal(err)
			}
			// Until COMMIT, other sessions see nothing.
			if got := queryRows(t, admin, fmt.Sprintf("SELECT a FROM tx WHERE a >= %d AND a < %d", base, base+100)); len(got) != 0 {
				t.Errorf("uncommitted writes visible to another session: %q", got)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			want := []string{fmt.Sprint(base + 10), fmt.Sprint(base + 11), fmt.Sprint(base + 12)}
			if got := queryRows(t, admin, fmt.Sprintf("SELECT a FROM tx WHERE a >= %d AND a < %d", base, base+100)); !reflect.DeepEqual(got, want) {
				t.Errorf("committed: got %q, want %q", got, want)
			}
			if got := queryRows(t, admin, fmt.Sprintf("SELECT a FROM tx2 WHERE a = %d", base)); len(got) != 1 {
				t.Errorf("committed write to the second table: %q", got)
			}
		})
	}
	t.Run("FailedBlock", func(t *testing.T) {
		c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
		mustExec(t, c, "BEGIN", "INSERT INTO tx VALUES (900, 'before error')")
		_, err := c.Exec(ctx, "SELECT * FROM nope")
		wantCode(t, err, "42P01", "error in block")
		_, err = c.Exec(ctx, "INSERT INTO tx VALUES (901, 'after error')")
		wantCode(t, err, "25P02", "statement in failed block")
		tag, err := c.Exec(ctx, "COMMIT")
		if err != nil || tag.String() != "ROLLBACK" {
			t.Errorf("COMMIT of a failed block: %q %v, want ROLLBACK", tag, err)
		}
		if got := queryRows(t, c, "SELECT a FROM tx WHERE a >= 900"); len(got) != 0 {
			t.Errorf("failed block left rows: %q", got)
		}
	})
	t.Run("ImplicitMultiStatement", func(t *testing.T) {
		// Several statements in one simple query are one transaction: an
		// error rolls back the earlier ones.
		c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
		_, err := c.Exec(ctx, "INSERT INTO tx VALUES (950, 'x'); INSERT INTO tx VALUES ('zz', 'y')")
		if err == nil {
			t.Fatal("no error")
		}
		if got := queryRows(t, c, "SELECT a FROM tx WHERE a >= 950"); len(got) != 0 {
			t.Errorf("failed multi-statement query left rows: %q", got)
		}
		mustExec(t, c, "INSERT INTO tx VALUES (960, 'x'); INSERT INTO tx VALUES (961, 'y')")
		if got := queryRows(t, c, "SELECT a FROM tx WHERE a >= 960"); len(got) != 2 {
			t.Errorf("multi-statement query: %q", got)
		}
	})
	t.Run("CommitAtOneTimestamp", func(t *testing.T) {
		c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
		mustExec(t, c, "CREATE TABLE one_ts (a int8)")
		before := time.Now().UnixMilli()
		mustExec(t, c, "BEGIN", "INSERT INTO one_ts VALUES (1)", "INSERT INTO one_ts VALUES (2)", "COMMIT",
			"BEGIN", fmt.Sprintf("DECLARE cur CURSOR FOR SUBSCRIBE one_ts AS OF %d", before))
		got := queryRows(t, c, "FETCH ALL cur WITH (timeout = '2s')")
		mustExec(t, c, "COMMIT")
		times := map[string]bool{}
		for _, r := range got {
			times[strings.Split(r, "|")[0]] = true
		}
		if len(got) != 2 || len(times) != 1 {
			t.Errorf("SUBSCRIBE of a two-INSERT transaction: %q, want both rows at one mz_timestamp", got)
		}
	})
	t.Run("CommitAllOrNothing", func(t *testing.T) {
		c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
		mustExec(t, admin, "CREATE TABLE p1 (a int8)", "CREATE TABLE p2 (a int8)")
		mustExec(t, c, "BEGIN", "INSERT INTO p1 VALUES (1)", "INSERT INTO p2 VALUES (1)")
		mustExec(t, admin, "DROP TABLE p2")
		_, err := c.Exec(ctx, "COMMIT")
		if err == nil {
			t.Fatal("COMMIT of a write to a dropped table succeeded")
		}
		if code := pgCode(err); code == "XX000" {
			t.Errorf("COMMIT: internal error %v", err)
		}
		if got := queryRows(t, admin, "SELECT a FROM p1"); len(got) != 0 {
			t.Errorf("failed COMMIT applied part of the transaction: p1 = %q", got)
		}
	})
	t.Run("UpdateInBlock", func(t *testing.T) {
		// Unlike Materialize, a transaction block may UPDATE: at COMMIT,
		// and not at all after ROLLBACK.
		c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
		mustExec(t, c, "BEGIN", "UPDATE tx SET b = 'in block' WHERE a = 960", "ROLLBACK")
		if got := queryRows(t, c, "SELECT b FROM tx WHERE a = 960"); !reflect.DeepEqual(got, []string{"x"}) {
			t.Errorf("rolled back UPDATE changed the row: %q", got)
		}
		mustExec(t, c, "BEGIN", "UPDATE tx SET b = 'in block' WHERE a = 960", "COMMIT")
		if got := queryRows(t, c, "SELECT b FROM tx WHERE a = 960"); !reflect.DeepEqual(got, []string{"in block"}) {
			t.Errorf("committed UPDATE: %q", got)
		}
	})
}

// TestPreparedAfterDDL runs statements that pgx has prepared and cached
// (its default mode) after the table they name was dropped and recreated.
func TestPreparedAfterDDL(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeCacheStatement)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE re (a int8)", "INSERT INTO re VALUES (1)", "CREATE TABLE ins (a int8)")
	if got := queryRows(t, c, "SELECT * FROM re WHERE a > $1", int64(0)); !reflect.DeepEqual(got, []string{"1"}) {
		t.Fatalf("got %q", got)
	}
	if _, err := c.Exec(ctx, "INSERT INTO ins VALUES ($1)", int64(1)); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, "DROP TABLE re", "CREATE TABLE re (a int8, b text)", "INSERT INTO re VALUES (5, 'five')",
		"DROP TABLE ins", "CREATE TABLE ins (a int8)")
	// The result shape changed: like PostgreSQL, the cached statement
	// fails with 0A000 once (pgx then drops it from its cache), and the
	// next run plans afresh.
	if got, err := tryQueryRows(c, "SELECT * FROM re WHERE a > $1", int64(0)); err != nil {
		if pgCode(err) != "0A000" {
			t.Fatalf("cached SELECT after DROP/CREATE: %v, want success or 0A000", err)
		}
		if got, err = tryQueryRows(c, "SELECT * FROM re WHERE a > $1", int64(0)); err != nil || !reflect.DeepEqual(got, []string{"5|five"}) {
			t.Errorf("SELECT after the cache was invalidated: %q, %v", got, err)
		}
	} else if !reflect.DeepEqual(got, []string{"5|five"}) {
		t.Errorf("cached SELECT after DROP/CREATE: %q", got)
	}
	if _, err := c.Exec(ctx, "INSERT INTO ins VALUES ($1)", int64(2)); err != nil {
		t.Errorf("cached INSERT after DROP/CREATE: %v", err)
	}
	if got := queryRows(t, c, "SELECT a FROM ins"); !reflect.DeepEqual(got, []string{"2"}) {
		t.Errorf("recreated ins: %q", got)
	}
}

// Catalog

func TestShowObjects(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeCacheStatement)
	mustExec(t, c,
		"CREATE TABLE t2 (a int8 NOT NULL, b text)",
		"CREATE TABLE t1 (x int4)",
		"CREATE VIEW v1 AS SELECT a FROM t2",
		"CREATE MATERIALIZED VIEW m1 AS SELECT a, b FROM t2 WHERE a > 0",
		"CREATE SOURCE s1 FROM LOAD GENERATOR COUNTER (TICK INTERVAL '1h')",
	)
	for _, tc := range []struct {
		stmt string
		want []string
	}{
		{"SHOW TABLES", []string{"t1|", "t2|"}},
		{"SHOW VIEWS", []string{"v1|"}},
		{"SHOW MATERIALIZED VIEWS", []string{"m1|quickstart|"}},
		{"SHOW SOURCES", []string{"s1|load-generator|quickstart|"}},
		{"SHOW COLUMNS FROM t2", []string{"a|false|bigint|", "b|true|text|"}},
		{"SHOW COLUMNS FROM m1", []string{"a|false|bigint|", "b|true|text|"}},
		{"SHOW COLUMNS FROM s1", []string{"counter|false|bigint|"}},
	} {
		if got := queryRows(t, c, tc.stmt); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.stmt, got, tc.want)
		}
	}
	_, err := c.Exec(context.Background(), "SHOW COLUMNS FROM nope")
	wantCode(t, err, "42P01", "SHOW COLUMNS of an unknown relation")
}

func TestAlterRetainHistory(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	ctx := context.Background()
	mustExec(t, c,
		"CREATE TABLE kept (a int8)", "CREATE TABLE compacted (a int8)",
		"CREATE TABLE created (a int8) WITH (RETAIN HISTORY FOR '1h')",
		"CREATE MATERIALIZED VIEW mk AS SELECT a FROM kept",
		"CREATE MATERIALIZED VIEW mc WITH (RETAIN HISTORY FOR '1h') AS SELECT a FROM created",
		"CREATE SOURCE sk FROM LOAD GENERATOR COUNTER (TICK INTERVAL '1h')",
		"ALTER TABLE kept SET (RETAIN HISTORY FOR '1h')",
		"ALTER MATERIALIZED VIEW mk SET (RETAIN HISTORY FOR '1h')",
		"ALTER SOURCE sk SET (RETAIN HISTORY FOR '1h')",
		"ALTER TABLE IF EXISTS nope SET (RETAIN HISTORY FOR '1h')",
		"INSERT INTO kept VALUES (1)", "INSERT INTO compacted VALUES (1)", "INSERT INTO created VALUES (1)",
	)
	_, err := c.Exec(ctx, "ALTER TABLE nope SET (RETAIN HISTORY FOR '1h')")
	wantCode(t, err, "42P01", "ALTER of an unknown table")
	_, err = c.Exec(ctx, "ALTER TABLE kept SET (RETAIN HISTORY FOR 'soon')")
	if err == nil {
		t.Error("ALTER with a bad interval succeeded")
	}
	// A time just after both inserts: readable on both at first; the table
	// with the default (1 s) window compacts past it, the one kept for 1h
	// does not.
	then := time.Now().UnixMilli() + 1
	asOf := func(tbl string) error {
		_, err := tryQueryRows(c, fmt.Sprintf("SELECT a FROM %s AS OF %d", tbl, then))
		return err
	}
	if err := waitFor(10*time.Second, func() error { return asOf("compacted") }); err != nil {
		t.Fatalf("AS OF %d on compacted, before compaction: %v", then, err)
	}
	if err := waitFor(20*time.Second, func() error {
		if asOf("compacted") == nil {
			return errors.New("still readable")
		}
		return nil
	}); err != nil {
		t.Fatalf("default RETAIN HISTORY never compacted: %v", err)
	}
	for _, kept := range []string{"kept", "created", "mc"} {
		if err := asOf(kept); err != nil {
			t.Errorf("AS OF %d on %s, which retains history for 1h: %v", then, kept, err)
		}
	}
	mustExec(t, c, "ALTER TABLE kept RESET (RETAIN HISTORY)")
}

func TestLoadGenerators(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeCacheStatement)
	ctx := context.Background()
	t.Run("Counter", func(t *testing.T) {
		mustExec(t, c, "CREATE SOURCE counter FROM LOAD GENERATOR COUNTER (TICK INTERVAL '100ms')",
			"CREATE MATERIALIZED VIEW evens AS SELECT counter FROM counter WHERE counter % 2 = 0")
		var got []int64
		err := waitFor(20*time.Second, func() error {
			rows, err := c.Query(ctx, "SELECT counter FROM counter ORDER BY counter")
			if err != nil {
				return err
			}
			got, err = pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return err
			}
			if len(got) < 5 {
				return fmt.Errorf("%d rows", len(got))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if v != int64(i+1) {
				t.Fatalf("counter rows %v: want 1..n", got)
			}
		}
		if err := waitFor(20*time.Second, func() error {
			evens, err := tryQueryRows(c, "SELECT counter FROM evens WHERE counter <= 4")
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(evens, []string{"2", "4"}) {
				return fmt.Errorf("evens %q", evens)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})
	t.Run("KeyValue", func(t *testing.T) {
		mustExec(t, c, "CREATE SOURCE kv FROM LOAD GENERATOR KEY VALUE (KEYS 16, PARTITIONS 4, VALUE SIZE 8, SEED 7, BATCH SIZE 2, TICK INTERVAL '50ms')")
		var seen [][]byte
		err := waitFor(20*time.Second, func() error {
			rows, err := c.Query(ctx, "SELECT key, partition, value FROM kv ORDER BY key")
			if err != nil {
				return err
			}
			type kvRow struct {
				Key, Partition int64
				Value          []byte
			}
			got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[kvRow])
			if err != nil {
				return err
			}
			if len(got) != 16 {
				return fmt.Errorf("%d rows, want one per key (16)", len(got))
			}
			for i, r := range got {
				if r.Key != int64(i) || r.Partition != r.Key%4 || len(r.Value) != 8 {
					return fmt.Errorf("row %d: %+v", i, r)
				}
			}
			seen = append(seen, got[0].Value)
			// The values keep changing: key 0 is updated every 8 ticks.
			if len(seen) < 2 || bytes.Equal(seen[0], seen[len(seen)-1]) {
				return errors.New("key 0's value has not changed yet")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("BadOptions", func(t *testing.T) {
		_, err := c.Exec(ctx, "CREATE SOURCE bad FROM LOAD GENERATOR KEY VALUE (KEYS 10, PARTITIONS 4)")
		wantCode(t, err, "22023", "KEYS not a multiple of PARTITIONS")
		_, err = c.Exec(ctx, "CREATE SOURCE bad FROM LOAD GENERATOR COUNTER (TICK INTERVAL 'never')")
		if err == nil {
			t.Error("bad TICK INTERVAL accepted")
		}
		if got := queryRows(t, c, "SHOW SOURCES"); len(got) != 2 {
			t.Errorf("failed CREATE SOURCE changed the catalog: %q", got)
		}
	})
}

func TestDrop(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	ctx := context.Background()
	mustExec(t, c,
		"CREATE TABLE d (a int8)",
		"INSERT INTO d VALUES (1), (2)",
		"CREATE MATERIALIZED VIEW dm AS SELECT a FROM d WHERE a > 1",
		"CREATE VIEW dv AS SELECT a FROM d",
		"CREATE MATERIALIZED VIEW dmm AS SELECT a FROM dm",
	)
	_, err := c.Exec(ctx, "DROP TABLE d")
	wantCode(t, err, "2BP01", "DROP with dependents")
	_, err = c.Exec(ctx, "DROP MATERIALIZED VIEW dm")
	wantCode(t, err, "2BP01", "DROP MATERIALIZED VIEW with a dependent")
	tag, err := c.Exec(ctx, "DROP TABLE IF EXISTS nope")
	if err != nil || tag.String() != "DROP TABLE" {
		t.Errorf("DROP IF EXISTS of a missing table: %q %v", tag, err)
	}
	mustExec(t, c, "DROP VIEW IF EXISTS nope, dv", "DROP TABLE d CASCADE")
	for _, q := range []string{"SHOW TABLES", "SHOW VIEWS", "SHOW MATERIALIZED VIEWS"} {
		if got := queryRows(t, c, q); len(got) != 0 {
			t.Errorf("%s after DROP ... CASCADE: %q", q, got)
		}
	}
	for _, name := range []string{"d", "dm", "dmm"} {
		_, err := c.Exec(ctx, "SELECT * FROM "+name)
		wantCode(t, err, "42P01", "SELECT from dropped "+name)
	}
	// The name is free again, with a fresh (empty) collection.
	mustExec(t, c, "CREATE TABLE d (a int8)")
	if got := queryRows(t, c, "SELECT a FROM d"); len(got) != 0 {
		t.Errorf("recreated table has rows %q", got)
	}
	t.Run("SourceCascade", func(t *testing.T) {
		mustExec(t, c, "CREATE SOURCE ds FROM LOAD GENERATOR COUNTER (TICK INTERVAL '100ms')",
			"CREATE MATERIALIZED VIEW dsm AS SELECT counter FROM ds")
		_, err := c.Exec(ctx, "DROP SOURCE ds")
		wantCode(t, err, "2BP01", "DROP SOURCE with a dependent")
		mustExec(t, c, "DROP SOURCE ds CASCADE", "DROP SOURCE IF EXISTS ds")
		for _, q := range []string{"SHOW SOURCES", "SHOW MATERIALIZED VIEWS"} {
			if got := queryRows(t, c, q); len(got) != 0 {
				t.Errorf("%s after DROP SOURCE ... CASCADE: %q", q, got)
			}
		}
	})
	t.Run("ViewOnView", func(t *testing.T) {
		mustExec(t, c, "CREATE VIEW v1 AS SELECT a FROM d", "CREATE VIEW v2 AS SELECT a FROM v1")
		_, err := c.Exec(ctx, "DROP VIEW v1")
		wantCode(t, err, "2BP01", "DROP VIEW with a dependent view")
		mustExec(t, c, "DROP VIEW v1 CASCADE")
		if got := queryRows(t, c, "SHOW VIEWS"); len(got) != 0 {
			t.Errorf("SHOW VIEWS after CASCADE: %q", got)
		}
	})
}

func TestUpdateDelete(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	for i, m := range execModes[:2] {
		t.Run(m.name, func(t *testing.T) {
			c := connectMode(t, s, m.mode)
			ctx := context.Background()
			tbl := fmt.Sprintf("ud%d", i)
			mustExec(t, c, "CREATE TABLE "+tbl+" (a int8 NOT NULL, b text)",
				"INSERT INTO "+tbl+" VALUES (1, 'a'), (2, 'b'), (3, 'c'), (3, 'c'), (4, NULL)")
			tag, err := c.Exec(ctx, "UPDATE "+tbl+" SET b = b || '!', a = a * 10 WHERE a >= $1", int64(3))
			if err != nil || tag.String() != "UPDATE 3" {
				t.Fatalf("UPDATE: %q %v", tag, err)
			}
			tag, err = c.Exec(ctx, "DELETE FROM "+tbl+" WHERE a = $1", int64(1))
			if err != nil || tag.String() != "DELETE 1" {
				t.Fatalf("DELETE: %q %v", tag, err)
			}
			tag, err = c.Exec(ctx, "UPDATE "+tbl+" SET b = 'none' WHERE a > 1000")
			if err != nil || tag.String() != "UPDATE 0" {
				t.Fatalf("UPDATE of no rows: %q %v", tag, err)
			}
			want := []string{"2|b", "30|c!", "30|c!", "40|<nil>"}
			if got := queryRows(t, c, "SELECT a, b FROM "+tbl); !reflect.DeepEqual(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
			_, err = c.Exec(ctx, "UPDATE "+tbl+" SET a = NULL WHERE a = 2")
			wantCode(t, err, "23502", "UPDATE to NULL in a NOT NULL column")
			tag, err = c.Exec(ctx, "DELETE FROM "+tbl)
			if err != nil || tag.String() != "DELETE 4" {
				t.Fatalf("DELETE all: %q %v", tag, err)
			}
			if got := queryRows(t, c, "SELECT a FROM "+tbl); len(got) != 0 {
				t.Errorf("after DELETE: %q", got)
			}
		})
	}
}

// TestSessionFunctionsRunAtExecute: through pgx's statement cache (prepared
// once, executed many times) session functions take their values when the
// statement runs: current_setting sees a later SET, and pg_cancel_backend
// cancels when executed, with the pid as a parameter.
func TestSessionFunctionsRunAtExecute(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeCacheStatement)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, app := range []string{"first", "second"} {
		execAll(t, c, "SET application_name = '"+app+"'")
		var got string
		if err := c.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != app {
			t.Fatalf("current_setting after SET %q: %q", app, got)
		}
	}

	execAll(t, c, "CREATE TABLE t (k int8)")
	cancelVia := func(pid any) *bool {
		t.Helper()
		var ok *bool
		if err := c.QueryRow(ctx, "SELECT pg_cancel_backend($1)", pid).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for round := range 2 {
		other := connect(t, s)
		done := make(chan error, 1)
		go func() {
			_, err := other.Exec(ctx, "SUBSCRIBE t")
			done <- err
		}()
		if err := waitFor(10*time.Second, func() error {
			rows, err := c.Query(ctx, "SELECT id FROM mz_internal.mz_subscriptions")
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				n++
			}
			rows.Close()
			if n != 1 {
				return fmt.Errorf("%d subscriptions running", n)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if ok := cancelVia(int32(other.PgConn().PID())); ok == nil || !*ok {
			t.Fatalf("round %d: pg_cancel_backend of a running session: %v, want true", round, ok)
		}
		var pgErr *pgconn.PgError
		if err := <-done; !errors.As(err, &pgErr) || pgErr.Code != "57014" {
			t.Fatalf("round %d: the canceled SUBSCRIBE ended with %v, want 57014", round, err)
		}
	}
	if ok := cancelVia(int32(0x7ffffffe)); ok == nil || *ok {
		t.Fatalf("pg_cancel_backend of no session: %v, want false", ok)
	}
	if ok := cancelVia(nil); ok != nil {
		t.Fatalf("pg_cancel_backend(NULL): %v, want NULL", *ok)
	}
}

// TestStartupParameters: startup parameters set the session's variables
// where their values are valid; an invalid one is not an error (drivers
// send their platform's TimeZone or encoding unasked) but leaves the
// default, which ParameterStatus and SHOW report, not the value sent.
func TestStartupParameters(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams = map[string]string{"application_name": "startup test", "TimeZone": "Mars/Phobos", "DateStyle": "Klingon", "client_encoding": "LATIN1"}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for name, want := range map[string]string{"application_name": "startup test", "TimeZone": "UTC", "DateStyle": "ISO, MDY", "client_encoding": "UTF8"} {
		var got string
		if err := c.QueryRow(ctx, "SHOW "+name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want || c.PgConn().ParameterStatus(name) != want {
			t.Errorf("%s: SHOW %q, ParameterStatus %q; want %q", name, got, c.PgConn().ParameterStatus(name), want)
		}
	}
}

// TestClauseParameters: a parameter in LIMIT, OFFSET, AS OF or UP TO is
// typed by its clause (bigint; an mz_timestamp, described as numeric) and
// bound at each execution, on every protocol shape: a client resumes a
// subscribe with `AS OF $1`.
func TestClauseParameters(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	for i, m := range execModes {
		t.Run(m.name, func(t *testing.T) {
			c := connectMode(t, s, m.mode)
			tbl := fmt.Sprintf("cp%d", i)
			mustExec(t, c, "CREATE TABLE "+tbl+" (a int8)", "INSERT INTO "+tbl+" VALUES (1), (2), (3), (4), (5)")
			sel := "SELECT a FROM " + tbl + " WHERE a > $1 ORDER BY a LIMIT $2 OFFSET $3"
			if got := queryRows(t, c, sel, int64(1), int64(2), int64(1)); !reflect.DeepEqual(got, []string{"3", "4"}) {
				t.Errorf("LIMIT 2 OFFSET 1: got %q", got)
			}
			if got := queryRows(t, c, sel, int64(0), nil, int64(3)); !reflect.DeepEqual(got, []string{"4", "5"}) {
				t.Errorf("LIMIT NULL OFFSET 3: got %q", got)
			}
			_, err := c.Exec(ctx, sel, int64(0), int64(-1), int64(0))
			wantCode(t, err, "2201W", "negative LIMIT")
			_, err = c.Exec(ctx, sel, int64(0), int64(1), int64(-1))
			wantCode(t, err, "2201X", "negative OFFSET")

			// A time at which the rows are: a subscribe's first progress row.
			tx, err := c.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			mustExec(t, c, "DECLARE cur CURSOR FOR SUBSCRIBE "+tbl+" WITH (PROGRESS)")
			var at pgtype.Numeric
			var rest [3]any
			if err := tx.QueryRow(ctx, "FETCH 1 cur").Scan(&at, &rest[0], &rest[1], &rest[2]); err != nil {
				t.Fatal(err)
			}
			tx.Rollback(ctx)
			asOf, err := at.Int64Value()
			if err != nil {
				t.Fatal(err)
			}
			for q, want := range map[string]int{
				"SUBSCRIBE " + tbl + " AS OF $1 UP TO $2":                              5,
				"SUBSCRIBE " + tbl + " AS OF AT LEAST $1 UP TO $2":                     5,
				"SUBSCRIBE (SELECT a FROM " + tbl + " WHERE a > $3) AS OF $1 UP TO $2": 3,
			} {
				args := []any{asOf.Int64, asOf.Int64 + 1}
				if strings.Contains(q, "$3") {
					args = append(args, int64(2))
				}
				got, err := tryQueryRows(c, q, args...)
				if err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				if len(got) != want {
					t.Errorf("%s: got %d rows %q, want %d", q, len(got), got, want)
				}
			}
			if m.mode == pgx.QueryExecModeSimpleProtocol {
				return // the client interpolates: nothing is described
			}
			for q, want := range map[string][]uint32{
				sel: {pgtype.Int8OID, pgtype.Int8OID, pgtype.Int8OID},
				"SUBSCRIBE " + tbl + " AS OF $1 UP TO $2":                                   {pgtype.NumericOID, pgtype.NumericOID},
				"SUBSCRIBE (SELECT a FROM " + tbl + " WHERE a > $2) AS OF AT LEAST $1":      {pgtype.NumericOID, pgtype.Int8OID},
				"DECLARE c CURSOR FOR SUBSCRIBE " + tbl + " UP TO $1":                       {pgtype.NumericOID},
				"SELECT a FROM " + tbl + " LIMIT $2 AS OF $1":                               {pgtype.NumericOID, pgtype.Int8OID},
				"SELECT * FROM mz_internal.mz_subscriptions WHERE collection = $1 LIMIT $2": {pgtype.TextOID, pgtype.Int8OID},
			} {
				sd, err := c.Prepare(ctx, "", q)
				if err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				if !reflect.DeepEqual(sd.ParamOIDs, want) {
					t.Errorf("%s: parameter types %v, want %v", q, sd.ParamOIDs, want)
				}
			}
		})
	}
}

// scramSalt returns the salt a server answers user's SCRAM exchange with.
func scramSalt(t *testing.T, s *testserver.Server, user string) string {
	t.Helper()
	host, port := s.HostPort()
	nc, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	fe := pgproto3.NewFrontend(pgproto3.NewChunkReader(nc), nc)
	if err := fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: map[string]string{"user": user}}); err != nil {
		t.Fatal(err)
	}
	if m, err := fe.Receive(); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*pgproto3.AuthenticationSASL); !ok {
		t.Fatalf("%s: got %T, want AuthenticationSASL", user, m)
	}
	if err := fe.Send(&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte("n,,n=,r=0123456789abcdef")}); err != nil {
		t.Fatal(err)
	}
	m, err := fe.Receive()
	if err != nil {
		t.Fatal(err)
	}
	cont, ok := m.(*pgproto3.AuthenticationSASLContinue)
	if !ok {
		t.Fatalf("%s: got %T, want AuthenticationSASLContinue", user, m)
	}
	for _, f := range strings.Split(string(cont.Data), ",") {
		if salt, ok := strings.CutPrefix(f, "s="); ok {
			return salt
		}
	}
	t.Fatalf("%s: no salt in %q", user, cont.Data)
	return ""
}

// TestUnknownRoleSalt: a name that is no role is answered with a salt
// that is the same on every server of one catalog (behind a load balancer,
// after a restart), as a role's is, so that comparing salts tells no one
// which roles exist; another catalog's differs.
func TestUnknownRoleSalt(t *testing.T) {
	cons, blob := consmem.New(), blobmem.New()
	opts := testserver.Options{Consensus: cons, Blob: blob, PGWire: pgwire.Config{Auth: pgwire.AuthSCRAM}}
	a := testserver.Start(t, opts)
	mustExec(t, connectMode(t, a, pgx.QueryExecModeSimpleProtocol), "CREATE ROLE r LOGIN PASSWORD 'pw'")
	b := testserver.Start(t, opts) // as a server restarted on a's storage
	if sa, sb := scramSalt(t, a, "nobody"), scramSalt(t, b, "nobody"); sa != sb {
		t.Errorf("unknown role: salt %s on one server, %s on the other", sa, sb)
	}
	if sa, sb := scramSalt(t, a, "r"), scramSalt(t, b, "r"); sa != sb {
		t.Errorf("role r: salt %s on one server, %s on the other", sa, sb)
	}
	other := testserver.Start(t, testserver.Options{PGWire: pgwire.Config{Auth: pgwire.AuthSCRAM}})
	if scramSalt(t, a, "nobody") == scramSalt(t, other, "nobody") {
		t.Error("two catalogs answer an unknown role with the same salt")
	}
}

// TestInsertSelectAssignmentCast: INSERT ... SELECT converts the query's
// columns to the target's by assignment casts, as PostgreSQL does (an
// integer into a bigint, a bigint into a numeric(5,1)); a column with none
// is 42804.
func TestInsertSelectAssignmentCast(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, "CREATE TABLE big (id bigint, n numeric(5,1), v text)",
		"INSERT INTO big SELECT a, b, 'x' FROM (VALUES (1, 22::int8)) v(a, b)")
	if got := queryRows(t, c, "SELECT id, n::text, v FROM big"); !reflect.DeepEqual(got, []string{"1|22|x"}) {
		t.Errorf("INSERT ... SELECT with assignment casts: %q", got)
	}
	_, err := c.Exec(context.Background(), "INSERT INTO big (id) SELECT v FROM (VALUES (true)) x(v)")
	wantCode(t, err, "42804", "a boolean into a bigint")
}

// TestInsertFewerValues: without a column list, INSERT's VALUES or query
// fills the table's first columns and the rest are NULL, as in
// PostgreSQL; with a column list the counts must match.
func TestInsertFewerValues(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, "CREATE TABLE few (a int, b text NOT NULL, c int)",
		"INSERT INTO few VALUES (1, 'x'), (2, 'y')", "INSERT INTO few SELECT 3, 'z' FROM (VALUES (1)) v(x)")
	if got, want := queryRows(t, c, "SELECT a, b, c FROM few ORDER BY a"), []string{"1|x|<nil>", "2|y|<nil>", "3|z|<nil>"}; !reflect.DeepEqual(got, want) {
		t.Errorf("INSERT of fewer values: got %q, want %q", got, want)
	}
	ctx := context.Background()
	_, err := c.Exec(ctx, "INSERT INTO few VALUES (4)")
	wantCode(t, err, "23502", "NULL into the NOT NULL column left out")
	_, err = c.Exec(ctx, "INSERT INTO few (a, b) VALUES (4)")
	wantCode(t, err, "42601", "fewer values than listed columns")
	_, err = c.Exec(ctx, "INSERT INTO few VALUES (4, 'w', 1, 2)")
	wantCode(t, err, "42601", "more values than columns")
}
