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
	ts.resumers.maxStarting = 1 // the narrowest hand-over
	ts.resumers.mu.Unlock()
	var cs []*rawClient
	for i := range clients {
		c := ts.dialRaw(t)
		startTick(c, i%2 == 1)
		cs = append(cs, c)
	}
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
