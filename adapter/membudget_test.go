package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/tail"
)

// TestSubscribeTimestampOverMemoryBudget: on both paths, an ordered
// snapshot (one timestamp, held back whole) larger than the process's
// memory budget fails with 53200 and a message naming the budget, even
// though max_result_size would allow it.
func TestSubscribeTimestampOverMemoryBudget(t *testing.T) {
	for _, p := range subscribePaths {
		t.Run(p.name, func(t *testing.T) {
			s := testserver.Start(t, testserver.Options{Tail: tail.Config{Budget: membudget.New(64 << 10)}})
			c := connect(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			execAll(t, c, "CREATE TABLE t (a int NOT NULL, b text)")
			insertSeries(t, c, "t", 20000)
			execAll(t, c, "SET enable_subscribe_persist_fast_path = "+p.flag, "SET max_result_size = '1GB'")
			execAll(t, c, "BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE t WITH (PROGRESS) WITHIN TIMESTAMP ORDER BY a DESC")
			err := fetchSnapshotErr(ctx, c)
			var pe *pgconn.PgError
			want := "SUBSCRIBE timestamp exceeds the server's memory budget of 64 KiB (--memory-budget)"
			if !errors.As(err, &pe) || pe.Code != "53200" || pe.Message != want {
				t.Fatalf("got %v, want 53200 %s", err, want)
			}
		})
	}
}

// TestDataflowSubscribeEndedByMemoryBudget: a dataflow-path subscribe whose
// unread results pass the process's memory budget, with nothing on the
// fast path to shed, is ended with 53200 and a message naming the budget;
// the server goes on serving.
func TestDataflowSubscribeEndedByMemoryBudget(t *testing.T) {
	budget := membudget.New(128 << 10)
	s := testserver.Start(t, testserver.Options{Tail: tail.Config{Budget: budget}})
	reader, writer := connect(t, s), connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	execAll(t, writer, "CREATE TABLE t (a int NOT NULL, b text)")
	execAll(t, reader, "SET enable_subscribe_persist_fast_path = off", "BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE t WITH (PROGRESS)")
	if _, err := fetchErr(ctx, reader, "FETCH 1 c"); err != nil { // the subscribe runs
		t.Fatal(err)
	}
	insertSeries(t, writer, "t", 20000) // about 1 MiB of rows, unread
	// The reader waits for the policy before it fetches: a FETCH in flight
	// when the rows arrive would take them off the queue (they are read,
	// not held), and the rows reach the subscribe after the COPY returns.
	for budget.Ended() == 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	var err error
	for err == nil && ctx.Err() == nil {
		_, err = fetchErr(ctx, reader, "FETCH ALL c")
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53200" || !strings.Contains(pe.Message, "memory budget of 128KiB (--memory-budget)") {
		t.Fatalf("got %v, want 53200 naming the memory budget of 128KiB", err)
	}
	execAll(t, writer, "INSERT INTO t VALUES (1, 'after')") // the server goes on
}

// TestTransactionWritesOverMemoryBudget: the writes a transaction block
// holds until COMMIT count in the memory budget; a COPY in a block that
// would take the process past it fails with 53200 as its rows arrive
// (the block fails, nothing is applied), its bytes are given back, and the
// same load outside a block, which streams, lands.
func TestTransactionWritesOverMemoryBudget(t *testing.T) {
	budget := membudget.New(256 << 10)
	s := testserver.Start(t, testserver.Options{Tail: tail.Config{Budget: budget}})
	c := connect(t, s)
	execAll(t, c, "CREATE TABLE t (a int NOT NULL, b text)")
	execAll(t, c, "BEGIN", "INSERT INTO t VALUES (-1, 'small')")
	if got := budget.Holder(membudget.HolderTxnWrites).Bytes(); got <= 0 {
		t.Errorf("txn_writes holds %d bytes with a row pending", got)
	}
	var sb strings.Builder
	for i := range 20000 { // about 1 MiB of rows as decoded
		fmt.Fprintf(&sb, "%d\tv%d\n", i, i)
	}
	_, err := c.PgConn().CopyFrom(context.Background(), strings.NewReader(sb.String()), "COPY t FROM STDIN")
	var pe *pgconn.PgError
	want := "transaction's writes exceed the server's memory budget of 256 KiB (--memory-budget)"
	if !errors.As(err, &pe) || pe.Code != "53200" || pe.Message != want || pe.Hint == "" {
		t.Fatalf("COPY in a block: %v, want 53200 %s with a hint", err, want)
	}
	_, err = c.Exec(context.Background(), "COMMIT")
	if err != nil {
		t.Fatal(err)
	}
	if got := budget.Holder(membudget.HolderTxnWrites).Bytes(); got != 0 {
		t.Errorf("txn_writes holds %d bytes after the block ended", got)
	}
	if got := queryRows(t, c, "SELECT a FROM t"); len(got) != 0 {
		t.Errorf("%d rows after the failed block, want 0", len(got))
	}
	if _, err := c.PgConn().CopyFrom(context.Background(), strings.NewReader(sb.String()), "COPY t FROM STDIN"); err != nil {
		t.Fatalf("COPY outside a block: %v", err)
	}
}

// TestFailedBlockGivesBackWrites: once a statement fails in a transaction
// block, the block's writes can never commit, so their bytes leave the
// memory budget at once, not at ROLLBACK: a client idle in a failed block
// (after a 53200 of its own) held the budget, and another client's small
// transaction failed with 53200 until the first rolled back.
func TestFailedBlockGivesBackWrites(t *testing.T) {
	budget := membudget.New(256 << 10)
	s := testserver.Start(t, testserver.Options{Tail: tail.Config{Budget: budget}})
	c := connect(t, s)
	ctx := context.Background()
	execAll(t, c, "CREATE TABLE t (a int NOT NULL, b text)")
	var sb strings.Builder
	for i := range 20000 { // about 1 MiB of rows as decoded
		fmt.Fprintf(&sb, "%d\tv%d\n", i, i)
	}
	execAll(t, c, "BEGIN", "INSERT INTO t VALUES (-1, 'small')")
	_, err := c.PgConn().CopyFrom(ctx, strings.NewReader(sb.String()), "COPY t FROM STDIN")
	wantCode(t, err, "53200", "COPY in a block over the budget")
	if got := budget.Holder(membudget.HolderTxnWrites).Bytes(); got != 0 {
		t.Errorf("txn_writes holds %d bytes in the failed block", got)
	}
	other := connect(t, s)
	execAll(t, other, "BEGIN", "INSERT INTO t VALUES (1, 'other')", "COMMIT")
	_, err = c.Exec(ctx, "INSERT INTO t VALUES (2, 'after')")
	wantCode(t, err, "25P02", "a write in the failed block")
	execAll(t, c, "COMMIT")
	if got := queryRows(t, c, "SELECT a FROM t"); strings.Join(got, ",") != "1" {
		t.Errorf("rows %v after the failed block, want the other client's 1", got)
	}
	if got := budget.Holder(membudget.HolderTxnWrites).Bytes(); got != 0 {
		t.Errorf("txn_writes holds %d bytes after the block ended", got)
	}
}
