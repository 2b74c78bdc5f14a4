package adapter_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/leakcheck"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// TestNoGoroutineOutlivesServer runs subscribes on both paths (bare
// collections, a query, a constant; cursors and COPY, ended by the client
// and by closing the server under them), stops the server, and
// checks that every goroutine it started has returned.
func TestNoGoroutineOutlivesServer(t *testing.T) {
	baseline := runtime.NumGoroutine()
	s := testserver.Start(t, testserver.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := func() *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, s.URL())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := dial()
	mustExec(t, c, "CREATE TABLE t (k int8)", "INSERT INTO t VALUES (1), (2), (3)")

	var open []*pgx.Conn
	copies := make(chan error, 6)
	for _, fast := range []bool{true, false} {
		for _, q := range []string{"SUBSCRIBE t", "SUBSCRIBE (SELECT k FROM t WHERE k > 1)", "SUBSCRIBE (VALUES (1))"} {
			// Ended by the client: a cursor fetched from and closed.
			mustExec(t, c, fmt.Sprintf("SET enable_subscribe_persist_fast_path = %v", fast),
				"BEGIN", "DECLARE c CURSOR FOR "+q, "FETCH 1 c", "COMMIT")
			// Running when the server stops: a cursor and a COPY.
			held := dial()
			mustExec(t, held, fmt.Sprintf("SET enable_subscribe_persist_fast_path = %v", fast),
				"BEGIN", "DECLARE c CURSOR FOR "+q, "FETCH 1 c")
			open = append(open, held)
			streaming := dial()
			if _, err := streaming.Exec(ctx, fmt.Sprintf("SET enable_subscribe_persist_fast_path = %v", fast)); err != nil {
				t.Fatal(err)
			}
			// The goroutine owns the connection: a pgx.Conn is not safe
			// to close from another goroutine while it is in use.
			go func() {
				_, err := streaming.PgConn().CopyTo(ctx, discard{}, "COPY ("+q+") TO STDOUT")
				streaming.Close(context.Background())
				copies <- err
			}()
		}
	}
	if err := waitFor(10*time.Second, func() error {
		if n := len(queryRows(t, c, "SELECT id FROM mz_internal.mz_subscriptions")); n != 2*3*2 {
			return fmt.Errorf("%d subscriptions running, want %d", n, 2*3*2)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	s.Stop()
	for range cap(copies) {
		if err := <-copies; err == nil {
			t.Errorf("a COPY (SUBSCRIBE) without UP TO ended without an error when the server stopped")
		}
	}
	for _, oc := range append(open, c) {
		oc.Close(context.Background())
	}
	leakcheck.Check(t, baseline, "after the server stopped")
}

// discard is an io.Writer that drops what it is given.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
