package pgwire

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// execModes are the ways pgx runs a query: the simple protocol, and the
// extended protocol with a cached prepared statement (pgx's default) or with a
// describe round trip per query.
var execModes = []struct {
	name string
	mode pgx.QueryExecMode
}{
	{"Simple", pgx.QueryExecModeSimpleProtocol},
	{"CacheStatement", pgx.QueryExecModeCacheStatement},
	{"Describe", pgx.QueryExecModeDescribeExec},
}

func TestPgxQuery(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{})
	conn := ts.connect(t, "alice", "")
	ctx := testContext(t)
	for _, m := range execModes {
		t.Run(m.name, func(t *testing.T) {
			for _, n := range []int{0, 1, 7, 8, 50} {
				got := collectInts(t, conn, m.mode, "select "+strconv.Itoa(n))
				if want := seq(n); !slices.Equal(got, want) {
					t.Errorf("select %d: got %v, want %v", n, got, want)
				}
			}
			if m.mode != pgx.QueryExecModeSimpleProtocol {
				var s string
				must(t, conn.QueryRow(ctx, "echo $1", m.mode, "héllo").Scan(&s))
				if s != "héllo" {
					t.Errorf("echo $1: got %q, want %q", s, "héllo")
				}
			}
			tag, err := conn.Exec(ctx, "begin", m.mode)
			must(t, err)
			if tag.String() != "BEGIN" || conn.PgConn().TxStatus() != 'T' {
				t.Errorf("begin: tag %q, tx status %c", tag, conn.PgConn().TxStatus())
			}
			_, err = conn.Exec(ctx, "commit", m.mode)
			must(t, err)
			if conn.PgConn().TxStatus() != 'I' {
				t.Errorf("after commit: tx status %c, want I", conn.PgConn().TxStatus())
			}
		})
	}
}

func TestPgxResultFormats(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{})
	conn := ts.connect(t, "alice", "")
	for _, f := range []struct {
		name string
		code int16
	}{{"Text", pgx.TextFormatCode}, {"Binary", pgx.BinaryFormatCode}} {
		t.Run(f.name, func(t *testing.T) {
			rows, err := conn.Query(testContext(t), "select 9", pgx.QueryResultFormats{f.code})
			must(t, err)
			var got []int64
			for rows.Next() {
				if fd := rows.FieldDescriptions()[0]; fd.Format != f.code || fd.DataTypeOID != 20 {
					t.Fatalf("field %+v: want format %d, type 20", fd, f.code)
				}
				var v int64
				must(t, rows.Scan(&v))
				got = append(got, v)
			}
			must(t, rows.Err())
			if want := seq(9); !slices.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestPgxMultiStatement(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{})
	conn := ts.connect(t, "alice", "")
	ctx := testContext(t)

	results, err := conn.PgConn().Exec(ctx, "select 2; echo x; set application_name = app2").ReadAll()
	must(t, err)
	var tags []string
	for _, r := range results {
		must(t, r.Err)
		tags = append(tags, r.CommandTag.String())
	}
	if want := []string{"SELECT 2", "SELECT 1", "SET"}; !slices.Equal(tags, want) {
		t.Errorf("tags %q, want %q", tags, want)
	}
	if got := conn.PgConn().ParameterStatus("application_name"); got != "app2" {
		t.Errorf("application_name after SET: %q, want app2", got)
	}

	// An error ends the query: the statements after it do not run.
	results, err = conn.PgConn().Exec(ctx, "select 1; error 42P01; select 3").ReadAll()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Fatalf("got error %v, want 42P01", err)
	}
	if len(results) == 0 || results[0].CommandTag.String() != "SELECT 1" || results[len(results)-1].CommandTag.String() == "SELECT 3" {
		t.Errorf("results around the error: %d, first %q", len(results), results[0].CommandTag)
	}

	// Empty query: one result (EmptyQueryResponse) with no tag.
	results, err = conn.PgConn().Exec(ctx, " ; ").ReadAll()
	must(t, err)
	if len(results) != 1 || results[0].CommandTag.String() != "" {
		t.Errorf("empty query: %d results", len(results))
	}
}

func TestPgxErrors(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{})
	conn := ts.connect(t, "alice", "")
	for _, m := range execModes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			_, err := conn.Exec(ctx, "error 42P01", m.mode)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				t.Fatalf("got %v, want a PgError", err)
			}
			want := pgconn.PgError{Severity: "ERROR", Code: "42P01", Message: "fake error 42P01", Detail: "fake detail", Hint: "fake hint", Position: 3}
			if pgErr.Severity != want.Severity || pgErr.Code != want.Code || pgErr.Message != want.Message ||
				pgErr.Detail != want.Detail || pgErr.Hint != want.Hint || pgErr.Position != want.Position {
				t.Errorf("got %+v, want %+v", *pgErr, want)
			}

			_, err = conn.Exec(ctx, "error plain", m.mode)
			if !errors.As(err, &pgErr) || pgErr.Code != "XX000" || pgErr.Message != "plain failure" {
				t.Errorf("error without SQLSTATE: got %v, want XX000 plain failure", err)
			}

			_, err = conn.Exec(ctx, "nonsense", m.mode)
			if !errors.As(err, &pgErr) || pgErr.Code != "42601" || pgErr.Position != 1 {
				t.Errorf("syntax error: got %v, want 42601 at 1", err)
			}

			// A failed transaction block: 'E' until rollback.
			_, err = conn.Exec(ctx, "begin", m.mode)
			must(t, err)
			_, err = conn.Exec(ctx, "error 22012", m.mode)
			if err == nil || conn.PgConn().TxStatus() != 'E' {
				t.Errorf("error in transaction: err %v, tx status %c, want E", err, conn.PgConn().TxStatus())
			}
			_, err = conn.Exec(ctx, "rollback", m.mode)
			must(t, err)
			if conn.PgConn().TxStatus() != 'I' {
				t.Errorf("after rollback: tx status %c", conn.PgConn().TxStatus())
			}

			// The connection is still fine.
			if got := collectInts(t, conn, m.mode, "select 2"); !slices.Equal(got, seq(2)) {
				t.Errorf("after errors: got %v", got)
			}
		})
	}
}

func TestPgxParameterStatus(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{})
	conn := ts.connect(t, "alice", "application_name=myapp")
	pc := conn.PgConn()
	for name, want := range map[string]string{
		"server_version":              "9.5.0",
		"server_encoding":             "UTF8",
		"client_encoding":             "UTF8",
		"DateStyle":                   "ISO, MDY",
		"TimeZone":                    "UTC",
		"integer_datetimes":           "on",
		"standard_conforming_strings": "on",
		"application_name":            "myapp",
		"is_superuser":                "off", // from the session
	} {
		if got := pc.ParameterStatus(name); got != want {
			t.Errorf("ParameterStatus(%s) = %q, want %q", name, got, want)
		}
	}
	if pc.PID() == 0 || len(pc.SecretKey()) != 4 {
		t.Errorf("BackendKeyData: pid %d, secret %d", pc.PID(), pc.SecretKey())
	}
}

func TestPgxNotice(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{})
	var notices []*pgconn.Notice
	cfg, err := pgx.ParseConfig(ts.url("alice", ""))
	must(t, err)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n) }
	conn, err := pgx.ConnectConfig(testContext(t), cfg)
	must(t, err)
	defer conn.Close(context.Background())
	for _, m := range execModes {
		notices = nil
		if got := collectInts(t, conn, m.mode, "notice"); !slices.Equal(got, []int64{1}) {
			t.Errorf("%s: rows %v", m.name, got)
		}
		if len(notices) != 1 || notices[0].Code != "01000" || notices[0].Severity != "NOTICE" ||
			!strings.HasPrefix(notices[0].Message, "streaming SUBSCRIBE rows") {
			t.Errorf("%s: notices %+v", m.name, notices)
		}
	}
}

func TestPgxCopy(t *testing.T) {
	b := newFakeBackend()
	ts := startServer(t, b, Config{})
	conn := ts.connect(t, "alice", "")
	ctx := testContext(t)

	var out bytes.Buffer
	tag, err := conn.PgConn().CopyTo(ctx, &out, "copy out")
	must(t, err)
	if tag.String() != "COPY 3" || out.String() != "line1\nline2\nline3\n" {
		t.Errorf("copy out: tag %q, data %q", tag, out.String())
	}

	data := strings.Repeat("some line of copy data\n", 5000) // spans many CopyData messages
	tag, err = conn.PgConn().CopyFrom(ctx, strings.NewReader(data), "copy in")
	must(t, err)
	if tag.String() != "COPY 5000" || b.copiedData() != data {
		t.Errorf("copy in: tag %q, %d bytes received, want %d", tag, len(b.copiedData()), len(data))
	}

	// A failing reader makes pgconn send CopyFail.
	_, err = conn.PgConn().CopyFrom(ctx, &failingReader{}, "copy in")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" || !strings.HasPrefix(pgErr.Message, "COPY from stdin failed: ") {
		t.Errorf("CopyFail: got %v, want 57014 COPY from stdin failed", err)
	}
	if got := collectInts(t, conn, pgx.QueryExecModeCacheStatement, "select 3"); !slices.Equal(got, seq(3)) {
		t.Errorf("after CopyFail: %v", got)
	}
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n++; r.n > 3 {
		return 0, errors.New("reader broke")
	}
	return copy(p, "partial\n"), nil
}

func TestPgxCancel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		query string
		mode  pgx.QueryExecMode
	}{
		{"SleepSimple", "sleep", pgx.QueryExecModeSimpleProtocol},
		{"SleepExtended", "sleep", pgx.QueryExecModeCacheStatement},
		{"StreamSimple", "stream", pgx.QueryExecModeSimpleProtocol},
		{"StreamExtended", "stream", pgx.QueryExecModeCacheStatement},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newFakeBackend()
			ts := startServer(t, b, Config{})
			conn := ts.connect(t, "alice", "")
			ctx := testContext(t)

			// Cancel from another goroutine once the statement runs.
			go func() {
				<-b.running
				conn.PgConn().CancelRequest(context.Background())
			}()
			n := 0
			rows, err := conn.Query(ctx, tc.query, tc.mode)
			if err == nil {
				for rows.Next() {
					n++
				}
				err = rows.Err()
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "57014" || pgErr.Message != "canceling statement due to user request" {
				t.Fatalf("got %v, want 57014", err)
			}
			if tc.query == "stream" && n == 0 {
				t.Log("no rows streamed before the cancel") // possible, but rare
			}
			// The session goes on.
			if got := collectInts(t, conn, tc.mode, "select 4"); !slices.Equal(got, seq(4)) {
				t.Errorf("after cancel: %v", got)
			}
			if _, _, ended := b.counts(); ended != 1 {
				t.Errorf("%d long-running results ended, want 1", ended)
			}
		})
	}
}

// TestPgxStreaming checks that rows of a result that never ends reach the
// client: pgwire flushes after each batch.
func TestPgxStreaming(t *testing.T) {
	for _, m := range execModes {
		t.Run(m.name, func(t *testing.T) {
			b := newFakeBackend()
			ts := startServer(t, b, Config{})
			conn := ts.connect(t, "alice", "")
			ctx, cancel := context.WithCancel(testContext(t))
			defer cancel()
			rows, err := conn.Query(ctx, "stream", m.mode)
			must(t, err)
			var got []int64
			for len(got) < 20 && rows.Next() {
				var v int64
				must(t, rows.Scan(&v))
				got = append(got, v)
			}
			if !slices.Equal(got, seq(20)) {
				t.Fatalf("streamed %v (err %v)", got, rows.Err())
			}
			// Canceling the context makes pgx send a CancelRequest (and
			// close the connection if that does not end the query soon).
			cancel()
			rows.Close()
			waitFor(t, "the stream to end", func() bool { _, _, ended := b.counts(); return ended == 1 })
		})
	}
}

// TestPgxDisconnect checks that a client vanishing mid-stream cancels the
// statement and closes its session.
func TestPgxDisconnect(t *testing.T) {
	b := newFakeBackend()
	ts := startServer(t, b, Config{})
	conn := ts.connect(t, "alice", "")
	rows, err := conn.Query(testContext(t), "stream")
	must(t, err)
	for i := 0; i < 3 && rows.Next(); i++ {
	}
	conn.PgConn().Conn().Close() // no Terminate: the socket just goes away
	waitFor(t, "the stream to end and the session to close", func() bool {
		_, closed, ended := b.counts()
		return ended == 1 && closed == 1
	})
	rows.Close()
}

func TestPgxLargeRow(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{})
	conn := ts.connect(t, "alice", "")
	var s string
	must(t, conn.QueryRow(testContext(t), "big 3000000", pgx.QueryExecModeSimpleProtocol).Scan(&s))
	if len(s) != 3000000 {
		t.Errorf("got %d bytes, want 3000000", len(s))
	}
}

func TestPgxUnknownDatabase(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{})
	_, err := pgx.Connect(testContext(t), strings.Replace(ts.url("alice", ""), "/materialize?", "/nodb?", 1))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" || pgErr.Severity != "FATAL" {
		t.Errorf("got %v, want FATAL 3D000", err)
	}
}

// collectInts runs a query and returns its int8 column.
func collectInts(t *testing.T, conn *pgx.Conn, mode pgx.QueryExecMode, sql string) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, sql, mode)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return got
}

func seq(n int) []int64 {
	out := []int64{}
	for i := 1; i <= n; i++ {
		out = append(out, int64(i))
	}
	return out
}
