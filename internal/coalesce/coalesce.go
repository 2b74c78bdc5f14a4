// Package coalesce shares linearizable reads among concurrent callers.
//
// A read that started before a caller arrived cannot serve it: it may miss
// a write acknowledged just before the call. So callers that arrive while a
// read is in flight wait for the one read that starts when it ends, and
// share it. A storm of N callers costs two reads, not N.
package coalesce

import (
	"context"
	"sync"
)

// Reads runs read on behalf of callers of Do. read runs on its own
// goroutine, not under any caller's context: it serves them all.
type Reads struct {
	read func() error

	mu       sync.Mutex
	inflight *call // mu: the read in progress
	next     *call // mu: the read that starts when inflight ends
}

type call struct {
	done chan struct{}
	err  error
}

// New returns Reads that performs read.
func New(read func() error) *Reads { return &Reads{read: read} }

// Do returns the outcome of a read that started after Do was called, or
// ctx's error if ctx ends first (the read still completes for the others).
func (r *Reads) Do(ctx context.Context) error {
	r.mu.Lock()
	var c *call
	switch {
	case r.inflight == nil:
		c = &call{done: make(chan struct{})}
		r.inflight = c
		go r.run(c)
	case r.next != nil:
		c = r.next
	default:
		c = &call{done: make(chan struct{})}
		r.next = c
	}
	r.mu.Unlock()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return c.err
	}
}

// run performs c's read, then the next batched read while callers are
// waiting for one.
func (r *Reads) run(c *call) {
	for c != nil {
		c.err = r.read()
		close(c.done)
		r.mu.Lock()
		c, r.next = r.next, nil
		r.inflight = c
		r.mu.Unlock()
	}
}
