package pgwire

import (
	"errors"
	"sync"
)

// A parked connection has no goroutine. When a statement's result waits
// for its next batch (ReadyResult.Ready returned false), the connection's
// goroutine ends instead of blocking: an idle subscriber, waiting perhaps
// for hours and woken once a second for a progress row, then costs no
// goroutine stack (4 KiB at the least, as the runtime shrinks a parked
// goroutine's; 4.2 KiB per idle subscriber measured) and no parked
// channel receivers. The result's wake, or the end of the
// statement's context (cancelAll, cancelStatement), hands the connection
// to the server's resumers (resumers.add), and a goroutine continues it
// from the top of its loop, exactly where the old one left it.
//
// A connection is run by at most one goroutine at a time, which owns it:
// the state below says whether a goroutine runs it, and the handover
// (an atomic swap, then resumers' mutex) orders what the old goroutine
// wrote before what the new one reads.

// Sleep states of a connection (conn.sleep).
const (
	// awake: a goroutine runs the connection.
	awake int32 = iota
	// asleep: parked, no goroutine; the next wake resumes it.
	asleep
	// wokenEarly: a wake came while a goroutine ran the connection; its
	// next attempt to sleep goes on instead (the wake may be the one the
	// parked result asked for, called before the goroutine got to sleep).
	wokenEarly
)

// errParked is returned by run when the connection went to sleep: its
// goroutine ends and leaves the connection as it is, for another goroutine
// to continue.
var errParked = errors.New("pgwire: connection parked")

// prepareSleep readies the connection for a result's Ready: a wake from
// now on, and a cancellation of the statement after it, keep the
// connection awake or resume it. A wake left over from before (a
// CancelRequest of an earlier statement, or a result's wake that raced a
// cancellation) is forgotten: it concerned nothing this park waits for.
// Call it before checking the statement's context and before Ready.
func (c *conn) prepareSleep() {
	c.sleep.Store(awake)
	if c.wakeFn == nil {
		c.wakeFn = c.wake // once per connection: results keep it while parked
	}
}

// trySleep parks the connection after its result's Ready returned false:
// it reports true when the goroutine must end now, without touching the
// connection again (a wake may already be running it on another). It
// reports false when a wake came first: the goroutine goes on.
func (c *conn) trySleep() bool {
	c.park()
	if c.sleep.CompareAndSwap(awake, asleep) {
		return true
	}
	c.sleep.Store(awake)
	return false
}

// wake resumes a parked connection, or, when a goroutine runs it, keeps
// its next trySleep from sleeping. It is the wake a parked result is
// given, and cancelAll and cancelStatement call it after canceling the
// statement. Safe from any goroutine; it never blocks, so a producer may
// call it holding its locks.
func (c *conn) wake() {
	for {
		switch c.sleep.Load() {
		case asleep:
			if c.sleep.CompareAndSwap(asleep, awake) {
				c.srv.resumers.add(c)
				return
			}
		case awake:
			if c.sleep.CompareAndSwap(awake, wokenEarly) {
				return
			}
		default:
			return
		}
	}
}

// resumers runs woken connections on goroutines. A goroutine is started
// for a woken connection only while fewer than maxStarting started ones
// have yet to run; the others wait in a FIFO queue. Each goroutine takes
// one connection as it begins to run, and first starts a successor if
// connections are still waiting, then runs its connection until it parks
// or ends, and takes the next waiting one, if any, before it ends. So a
// tick that wakes 10,000 subscribers at once is served by a few goroutines
// whose stacks have grown once, rather than 10,000 goroutines with a stack
// each; and since every goroutine starts its successor before it runs
// anything that might block (a write to a client that does not read, a
// statement after the subscribe), a blocked connection never holds up the
// queue: while connections wait, a started goroutine is on its way.
type resumers struct {
	srv *Server
	// run is srv.resume, made once: a go statement of a func value
	// without arguments allocates nothing.
	run func()

	mu          sync.Mutex
	first, last *conn // mu: woken connections waiting, linked by conn.nextWoken
	starting    int   // mu: goroutines started that have not taken a connection
	maxStarting int
}

// add queues a woken connection, and starts a goroutine for it if
// fewer than maxStarting are on their way.
func (r *resumers) add(c *conn) {
	r.mu.Lock()
	if r.last == nil {
		r.first = c
	} else {
		r.last.nextWoken = c
	}
	r.last = c
	start := r.starting < r.maxStarting
	if start {
		r.starting++
		// The woken connection is counted in wg until it ends, so
		// Close's Wait cannot have returned.
		r.srv.wg.Add(1)
	}
	r.mu.Unlock()
	if start {
		go r.run()
	}
}

// take returns the next woken connection, or nil when none waits. A
// goroutine that begins (began) passes on its start: it is no longer on
// its way, and it starts a successor when connections are left waiting.
func (r *resumers) take(began bool) *conn {
	r.mu.Lock()
	c := r.first
	if c != nil {
		r.first, c.nextWoken = c.nextWoken, nil
		if r.first == nil {
			r.last = nil
		}
	}
	start := false
	if began {
		r.starting--
		if start = r.first != nil && r.starting < r.maxStarting; start {
			r.starting++
			r.srv.wg.Add(1) // this goroutine is counted: see add
		}
	}
	r.mu.Unlock()
	if start {
		go r.run()
	}
	return c
}

// resume is a resumer goroutine: it continues woken connections, one at
// a time, until none waits.
func (s *Server) resume() {
	defer s.wg.Done()
	for c := s.resumers.take(true); c != nil; c = s.resumers.take(false) {
		s.runConn(c, true)
	}
}
