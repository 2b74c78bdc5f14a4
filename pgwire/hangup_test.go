package pgwire

import (
	"net"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgproto3/v2"
)

// inputs are the two ways a connection reads its client after
// authentication: the socket on its own goroutine, watched for hangups by
// the server (Linux), and an input pipe's goroutine (elsewhere).
var inputs = []struct {
	name string
	pipe bool
}{{"socket", false}, {"pipe", true}}

// startServerInput is startServer with connections reading their input as
// pipe says.
func startServerInput(t *testing.T, b *fakeBackend, pipe bool) *testServer {
	t.Helper()
	ts := startServer(t, b, Config{})
	ts.mu.Lock()
	ts.pipeInput = pipe
	ts.mu.Unlock()
	return ts
}

// countGoroutines counts the goroutines whose stack has fn in it.
func countGoroutines(fn string) int {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// TestIdleConnectionHasOneGoroutine: a connection waiting for its client,
// or inside a statement that waits for rows as an idle subscriber does,
// runs on one goroutine; the server watches all their sockets on one more.
func TestIdleConnectionHasOneGoroutine(t *testing.T) {
	const clients = 10
	b := newFakeBackend()
	ts := startServer(t, b, Config{})
	for i := range clients {
		c := ts.dialRaw(t)
		if i%2 == 1 {
			c.send(query("sleep"))
			<-b.running
		}
	}
	readers, watchers := clients, 0 // an input pipe per connection
	if runtime.GOOS == "linux" {
		readers, watchers = 0, 1
	}
	if got := countGoroutines("pgwire.(*Server).serveConn"); got != clients {
		t.Errorf("%d connection goroutines, want %d", got, clients)
	}
	if got := countGoroutines("pgwire.(*inputPipe).readLoop"); got != readers {
		t.Errorf("%d input pipe goroutines for %d connections, want %d", got, clients, readers)
	}
	if got := countGoroutines("pgwire.(*hangupWatcher).loop"); got != watchers {
		t.Errorf("%d hangup watchers, want %d", got, watchers)
	}
}

// TestHangupEndsWaitingStatement: a client that goes away — closing its
// socket, shutting down its side, or after pipelining more messages —
// while its statement waits for rows that never come ends the statement
// and its session.
func TestHangupEndsWaitingStatement(t *testing.T) {
	hangups := []struct {
		name string
		do   func(c *rawClient)
	}{
		{"close", func(c *rawClient) { c.nc.Close() }},
		{"shutdown", func(c *rawClient) { c.nc.(*net.TCPConn).CloseWrite() }},
		{"after more messages", func(c *rawClient) {
			c.send(query("select 1"), &pgproto3.Sync{})
			c.nc.Close()
		}},
	}
	for _, in := range inputs {
		for _, h := range hangups {
			t.Run(in.name+"/"+h.name, func(t *testing.T) {
				b := newFakeBackend()
				ts := startServerInput(t, b, in.pipe)
				c := ts.dialRaw(t)
				c.send(query("sleep"))
				<-b.running
				h.do(c)
				waitFor(t, "the statement to end and the session to close", func() bool {
					_, closed, ended := b.counts()
					return ended == 1 && closed == 1
				})
			})
		}
	}
}

// TestInputDuringStatementWaits: what a client sends while its statement
// runs waits for the statement, and is then read in order; it does not
// count as a hangup.
func TestInputDuringStatementWaits(t *testing.T) {
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			b := newFakeBackend()
			ts := startServerInput(t, b, in.pipe)
			c := ts.dialRaw(t)
			c.send(query("sleep"))
			<-b.running
			c.send(query("select 2"))
			sendCancel(t, ts.addr, c.pid, c.secret)
			c.expect("ErrorResponse ERROR 57014 canceling statement due to user request", ready)
			c.expect("RowDescription n:20:0", "DataRow 1", "DataRow 2", "CommandComplete SELECT 2", ready)
			if _, closed, ended := b.counts(); closed != 0 || ended != 1 {
				t.Errorf("%d sessions closed, %d statements ended; want 0 and 1", closed, ended)
			}
		})
	}
}
