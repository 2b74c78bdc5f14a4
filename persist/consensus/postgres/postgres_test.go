package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/internal/testsupport/pgtest"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/persisttest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConsensus(t *testing.T) {
	persisttest.TestConsensus(t, func(t *testing.T) persist.Consensus {
		return mustOpen(t, pgtest.URL(t))
	})
}

// TestTwoPoolsRace races writers through two Consensus on one database,
// as two processes would.
func TestTwoPoolsRace(t *testing.T) {
	url := pgtest.URL(t)
	a, b := mustOpenClosed(t, url), mustOpenClosed(t, url)
	persisttest.ConsensusRace(t, "race", persisttest.ConsensusRaceRounds, a, b, a, b, a, b, a, b)
}

// TestConcurrentOpen opens many Consensus on a new database at once: their
// CREATE TABLE IF NOT EXISTS race, and every Open must still succeed.
func TestConcurrentOpen(t *testing.T) {
	url := pgtest.URL(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			c, err := Open(t.Context(), url)
			if err != nil {
				t.Errorf("Open: %v", err)
				return
			}
			c.Close()
		})
	}
	wg.Wait()
}

func TestSessionsAreSerializable(t *testing.T) {
	c := mustOpenClosed(t, pgtest.URL(t))
	var level string
	if err := c.pool.QueryRow(t.Context(), "SHOW transaction_isolation").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "serializable" {
		t.Fatalf("transaction_isolation = %q, want serializable", level)
	}
}

// TestWatchAcrossInstances checks the LISTEN/NOTIFY doorbell: a CAS by
// another Consensus (another process, in production) rings this one's
// watchers.
func TestWatchAcrossInstances(t *testing.T) {
	url := pgtest.URL(t)
	a, b := mustOpenClosed(t, url), mustOpenClosed(t, url)
	ch, err := a.Watch(t.Context())
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	// The listener connects in the background; until it LISTENs,
	// notifications are lost. So keep writing until one rings.
	var expected *persist.SeqNo
	deadline := time.After(10 * time.Second)
	for seq := persist.SeqNo(1); ; seq++ {
		ok, err := b.CompareAndSet(t.Context(), "remote", expected, persist.VersionedData{SeqNo: seq})
		if err != nil || !ok {
			t.Fatalf("CAS = %v, %v; want committed", ok, err)
		}
		expected = &seq
		select {
		case key := <-ch:
			if key != "remote" {
				t.Fatalf("rang %q, want %q", key, "remote")
			}
			return
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no ring from the other Consensus's CAS within 10s")
		}
	}
}

// TestErrorClassification drives a CAS into each kind of failure and
// checks determinate against indeterminate.
func TestErrorClassification(t *testing.T) {
	t.Run("Closed", func(t *testing.T) {
		c := mustOpen(t, pgtest.URL(t))
		c.Close()
		ok, err := c.CompareAndSet(t.Context(), "k", nil, persist.VersionedData{SeqNo: 1})
		if ok || err == nil || persist.IsIndeterminate(err) {
			t.Fatalf("CAS after Close = %v, %v; want a determinate error", ok, err)
		}
		if _, err := c.Truncate(t.Context(), "k", 0); err == nil || persist.IsIndeterminate(err) {
			t.Fatalf("Truncate after Close = %v; want a determinate error", err)
		}
	})

	t.Run("ServerError", func(t *testing.T) {
		url := pgtest.URL(t)
		c := mustOpenClosed(t, url)
		admin := connect(t, url)
		if _, err := admin.Exec(t.Context(), "DROP TABLE consensus"); err != nil {
			t.Fatal(err)
		}
		ok, err := c.CompareAndSet(t.Context(), "k", nil, persist.VersionedData{SeqNo: 1})
		if ok || !isCode(err, "42P01") || persist.IsIndeterminate(err) {
			t.Fatalf("CAS on a dropped table = %v, %v; want a determinate undefined_table", ok, err)
		}
	})

	t.Run("TimeoutAfterSend", func(t *testing.T) {
		url := pgtest.URL(t)
		c := mustOpenClosed(t, url)
		lockTable(t, connect(t, url))
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		ok, err := c.CompareAndSet(ctx, "k", nil, persist.VersionedData{SeqNo: 1})
		if ok || !persist.IsIndeterminate(err) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("CAS blocked past its deadline = %v, %v; want indeterminate DeadlineExceeded", ok, err)
		}
	})

	t.Run("BackendTerminated", func(t *testing.T) {
		url := pgtest.URL(t)
		c := mustOpenClosed(t, url)
		admin := connect(t, url)
		lockTable(t, connect(t, url))
		result := make(chan error, 1)
		go func() {
			_, err := c.CompareAndSet(t.Context(), "k", nil, persist.VersionedData{SeqNo: 1})
			result <- err
		}()
		// Wait until the CAS waits for the lock, then kill its backend.
		deadline := time.Now().Add(10 * time.Second)
		for {
			var n int
			err := admin.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO consensus%'`).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the CAS never waited for the lock")
			}
			time.Sleep(20 * time.Millisecond)
		}
		err := <-result
		if !persist.IsIndeterminate(err) {
			t.Fatalf("CAS whose backend was terminated: %v; want indeterminate", err)
		}
	})
}

func TestDeterminate(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: codeSerializationFailure}, true},
		{&pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "42P01"}, true},
		{&pgconn.PgError{Severity: "ERREUR", SeverityUnlocalized: "ERROR", Code: "23502"}, true},
		{&pgconn.PgError{Severity: "ERROR", Code: "23502"}, true}, // before 9.6
		{&pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}, false},
		{&pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: codeStatementCompletionUnknown}, false},
		{&acquireError{errors.New("closed pool")}, true},
		{fmt.Errorf("wrapped: %w", &acquireError{context.Canceled}), true},
		{io.ErrUnexpectedEOF, false},
		{context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		if got := determinate(tt.err); got != tt.want {
			t.Errorf("determinate(%#v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestOpenBadURL(t *testing.T) {
	_, err := Open(t.Context(), "postgres://user:secret@127.0.0.1:1/db?connect_timeout=1")
	if err == nil {
		t.Fatal("Open of an unreachable server: no error")
	}
	if s := err.Error(); strings.Contains(s, "secret") {
		t.Errorf("error shows the password: %s", s)
	}
}

func BenchmarkCAS(b *testing.B) {
	c, err := Open(b.Context(), pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	persisttest.BenchmarkConsensusCompareAndSet(b, c)
}

func mustOpen(t *testing.T, url string) *Consensus {
	t.Helper()
	c, err := Open(t.Context(), url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return c
}

func mustOpenClosed(t *testing.T, url string) *Consensus {
	t.Helper()
	c := mustOpen(t, url)
	t.Cleanup(func() { c.Close() })
	return c
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// lockTable holds an ACCESS EXCLUSIVE lock on the consensus table through
// conn until the test ends, so that every statement on it waits.
func lockTable(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(t.Context(), "LOCK TABLE consensus IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
}
