package pgwire

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgproto3/v2"
)

// asleepCount is the number of connections parked without a goroutine.
func (ts *testServer) asleepCount() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for c := range ts.conns {
		if c.sleep.Load() == asleep {
			n++
		}
	}
	return n
}

// startTick sends "tick" on c, in the simple protocol or as an Execute
// without a row limit, and reads the result's header.
func startTick(c *rawClient, extended bool) {
	if extended {
		c.send(&pgproto3.Parse{Query: "tick"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
		c.expect("ParseComplete", "BindComplete")
		return
	}
	c.send(query("tick"))
	c.expect("RowDescription n:20:0")
}

// TestParkedConnectionsHaveNoGoroutine: connections whose result waits for
// its next batch (idle subscribers) park without a goroutine, in both
// protocols and on both inputs; each wake gets the next row to its client
// and parks the connection again, and what ends a waiting statement
// still ends a parked one: a CancelRequest (57014, and the connection
// serves the next query), the client's hangup (the session closes), and
// Server.Close (FATAL 57P01, every session closed: startServer's cleanup
// checks).
func TestParkedConnectionsHaveNoGoroutine(t *testing.T) {
	const clients = 8
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			b := newFakeBackend()
			b.stepping = true // simple queries park too
			ts := startServerInput(t, b, in.pipe)
			var cs []*rawClient
			for i := range clients {
				c := ts.dialRaw(t)
				startTick(c, i%2 == 1)
				cs = append(cs, c)
			}
			// parked waits for n connections to park and only the
			// others to have goroutines (a goroutine that parked or
			// closed its connection may still be on its way out).
			parked := func(n int) {
				t.Helper()
				waitFor(t, fmt.Sprintf("%d connections parked and only the others running", n), func() bool {
					return ts.asleepCount() == n && countGoroutines("pgwire.(*Server).runConn") == ts.connCount()-n
				})
			}
			parked(clients)
			for tick := 1; tick <= 3; tick++ {
				b.tick()
				for _, c := range cs {
					c.expect(fmt.Sprintf("DataRow %d", tick))
				}
				parked(clients)
			}

			// A CancelRequest wakes its connection to end the statement.
			c := cs[0]
			sendCancel(t, ts.addr, c.pid, c.secret)
			c.expect("ErrorResponse ERROR 57014 canceling statement due to user request", ready)
			c.send(query("select 1"))
			c.expect("RowDescription n:20:0", "DataRow 1", "CommandComplete SELECT 1", ready)

			parked(clients - 1) // and waits for its client on its goroutine

			// A hangup does too: the session ends.
			cs[1].nc.Close()
			waitFor(t, "the hung-up session to close", func() bool { _, closed, _ := b.counts(); return closed == 1 })
			parked(clients - 2)

			// Close wakes the rest, which tell their clients why.
			ts.shutdown(t)
			cs[2].expect("ErrorResponse FATAL 57P01 terminating connection due to administrator command")
		})
	}
}

// TestManyParkedConnectionsWokenAtOnce: a tick that wakes many parked
// connections at once, as a listen batch wakes every idle subscriber,
// reaches every client, however few goroutines the resumers start, and
// repeatedly (run it with -race: a connection resumed on a new
// goroutine must see what the one that parked it wrote).
func TestManyParkedConnectionsWokenAtOnce(t *testing.T) {
	const clients, ticks = 64, 5
	b := newFakeBackend()
	b.stepping = true
	ts := startServer(t, b, Config{})
	ts.resumers.mu.Lock()
	ts.resumers.maxRunning = 1 // the narrowest hand-over
	ts.resumers.mu.Unlock()
	cs := tickingClients(t, ts, clients)
	for tick := 1; tick <= ticks; tick++ {
		waitFor(t, "every connection to park", func() bool { return ts.asleepCount() == clients })
		b.tick()
		want := fmt.Sprintf("DataRow %d", tick)
		errs := make(chan error, clients)
		var wg sync.WaitGroup
		for i, c := range cs {
			wg.Go(func() {
				c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
				if msg, err := c.fe.Receive(); err != nil {
					errs <- fmt.Errorf("client %d: %v", i, err)
				} else if got := summarize(msg); got != want {
					errs <- fmt.Errorf("client %d got %s, want %s", i, got, want)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
}

// tickingClients connects n raw clients, each parked in a stepping
// subscribe (every other one in the extended protocol).
func tickingClients(t *testing.T, ts *testServer, n int) []*rawClient {
	t.Helper()
	var cs []*rawClient
	for i := range n {
		c := ts.dialRaw(t)
		startTick(c, i%2 == 1)
		cs = append(cs, c)
	}
	return cs
}

// steppingServer starts a server on a stepping backend (its subscribes
// advance on b.tick) with the resumers' bounds set.
func steppingServer(t *testing.T, maxRunning int, stallAfter time.Duration) (*testServer, *fakeBackend) {
	t.Helper()
	b := newFakeBackend()
	b.stepping = true
	ts := startServer(t, b, Config{})
	ts.setResumers(maxRunning, stallAfter)
	return ts, b
}

// setResumers sets the server's resumers' bounds.
func (ts *testServer) setResumers(maxRunning int, stallAfter time.Duration) {
	ts.resumers.mu.Lock()
	defer ts.resumers.mu.Unlock()
	ts.resumers.maxRunning, ts.resumers.stallAfter = maxRunning, stallAfter
}

// resumersPeak is the most resumer goroutines the server had at once.
func (ts *testServer) resumersPeak() int {
	ts.resumers.mu.Lock()
	defer ts.resumers.mu.Unlock()
	return ts.resumers.peak
}

// TestResumersStartOnlyWhatRuns: connections woken at once are served by
// at most maxRunning goroutines while none stalls (a stall an hour long
// here): a sweep of woken connections adds no runnable goroutines for
// the rest of the process to wait behind.
func TestResumersStartOnlyWhatRuns(t *testing.T) {
	const clients, ticks, maxRunning = 64, 5, 2
	ts, b := steppingServer(t, maxRunning, time.Hour)
	cs := tickingClients(t, ts, clients)
	for tick := 1; tick <= ticks; tick++ {
		waitFor(t, "every connection to park", func() bool { return ts.asleepCount() == clients })
		b.tick()
		for _, c := range cs {
			c.expect(fmt.Sprintf("DataRow %d", tick))
		}
	}
	if got := ts.resumersPeak(); got < 1 || got > maxRunning {
		t.Errorf("at most %d resumer goroutines at once, want 1 to %d", got, maxRunning)
	}
}

// TestStalledResumerReplaced: a connection that blocks the goroutine
// resuming it (here a statement after its result, which waits until
// canceled) does not hold up the connections woken after it, even with
// one goroutine allowed: another is started once the first has run its
// connection for stallAfter. When the stalled one comes back it ends, and
// the queue goes on with one.
func TestStalledResumerReplaced(t *testing.T) {
	ts, b := steppingServer(t, 1, time.Millisecond)
	stalled, other := ts.dialRaw(t), ts.dialRaw(t)
	stalled.send(query("tickonce; sleep"))
	stalled.expect("RowDescription n:20:0")
	startTick(other, false)
	waitFor(t, "both connections to park", func() bool { return ts.asleepCount() == 2 })
	b.tick()
	stalled.expect("DataRow 1", "CommandComplete SELECT 1")
	if got := <-b.running; got != "sleep" {
		t.Fatalf("started %q, want sleep", got)
	}
	other.expect("DataRow 1")
	// The sleep holds its goroutine: the next tick's wake must not wait
	// for it.
	waitFor(t, "the other connection to park", func() bool { return ts.asleepCount() == 1 })
	b.tick()
	other.expect("DataRow 2")
	sendCancel(t, ts.addr, stalled.pid, stalled.secret)
	stalled.expect("ErrorResponse ERROR 57014 canceling statement due to user request", ready)
	for tick := 3; tick <= 5; tick++ {
		waitFor(t, "the other connection to park", func() bool { return ts.asleepCount() == 1 })
		b.tick()
		other.expect(fmt.Sprintf("DataRow %d", tick))
	}
}

// TestResumedConnectionHandedOff: a resumed connection whose statement
// ended waits for its client's next message on a goroutine of its own,
// not on the resumer (here the only one, and never replaced): the
// connections woken after it are served, and it serves its next query.
func TestResumedConnectionHandedOff(t *testing.T) {
	ts, b := steppingServer(t, 1, time.Hour)
	done, other := ts.dialRaw(t), ts.dialRaw(t)
	done.send(query("tickonce"))
	done.expect("RowDescription n:20:0")
	startTick(other, false)
	for tick := 1; tick <= 3; tick++ {
		waitFor(t, "the ticking connections to park", func() bool { return ts.asleepCount() == 2-min(tick-1, 1) })
		b.tick()
		if tick == 1 {
			done.expect("DataRow 1", "CommandComplete SELECT 1", ready)
		}
		other.expect(fmt.Sprintf("DataRow %d", tick))
	}
	done.send(query("select 1"))
	done.expect("RowDescription n:20:0", "DataRow 1", "CommandComplete SELECT 1", ready)
}

// TestResumerYieldsBeforeBlockingWrite: a resumed connection whose write
// would wait for its client (here a large row, after its result, to a
// client that does not read) gives its resumer's place up before it
// waits, even with one goroutine allowed and stalls an hour away: the
// connections woken after it are served at once, and it finishes its
// write once its client reads.
func TestResumerYieldsBeforeBlockingWrite(t *testing.T) {
	const big = 1 << 23
	b := newFakeBackend()
	b.stepping = true
	ts := startServer(t, b, Config{NotSentLowWater: 16 << 10})
	ts.setResumers(1, time.Hour)
	stalled, other := ts.dialRaw(t), ts.dialRaw(t)
	stalled.send(query(fmt.Sprintf("tickonce; big %d", big)))
	stalled.expect("RowDescription n:20:0")
	startTick(other, false)
	for tick := 1; tick <= 3; tick++ {
		waitFor(t, "the ticking connection to park", func() bool { return ts.asleepCount() == 1+max(0, 1-(tick-1)) })
		b.tick()
		other.expect(fmt.Sprintf("DataRow %d", tick))
	}
	stalled.expect("DataRow 1", "CommandComplete SELECT 1", "RowDescription echo:25:0")
	if row, ok := stalled.receive().(*pgproto3.DataRow); !ok || len(row.Values) != 1 || len(row.Values[0]) != big {
		t.Fatalf("got %v, want the big row", row)
	}
	stalled.expect("CommandComplete SELECT 1", ready)
}
