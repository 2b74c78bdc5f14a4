package pgwire

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgproto3/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestMaxConnections fills the server to MaxConnections, then opens 100 more
// connections: each must get FATAL 53300 at once (not hang until its
// connect timeout), while the admitted ones keep working and a
// CancelRequest still reaches them. A freed slot admits a new connection.
func TestMaxConnections(t *testing.T) {
	const max = 5
	b := newFakeBackend()
	ts := startServer(t, b, Config{MaxConnections: max})
	var held []*pgx.Conn
	for range max - 1 {
		held = append(held, ts.connect(t, "alice", ""))
	}
	raw := ts.dialRaw(t) // the last slot

	const extra = 100
	var wg sync.WaitGroup
	errs := make(chan error, extra)
	sem := make(chan struct{}, 10) // fewer than maxRefusing at once
	for range extra {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			conn, err := pgx.Connect(testContext(t), ts.url("alice", "connect_timeout=20"))
			if err == nil {
				conn.Close(context.Background())
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		checkPgError(t, err, "FATAL", "53300", "sorry, too many clients already")
	}

	// The admitted connections are unaffected, and cancel requests, which
	// need no slot, still work.
	for i, c := range held {
		if got := collectInts(t, c, pgx.QueryExecModeSimpleProtocol, "select 3"); len(got) != 3 {
			t.Errorf("held connection %d: select 3 returned %v", i, got)
		}
	}
	raw.send(query("sleep"))
	<-b.running
	sendCancel(t, ts.addr, raw.pid, raw.secret)
	raw.expect("ErrorResponse ERROR 57014 canceling statement due to user request", ready)

	// A freed slot is free again.
	held[0].Close(testContext(t))
	waitFor(t, "the closed connection to be forgotten", func() bool { return ts.connCount() == max-1 })
	ts.connect(t, "alice", "")
}

// TestMaxConnectionsRefusalsBounded checks that refusals in progress are
// bounded: with maxRefusing clients being refused (silent, so they hold
// their refusal), the next connection is closed without a word, and once
// they are gone a new client is refused with 53300 again.
func TestMaxConnectionsRefusalsBounded(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{MaxConnections: 1})
	ts.refuseTimeout = time.Hour // the silent clients must not time out during the test
	ts.dialRaw(t)
	var silent []*rawClient
	for range maxRefusing {
		silent = append(silent, ts.dialRawNoStartup(t))
	}
	waitFor(t, "the silent clients to be refusing", func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return ts.refusing == maxRefusing
	})
	c := ts.dialRawNoStartup(t)
	c.send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: map[string]string{"user": "alice"}})
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if msg, err := c.fe.Receive(); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) && !isDisconnect(err) {
		t.Fatalf("connection past the refusal bound: got %v, %v; want it closed", summarize(msg), err)
	}

	for _, s := range silent {
		s.nc.Close()
	}
	waitFor(t, "the silent clients to be forgotten", func() bool { return ts.connCount() == 1 })
	_, err := pgx.Connect(testContext(t), ts.url("alice", ""))
	checkPgError(t, err, "FATAL", "53300", "sorry, too many clients already")
}

// checkPgError checks that err is a Postgres error with that severity, code
// and message.
func checkPgError(t *testing.T, err error, severity, code, msg string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatalf("got %v, want %s %s %s", err, severity, code, msg)
	}
	got := pgErr.Severity + " " + pgErr.Code + " " + pgErr.Message
	if want := severity + " " + code + " " + msg; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
