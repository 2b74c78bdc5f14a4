package doorbell

import (
	"context"
	"sync"
	"sync/atomic"
)

// Buffer is the capacity of each watcher's channel: how many rings a watcher
// may fall behind before Ring starts dropping for it. Rings for one busy key
// repeat, so a modest buffer absorbs bursts without holding much memory.
const Buffer = 256

// Bell delivers rings to watchers. The zero value is ready to use; a Bell
// must not be copied after first use.
type Bell struct {
	mu       sync.Mutex
	closed   bool                  // mu must be held.
	watchers map[*watcher]struct{} // mu must be held.

	dropped atomic.Uint64
}

// watcher is one Watch call's channel and the handle that unregisters its
// context callback.
type watcher struct {
	ch   chan string
	stop func() bool
}

// Watch returns a channel that receives the key of every Ring from now on,
// until ctx is done or the Bell is closed; then the channel is closed. It
// fails if ctx is already done or the Bell is closed.
func (b *Bell) Watch(ctx context.Context) (<-chan string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	if b.watchers == nil {
		b.watchers = make(map[*watcher]struct{})
	}
	w := &watcher{ch: make(chan string, Buffer)}
	b.watchers[w] = struct{}{}
	// AfterFunc runs remove in its own goroutine once ctx is done; until then
	// it costs no goroutine. If ctx ended a moment ago, remove waits for mu,
	// which this call holds until w is fully registered.
	w.stop = context.AfterFunc(ctx, func() { b.remove(w) })
	return w.ch, nil
}

// remove unregisters w and closes its channel, unless Close already did.
func (b *Bell) remove(w *watcher) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.watchers[w]; ok {
		delete(b.watchers, w)
		close(w.ch)
	}
}

// Ring tells every watcher that key changed. It never blocks: a watcher
// whose channel is full misses this ring, and the drop is counted.
func (b *Bell) Ring(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for w := range b.watchers {
		select {
		case w.ch <- key:
		default:
			b.dropped.Add(1)
		}
	}
}

// Dropped returns how many rings were dropped because a watcher's channel
// was full.
func (b *Bell) Dropped() uint64 { return b.dropped.Load() }

// Close closes every watcher's channel and makes later Watch calls fail.
// It is idempotent.
func (b *Bell) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for w := range b.watchers {
		w.stop()
		delete(b.watchers, w)
		close(w.ch)
	}
}
