package pgwire

import (
	"sync/atomic"
	"time"
)

// Pacing of large writes (Config.LargeWriters). In a storm, thousands of
// clients take a large snapshot at once. Unpaced, every connection writes
// at the same time: each socket's queues fill (the server's send queue up
// to the low-water mark, the client's receive queue up to its window), so
// that the host's TCP memory grows with the number of clients, past
// net.ipv4.tcp_mem's pressure threshold, where the kernel shrinks every
// socket's buffers and the server's writes become more and smaller; and
// every client finishes near the end of the storm. Paced, at most
// LargeWriters connections write a large result at once and the others
// wait their turn in order: the kernel holds the queues of those few, the
// cost per client stays what it is for a small storm, and half the
// clients finish in the first half of the storm.
//
// A write of flushThreshold bytes or more (a full send buffer, or a large
// message written where it lies) needs one of the pacer's slots. The
// connection takes one at its first large write and keeps it while its
// result goes on producing, so that a snapshot goes out as a whole; it
// gives the slot back when the result is done, suspended or waits for new
// data (it parks, or calls Next on a result that may block), and after a
// large write outside a result (the end of a query's output). A turn lasts
// at most Config.LargeWriteTurn: then a timer gives the slot back, whether
// the connection's write is blocked (a client that does not read) or it
// has more to write (a huge result, a slow client), and its next large
// write waits at the back of the line. No client can hold the others up
// for longer than that.

// pacer is the server's slots for large writes; nil when not paced.
type pacer struct {
	slots chan struct{}
	turn  time.Duration
	// waits counts large writes that waited for a slot; expired the turns
	// the timer ended.
	waits, expired atomic.Int64
}

// newPacer returns a pacer of n slots, or nil for n <= 0 (not paced).
func newPacer(n int, turn time.Duration) *pacer {
	if n <= 0 {
		return nil
	}
	return &pacer{slots: make(chan struct{}, n), turn: turn}
}

// writeSlot is a connection's hold on one of its server's pacer's slots.
// held is set by the connection's goroutine when it takes a slot, and
// cleared by whoever gives it back first: the goroutine, or the turn's
// timer.
type writeSlot struct {
	held  atomic.Bool
	timer *time.Timer // ends the turn; made at the connection's first turn
	// inResult is set while runResult runs: a large write then keeps its
	// slot for the result's next ones.
	inResult bool
}

// takeSlot waits for a slot before a large write, unless the connection
// holds one or the server is not paced. A connection that ends while it
// waits writes without one (its write fails or delivers its last error).
func (c *conn) takeSlot() {
	p := c.srv.pacer
	if p == nil || c.slot.held.Load() {
		return
	}
	select {
	case p.slots <- struct{}{}:
	default:
		p.waits.Add(1)
		select {
		case p.slots <- struct{}{}:
		case <-c.ctx.Done():
			return
		}
	}
	c.slot.held.Store(true)
	if c.slot.timer == nil {
		c.slot.timer = time.AfterFunc(p.turn, c.endTurn)
	} else {
		c.slot.timer.Reset(p.turn)
	}
}

// giveSlot gives the connection's slot back, if it holds one; the
// connection's goroutine calls it.
func (c *conn) giveSlot() {
	if c.slot.held.CompareAndSwap(true, false) {
		c.slot.timer.Stop()
		<-c.srv.pacer.slots
	}
}

// endTurn is the turn's timer: the connection has held its slot for the
// pacer's turn, and the slot goes to a connection that waits. (A timer
// that fires as its turn ends otherwise may end the connection's next turn
// early: a turn is at most, not exactly, the pacer's.)
func (c *conn) endTurn() {
	if c.slot.held.CompareAndSwap(true, false) {
		c.srv.pacer.expired.Add(1)
		<-c.srv.pacer.slots
	}
}
