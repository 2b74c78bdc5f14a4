package adapter_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// wantTag runs q on c and checks its command tag.
func wantTag(t *testing.T, c *pgx.Conn, q, want string) {
	t.Helper()
	tag, err := c.Exec(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if got := tag.String(); got != want {
		t.Errorf("%s: tag %q, want %q", q, got, want)
	}
}

// wantTable checks a query's sorted rows.
func wantTable(t *testing.T, c *pgx.Conn, q string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if got := queryRows(t, c, q); !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", q, got, want)
	}
}

// TestTxnModifySeesOwnWrites: an UPDATE or DELETE in a transaction block
// sees the table plus the block's own earlier writes, and nobody else sees any of it before COMMIT.
func TestTxnModifySeesOwnWrites(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	other := connect(t, s)
	mustExec(t, c, "CREATE TABLE t (k int, v text)", "INSERT INTO t VALUES (1, 'a')")
	mustExec(t, c, "BEGIN", "INSERT INTO t VALUES (2, 'b')")
	wantTag(t, c, "UPDATE t SET v = 'x' WHERE k = 2", "UPDATE 1")
	wantTag(t, c, "DELETE FROM t WHERE k = 1", "DELETE 1")
	wantTag(t, c, "UPDATE t SET v = v || '!'", "UPDATE 1")
	wantTag(t, c, "DELETE FROM t WHERE k = 1", "DELETE 0")
	wantTable(t, other, "SELECT * FROM t", "1|a")
	mustExec(t, c, "COMMIT")
	wantTable(t, other, "SELECT * FROM t", "2|x!")
}

// TestTxnModifyRollback: ROLLBACK discards a block's UPDATEs and DELETEs,
// and after an error in the block every statement fails with 25P02 until
// ROLLBACK, as in PostgreSQL.
func TestTxnModifyRollback(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, "CREATE TABLE t (k int)", "INSERT INTO t VALUES (1), (2)")
	mustExec(t, c, "BEGIN", "UPDATE t SET k = k + 10", "DELETE FROM t WHERE k = 11", "ROLLBACK")
	wantTable(t, c, "SELECT * FROM t", "1", "2")

	mustExec(t, c, "BEGIN", "DELETE FROM t WHERE k = 1")
	_, err := c.Exec(context.Background(), "UPDATE t SET nope = 1")
	wantCode(t, err, "42703", "UPDATE of a missing column")
	_, err = c.Exec(context.Background(), "UPDATE t SET k = 3")
	wantCode(t, err, "25P02", "UPDATE after an error in the block")
	// COMMIT of a failed block rolls back.
	wantTag(t, c, "COMMIT", "ROLLBACK")
	wantTable(t, c, "SELECT * FROM t", "1", "2")
}

// TestTxnModifyConflict: COMMIT fails with 40001, applying nothing, when
// another commit wrote a table the block's UPDATE or DELETE read after
// that read. A write to a table the block only
// inserted into is no conflict.
func TestTxnModifyConflict(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	other := connect(t, s)
	mustExec(t, c, "CREATE TABLE a (k int)", "CREATE TABLE b (k int)", "INSERT INTO a VALUES (1)", "INSERT INTO b VALUES (1)")
	for _, concurrent := range []string{"INSERT INTO a VALUES (7)", "UPDATE a SET k = 7", "DELETE FROM a"} {
		t.Run(concurrent, func(t *testing.T) {
			mustExec(t, other, "DELETE FROM a", "DELETE FROM b", "INSERT INTO a VALUES (1)", "INSERT INTO b VALUES (1)")
			mustExec(t, c, "BEGIN", "UPDATE a SET k = k + 1", "DELETE FROM b", "INSERT INTO b VALUES (2)")
			mustExec(t, other, concurrent)
			before := queryRows(t, other, "SELECT * FROM a")
			_, err := c.Exec(context.Background(), "COMMIT")
			pe := wantCode(t, err, "40001", "COMMIT after a concurrent write")
			if pe != nil && pe.Message != "could not serialize access due to concurrent update" {
				t.Errorf("message %q", pe.Message)
			}
			wantTable(t, other, "SELECT * FROM a", before...)
			wantTable(t, other, "SELECT * FROM b", "1")
			// The session is out of the transaction.
			wantTag(t, c, "INSERT INTO b VALUES (3)", "INSERT 0 1")
			wantTable(t, other, "SELECT * FROM b", "1", "3")
		})
	}
	t.Run("WriteToInsertedTable", func(t *testing.T) {
		mustExec(t, other, "DELETE FROM a", "DELETE FROM b", "INSERT INTO a VALUES (1)")
		mustExec(t, c, "BEGIN", "UPDATE a SET k = 2", "INSERT INTO b VALUES (1)")
		mustExec(t, other, "INSERT INTO b VALUES (9)")
		mustExec(t, c, "COMMIT")
		wantTable(t, other, "SELECT * FROM a", "2")
		wantTable(t, other, "SELECT * FROM b", "1", "9")
	})
}

// TestTxnModifyMultiStatement: the UPDATEs and DELETEs of a
// multi-statement simple query are part of its implicit transaction: they
// see its earlier statements' writes, and an error anywhere applies
// nothing.
func TestTxnModifyMultiStatement(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, "CREATE TABLE a (k int)", "CREATE TABLE b (k int)", "INSERT INTO a VALUES (1)", "INSERT INTO b VALUES (1)")
	_, err := c.Exec(context.Background(), "UPDATE a SET k = 5; DELETE FROM b; SELECT * FROM nope")
	wantCode(t, err, "42P01", "multi-statement query failing after UPDATE and DELETE")
	wantTable(t, c, "SELECT * FROM a", "1")
	wantTable(t, c, "SELECT * FROM b", "1")
	mustExec(t, c, "INSERT INTO a VALUES (2); UPDATE a SET k = k * 10; DELETE FROM b WHERE k = 1; INSERT INTO b VALUES (3)")
	wantTable(t, c, "SELECT * FROM a", "10", "20")
	wantTable(t, c, "SELECT * FROM b", "3")
}

// TestTxnErrorWhileSending: a statement that fails while its result is
// sent (a row's expression, a bad COPY row), not when it starts, fails its
// transaction as any error does: a block then refuses every statement with
// 25P02, and a multi-statement query's earlier writes are rolled back.
func TestTxnErrorWhileSending(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE a (k int)", "CREATE TABLE b (k int)", "INSERT INTO a VALUES (1)")

	_, err := c.Exec(ctx, "INSERT INTO b VALUES (1); SELECT k / 0 FROM a; INSERT INTO b VALUES (2)")
	wantCode(t, err, "22012", "multi-statement query failing in a row")
	wantTag(t, c, "INSERT INTO b VALUES (3)", "INSERT 0 1")
	wantTable(t, c, "SELECT * FROM b", "3")

	mustExec(t, c, "BEGIN", "INSERT INTO b VALUES (4)")
	_, err = c.Exec(ctx, "SELECT k / 0 FROM a")
	wantCode(t, err, "22012", "SELECT failing in a row in a block")
	_, err = c.Exec(ctx, "INSERT INTO b VALUES (5)")
	wantCode(t, err, "25P02", "INSERT after a row's error in the block")
	wantTag(t, c, "COMMIT", "ROLLBACK")

	mustExec(t, c, "BEGIN", "INSERT INTO b VALUES (6)")
	_, err = c.PgConn().CopyFrom(ctx, strings.NewReader("7\nbad\n"), "COPY b FROM STDIN")
	wantCode(t, err, "22P02", "COPY of a bad row in a block")
	_, err = c.Exec(ctx, "INSERT INTO b VALUES (8)")
	wantCode(t, err, "25P02", "INSERT after a failed COPY in the block")
	wantTag(t, c, "COMMIT", "ROLLBACK")
	wantTable(t, c, "SELECT * FROM b", "3")
}

// TestTxnCommitInImplicit: as in PostgreSQL, a COMMIT among a
// multi-statement query's statements (or an extended-protocol batch's)
// commits the implicit transaction's writes before it, and the statements
// after it run in another implicit transaction.
func TestTxnCommitInImplicit(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE a (k int)", "CREATE TABLE b (k int)", "INSERT INTO a VALUES (1)")

	mustExec(t, c, "INSERT INTO b VALUES (1); COMMIT")
	_, err := c.Exec(ctx, "INSERT INTO b VALUES (2); COMMIT; INSERT INTO b VALUES (3); SELECT k / 0 FROM a")
	wantCode(t, err, "22012", "failure after a COMMIT in a query")
	mustExec(t, c, "BEGIN", "INSERT INTO b VALUES (4); COMMIT; INSERT INTO b VALUES (5); ROLLBACK")
	wantTable(t, c, "SELECT * FROM b", "1", "2", "4")

	x := connectMode(t, s, pgx.QueryExecModeDescribeExec)
	b := &pgx.Batch{}
	b.Queue("INSERT INTO b VALUES (7)")
	b.Queue("COMMIT")
	if err := x.SendBatch(ctx, b).Close(); err != nil {
		t.Fatalf("batch: %v", err)
	}
	wantTable(t, c, "SELECT * FROM b", "1", "2", "4", "7")
}

// TestTxnModifyAfterWriteInBatch: an UPDATE or DELETE that follows a
// write in an extended-protocol batch (one Sync) sees that write, as in
// PostgreSQL, and commits with it.
func TestTxnModifyAfterWriteInBatch(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeDescribeExec)
	mustExec(t, c, "CREATE TABLE t (k int, v text)")
	b := &pgx.Batch{}
	b.Queue("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
	b.Queue("UPDATE t SET v = 'x' WHERE k = 1")
	b.Queue("DELETE FROM t WHERE k = 2")
	if err := c.SendBatch(context.Background(), b).Close(); err != nil {
		t.Fatalf("batch: %v", err)
	}
	wantTable(t, c, "SELECT * FROM t", "1|x")
}

// TestTxnModifySubscribersSeeOneTimestamp: subscribers on both paths see
// a block's (and a multi-statement query's) inserts, updates and deletes
// over several tables at one timestamp.
func TestTxnModifySubscribersSeeOneTimestamp(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	w := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, w, "CREATE TABLE a (k int)", "CREATE TABLE b (k int)", "CREATE TABLE c (k int)",
		"INSERT INTO a VALUES (1), (2)", "INSERT INTO b VALUES (1)")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type sub struct {
		table, path string
		c           *pgx.Conn
		rows        []string // data rows past the snapshot: "ts diff k"
	}
	var subs []*sub
	for _, fast := range []string{"on", "off"} {
		for _, tb := range []string{"a", "b", "c"} {
			sc := connect(t, s)
			execAll(t, sc, "SET enable_subscribe_persist_fast_path = "+fast, "BEGIN",
				"DECLARE c CURSOR FOR SUBSCRIBE "+tb+" WITH (PROGRESS, SNAPSHOT = false)")
			for lastProgress(t, fetch(t, ctx, sc, "FETCH ALL c WITH (timeout = '1s')")) == 0 {
			}
			subs = append(subs, &sub{table: tb, path: fast, c: sc})
		}
	}
	// The block and the query each change every table: 4 updates of a,
	// 3 of b and 2 of c in all.
	mustExec(t, w, "BEGIN", "UPDATE a SET k = k + 10 WHERE k = 1", "DELETE FROM b", "INSERT INTO c VALUES (1)", "COMMIT")
	mustExec(t, w, "DELETE FROM a WHERE k = 2; INSERT INTO b VALUES (5); UPDATE c SET k = 2")
	want := map[string]int{"a": 3, "b": 2, "c": 3}
	for _, sb := range subs {
		for len(sb.rows) < want[sb.table] {
			for _, r := range fetch(t, ctx, sb.c, "FETCH ALL c WITH (timeout = '1s')") {
				if f := strings.Fields(r); f[1] != "t" {
					sb.rows = append(sb.rows, fmt.Sprintf("%s %s %s", f[0], f[2], f[3]))
				}
			}
		}
	}
	// The transactions' timestamps, in order.
	var ts []string
	for _, sb := range subs {
		for _, r := range sb.rows {
			if t := strings.Fields(r)[0]; !slices.Contains(ts, t) {
				ts = append(ts, t)
			}
		}
	}
	if len(ts) != 2 {
		var all []string
		for _, sb := range subs {
			all = append(all, fmt.Sprintf("%s/%s: %q", sb.table, sb.path, sb.rows))
		}
		t.Fatalf("two transactions reached subscribers at %d timestamps, want 2: %s", len(ts), strings.Join(all, "; "))
	}
	slices.SortFunc(ts, func(x, y string) int { return cmp.Or(cmp.Compare(len(x), len(y)), strings.Compare(x, y)) })
	wantByTable := map[string][]string{
		"a": {ts[0] + " -1 1", ts[0] + " 1 11", ts[1] + " -1 2"},
		"b": {ts[0] + " -1 1", ts[1] + " 1 5"},
		"c": {ts[0] + " 1 1", ts[1] + " -1 1", ts[1] + " 1 2"},
	}
	for _, sb := range subs {
		got := slices.Clone(sb.rows)
		slices.Sort(got)
		want := slices.Clone(wantByTable[sb.table])
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("SUBSCRIBE %s (fast path %s) = %q, want %q", sb.table, sb.path, got, want)
		}
	}
}

// TestTxnModifySlowBlock: a block whose UPDATEs of two tables are far
// apart, further than the second table keeps history (RETAIN HISTORY),
// still commits: each table is read at its latest time, and only a write
// after a table's first read fails COMMIT.
func TestTxnModifySlowBlock(t *testing.T) {
	s := testserver.Start(t, testserver.Options{Tick: -1})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, "CREATE TABLE a (k int)", "CREATE TABLE b (k int)",
		"ALTER TABLE b SET (RETAIN HISTORY FOR '1ms')", "INSERT INTO a VALUES (1)", "INSERT INTO b VALUES (1)")
	mustExec(t, c, "BEGIN", "UPDATE a SET k = 2")
	// b's since passes the time of a's read.
	for range 3 {
		time.Sleep(20 * time.Millisecond)
		s.Coordinator.Tick(context.Background())
	}
	mustExec(t, c, "UPDATE b SET k = 2", "COMMIT")
	wantTable(t, c, "SELECT * FROM a", "2")
	wantTable(t, c, "SELECT * FROM b", "2")
}
