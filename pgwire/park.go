package pgwire

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
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

// errHandOff is returned by run on a resumer when the statement that
// parked is done and the connection would wait for its client's next
// message: the connection goes on on a goroutine of its own, as one that
// never parked, and the resumer takes the next woken connection. (A
// CancelRequest storm would otherwise stall the resumers one connection
// at a time.)
var errHandOff = errors.New("pgwire: connection handed off")

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

// resumers runs woken connections on goroutines, in FIFO order: at most
// maxRunning goroutines serve the queue while none of them is stalled, so
// a tick that wakes 10,000 subscribers at once is served by a few
// goroutines whose stacks have grown once, rather than 10,000 goroutines
// with a stack each. A goroutine that takes a connection runs it until it
// parks or ends, and then takes the next waiting one, if any, or ends.
//
// A connection waiting for its client's next message goes on on a
// goroutine of its own (errHandOff), and so does one whose write would
// wait for its client (a client that does not read, or reads slower than
// the server writes): its goroutine gives its place up first (yield).
// One may still block its resumer otherwise: a statement after the
// subscribe in the same query, a read from storage. So that a
// blocked connection does not hold up the queue, a goroutine that has run
// its connection for stallAfter counts as stalled, and another is started
// in its place, by the next add or take that looks (at most every
// stallAfter/4) or by a timer armed while connections wait behind stalled
// goroutines. A stalled goroutine that comes back ends if enough others
// run.
//
// Goroutines are not started ahead of need: each started at once with
// its successor (as before) made a sweep of 10,000 woken connections, CPU
// bound, grow to dozens of runnable goroutines (one more whenever the
// scheduler let a new one begin), and every other goroutine of the
// process, the writer's session among them, waited behind them all in the
// run queues; blocked on the queue's mutex they convoyed on it.
type resumers struct {
	srv *Server
	// run is srv.resume, made once: a go statement of a func value
	// without arguments allocates nothing.
	run func()

	mu          sync.Mutex
	first, last *conn                 // mu: woken connections waiting, linked by conn.nextWoken
	starting    int                   // mu: goroutines started that have not taken a connection
	workers     map[*resumer]struct{} // mu: goroutines that took a connection and have not ended
	nextCheck   time.Time             // mu: when add and take next look for stalled goroutines
	timer       *time.Timer           // mu: runs check while connections wait behind stalled goroutines
	timerSet    bool                  // mu
	closed      bool                  // mu: Close stopped the timer; it is not armed again
	maxRunning  int
	stallAfter  time.Duration
	peak        int // mu: the most goroutines at once (tests)
}

// resumer is one goroutine of the resumers.
type resumer struct {
	// since is when the connection it runs was taken (UnixNano), 0 while
	// it has none.
	since atomic.Int64
	// now writes for the connection it runs without waiting (conn.write).
	now nowWriter
	// yielded is set once it gave its place up (yield): it ends with its
	// connection. Its goroutine's own.
	yielded bool
}

// defaultStallAfter is resumers.stallAfter: well over what a resumed
// connection takes to write a batch, also when its goroutine waits for a
// processor behind others (a scheduler's time slice is 10 ms).
const defaultStallAfter = 50 * time.Millisecond

// add queues a woken connection, and starts a goroutine for it if
// fewer than maxRunning run and none is on its way.
func (r *resumers) add(c *conn) {
	r.mu.Lock()
	if r.last == nil {
		r.first = c
	} else {
		r.last.nextWoken = c
	}
	r.last = c
	start := r.needed(time.Now())
	r.mu.Unlock()
	if start {
		go r.run()
	}
}

// needed reports whether a goroutine must be started for the waiting
// connections, and counts it as starting if so: when none is on its way
// and fewer than maxRunning run that are not stalled. It looks at the
// workers' stalls at most every stallAfter/4; until a goroutine is
// started, a timer looks again. mu must be held.
func (r *resumers) needed(now time.Time) bool {
	if r.first == nil || r.starting > 0 {
		return false
	}
	running := len(r.workers)
	if running >= r.maxRunning && !now.Before(r.nextCheck) {
		r.nextCheck = now.Add(r.stallAfter / 4)
		running = r.unstalled(now)
	}
	if running >= r.maxRunning {
		r.armTimer() // in case no add or take comes to look again
		return false
	}
	r.starting++
	r.peak = max(r.peak, r.starting+len(r.workers))
	// The woken connection is counted in wg until it ends, so
	// Close's Wait cannot have returned.
	r.srv.wg.Add(1)
	return true
}

// unstalled counts the workers that have run their connection for less
// than stallAfter. mu must be held.
func (r *resumers) unstalled(now time.Time) int {
	n := 0
	limit := now.Add(-r.stallAfter).UnixNano()
	for w := range r.workers {
		if since := w.since.Load(); since == 0 || since > limit {
			n++
		}
	}
	return n
}

// armTimer has check run after stallAfter, unless it is set already.
// mu must be held.
func (r *resumers) armTimer() {
	if r.timerSet || r.closed {
		return
	}
	r.timerSet = true
	if r.timer == nil {
		r.timer = time.AfterFunc(r.stallAfter, r.check)
	} else {
		r.timer.Reset(r.stallAfter)
	}
}

// check starts a goroutine for connections waiting behind stalled ones:
// the timer's, when no add or take came to look.
func (r *resumers) check() {
	r.mu.Lock()
	r.timerSet = false
	r.nextCheck = time.Time{}
	start := r.needed(time.Now())
	r.mu.Unlock()
	if start {
		go r.run()
	}
}

// take returns w's next woken connection, or nil when w ends: none
// waits, or w came back from a stall while enough others run. A
// goroutine that begins (began) passes on its start.
func (r *resumers) take(w *resumer, began bool) *conn {
	now := time.Now()
	r.mu.Lock()
	if began {
		r.starting--
		if r.workers == nil {
			r.workers = map[*resumer]struct{}{}
		}
		r.workers[w] = struct{}{}
	} else if since := w.since.Load(); len(r.workers) > r.maxRunning && now.Sub(time.Unix(0, since)) >= r.stallAfter && r.unstalled(now) >= r.maxRunning {
		// Back from a stall, and replaced meanwhile: enough run without
		// w (which the count leaves out: its since is old).
		r.leave(w)
		r.mu.Unlock()
		return nil
	}
	c := r.first
	if c == nil {
		r.leave(w)
		r.mu.Unlock()
		return nil
	}
	r.first, c.nextWoken = c.nextWoken, nil
	if r.first == nil {
		r.last = nil
	}
	w.since.Store(now.UnixNano())
	start := r.needed(now)
	r.mu.Unlock()
	if start {
		go r.run()
	}
	return c
}

// yield gives w's place among the running goroutines up: the write of
// the connection it runs would wait for the client to read, and w is
// about to wait in it. w is no longer one of the resumers, and another
// goroutine is started in its place if connections wait: so a client that
// does not read (or reads slower than the server writes) costs the
// connections behind it no stall of stallAfter before another goroutine
// serves them. w's goroutine goes on as its connection's own, and ends
// once the connection parks or ends (resume).
func (r *resumers) yield(w *resumer) {
	w.yielded = true
	r.mu.Lock()
	r.leave(w)
	start := r.needed(time.Now())
	r.mu.Unlock()
	if start {
		go r.run()
	}
}

// leave ends w. mu must be held.
func (r *resumers) leave(w *resumer) {
	delete(r.workers, w)
	w.since.Store(0)
}

// close stops the timer: called once the server's goroutines have ended.
func (r *resumers) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
}

// resume is a resumer goroutine: it continues woken connections, one at
// a time, until none waits.
func (s *Server) resume() {
	defer s.wg.Done()
	w := &resumer{}
	for c := s.resumers.take(w, true); c != nil; c = s.resumers.take(w, false) {
		c.resumer = w // until it parks: the next resumer sets its own
		s.runConn(c, true)
		if w.yielded {
			return // its place went to another goroutine
		}
	}
}
