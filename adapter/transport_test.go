package adapter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/sql"
)

// TestWouldWait: a fast-path subscription that took what was ready would
// wait, and a tick or a write makes it not wait: the HTTP feed sends a
// stream's head with its first batch when WouldWait says that batch is
// ready. (With PROGRESS, every Next returns by the next tick.)
func TestWouldWait(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, "CREATE TABLE ww (a int NOT NULL)", "INSERT INTO ww VALUES (1)")
	st, err := sql.Parse("SUBSCRIBE ww WITH (PROGRESS)")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := s.Coordinator.Subscribe(ctx, "materialize", "test", st.(*sql.Subscribe))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	// until WouldWait calls Next until it reports want.
	until := func(want bool) {
		t.Helper()
		for sub.WouldWait() != want {
			if _, err := sub.Next(ctx, 0); err != nil {
				t.Fatalf("WouldWait never became %v: %v", want, err)
			}
		}
	}
	until(true)
	mustExec(t, c, "INSERT INTO ww VALUES (2)")
	for sub.WouldWait() {
		if ctx.Err() != nil {
			t.Fatal("WouldWait stayed true after a write and ticks")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := sub.Next(ctx, 0); err != nil {
		t.Fatal(err)
	}
	until(true)
}

// TestTailSubscribeErrors: a tail process refuses a feed subscribe of a
// collection the role may not read, or of none, with the error a pgwire
// client gets (42501, 42P01), not with the 0A000 meant for subscribes off
// its fast path: the feed answers 403 and 404, not 400.
func TestTailSubscribeErrors(t *testing.T) {
	p := startPasswordServers(t, append(privSetup, "CREATE TABLE tse (a int8)", "CREATE VIEW tse_v AS SELECT a FROM tse WHERE a > 1")...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct{ stmt, code string }{
		{"SUBSCRIBE tse", denied},
		{"SUBSCRIBE (SELECT a FROM tse WHERE a > 1)", denied},
		{"SUBSCRIBE tse_v", denied},
		{"SUBSCRIBE nonexistent", "42P01"},
	} {
		st, err := sql.Parse(tc.stmt)
		if err != nil {
			t.Fatal(err)
		}
		sub, err := p.proxy.Coordinator.Subscribe(ctx, privNone, "test", st.(*sql.Subscribe))
		if err == nil {
			sub.Close()
		}
		var e *adapter.Error
		if !errors.As(err, &e) || e.Code != tc.code {
			t.Errorf("%s in a tail process: got %v, want SQLSTATE %s", tc.stmt, err, tc.code)
		}
	}
}
