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
// large write outside a result (the end of a query's output). A client
// that does not read cannot hold a slot: after Config.LargeWriteStall in
// one write, a timer gives the slot back, and the write goes on without
// it (a later large write waits for a slot again).

// pacer is the server's slots for large writes; nil when not paced.
type pacer struct {
	slots chan struct{}
	stall time.Duration
	// waits counts large writes that waited for a slot; stalls the slots
	// given back by the stall timer.
	waits, stalls atomic.Int64
}

// newPacer returns a pacer of n slots, or nil for n <= 0 (not paced).
func newPacer(n int, stall time.Duration) *pacer {
	if n <= 0 {
		return nil
	}
	return &pacer{slots: make(chan struct{}, n), stall: stall}
}

// writeSlot is a connection's hold on one of its server's pacer's slots.
// held is set by the connection's goroutine when it takes a slot, and
// cleared by whoever gives it back first: the goroutine, or the stall timer
// while a write blocks.
type writeSlot struct {
	held  atomic.Bool
	timer *time.Timer // the stall timer, made at the first large write
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
}

// giveSlot gives the connection's slot back, if it holds one. Safe from
// any goroutine; it never blocks.
func (c *conn) giveSlot() {
	if c.slot.held.CompareAndSwap(true, false) {
		<-c.srv.pacer.slots
	}
}

// armStall starts the stall timer of a large write holding a slot;
// disarmStall stops it once the write returned.
func (c *conn) armStall() {
	if !c.slot.held.Load() {
		return
	}
	if c.slot.timer == nil {
		c.slot.timer = time.AfterFunc(c.srv.pacer.stall, c.stalled)
		return
	}
	c.slot.timer.Reset(c.srv.pacer.stall)
}

func (c *conn) disarmStall() {
	if c.slot.timer != nil {
		c.slot.timer.Stop()
	}
}

// stalled is the stall timer: the write it watched has blocked for the
// pacer's stall, and its slot goes to a connection that waits.
func (c *conn) stalled() {
	if c.slot.held.CompareAndSwap(true, false) {
		c.srv.pacer.stalls.Add(1)
		<-c.srv.pacer.slots
	}
}
