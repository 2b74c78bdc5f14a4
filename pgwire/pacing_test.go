package pgwire

import (
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgproto3/v2"
	"github.com/jackc/pgx/v5"
)

// stalledBig has a raw client ask for a result of n bytes and not read
// it: the server's write of it blocks, holding a turn (a small low-water
// mark keeps the kernel from taking it all).
func stalledBig(t *testing.T, ts *testServer, n int) *rawClient {
	t.Helper()
	c := ts.dialRaw(t)
	c.send(query("big " + strconv.Itoa(n)))
	return c
}

// bigQuery runs "big n" on a new connection and reports its error, or
// whether the row was whole, on done.
func bigQuery(t *testing.T, ts *testServer, n int) <-chan error {
	conn := ts.connect(t, "alice", "")
	done := make(chan error, 1)
	go func() {
		var s string
		err := conn.QueryRow(testContext(t), "big "+strconv.Itoa(n), pgx.QueryExecModeSimpleProtocol).Scan(&s)
		if err == nil && len(s) != n {
			err = errShort(len(s), n)
		}
		done <- err
	}()
	return done
}

type shortErr struct{ got, want int }

func (e shortErr) Error() string {
	return "got " + strconv.Itoa(e.got) + " bytes, want " + strconv.Itoa(e.want)
}
func errShort(got, want int) error { return shortErr{got, want} }

// drain reads a raw client's messages up to its ReadyForQuery and returns
// the bytes of the DataRows' values.
func (c *rawClient) drain() int {
	c.t.Helper()
	n := 0
	for {
		switch m := c.receive().(type) {
		case *pgproto3.DataRow:
			for _, v := range m.Values {
				n += len(v)
			}
		case *pgproto3.ErrorResponse:
			c.t.Fatalf("drain: %s", summarize(m))
		case *pgproto3.ReadyForQuery:
			return n
		}
	}
}

// TestLargeWritersTakeTurns: with one turn for large writes, a second
// connection's large result waits while the first one's client does not
// read (the stall is long), and goes out once the first result is done;
// both arrive whole.
func TestLargeWritersTakeTurns(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{LargeWriters: 1, LargeWriteTurn: time.Hour, NotSentLowWater: 16 << 10})
	const size = 8 << 20
	a := stalledBig(t, ts, size)
	waitFor(t, "the first result to take the turn", func() bool { return len(ts.pacer.slots) == 1 })
	done := bigQuery(t, ts, 1<<20)
	waitFor(t, "the second result to wait for its turn", func() bool { return ts.pacer.waits.Load() == 1 })
	select {
	case err := <-done:
		t.Fatalf("the second result went out while the first held the turn (err %v)", err)
	default:
	}
	if got := a.drain(); got != size {
		t.Fatalf("first result: %d bytes, want %d", got, size)
	}
	if err := <-done; err != nil {
		t.Fatalf("second result: %v", err)
	}
	waitFor(t, "the turn to be given back", func() bool { return len(ts.pacer.slots) == 0 })
	if n := ts.pacer.expired.Load(); n != 0 {
		t.Errorf("turns expired = %d, want 0", n)
	}
}

// TestLargeWriteTurnGivesTurnUp: a client that does not read holds the
// turn for LargeWriteTurn only; the next connection's large result then
// goes out while the first still waits for its client.
func TestLargeWriteTurnGivesTurnUp(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{LargeWriters: 1, LargeWriteTurn: 20 * time.Millisecond, NotSentLowWater: 16 << 10})
	a := stalledBig(t, ts, 8<<20)
	waitFor(t, "the stalled write's turn to end", func() bool { return ts.pacer.expired.Load() >= 1 })
	if err := <-bigQuery(t, ts, 1<<20); err != nil {
		t.Fatalf("second result: %v", err)
	}
	if got := a.drain(); got != 8<<20 {
		t.Fatalf("first result: %d bytes, want %d", got, 8<<20)
	}
	waitFor(t, "every turn to be given back", func() bool { return len(ts.pacer.slots) == 0 })
}

// TestLargeWriteWaitEndsWithConnection: a connection waiting for its turn
// ends when its client leaves, holding no turn, and the server shuts down
// cleanly with a stalled client still connected.
func TestLargeWriteWaitEndsWithConnection(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{LargeWriters: 1, LargeWriteTurn: time.Hour, NotSentLowWater: 16 << 10})
	stalledBig(t, ts, 8<<20)
	waitFor(t, "the first result to take the turn", func() bool { return len(ts.pacer.slots) == 1 })
	b := ts.dialRaw(t)
	b.send(query("big " + strconv.Itoa(1<<20)))
	waitFor(t, "the second result to wait for its turn", func() bool { return ts.pacer.waits.Load() == 1 })
	b.nc.Close()
	waitFor(t, "the waiting connection to end", func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return len(ts.conns) == 1
	})
	if n := len(ts.pacer.slots); n != 1 {
		t.Errorf("%d turns held, want the stalled one's", n)
	}
}

// TestLargeWritersConfig: negative values are refused.
func TestLargeWritersConfig(t *testing.T) {
	for _, cfg := range []Config{{LargeWriters: -1}, {LargeWriteTurn: -time.Second}} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", cfg)
		}
	}
}
