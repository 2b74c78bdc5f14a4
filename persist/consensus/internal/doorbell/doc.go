// Package doorbell fans "key k changed" notifications out to watchers
// without ever blocking the notifier. It is the in-process half of every
// Consensus backend's Watch method (the persist.Watcher shape):
//
//	ch, err := bell.Watch(ctx) // a watcher: closed when ctx is done or the Bell closes
//	bell.Ring(key)             // the backend, after a CompareAndSet committed
//
// A ring is a doorbell, not a message: it says "look at key again", carries
// no data, and may be dropped. Each watcher has a channel of Buffer keys;
// when it is full, Ring drops the key for that watcher and counts the drop
// (Dropped) rather than wait, so that a slow watcher never delays a commit.
// A watcher must therefore treat the channel as a hint and keep polling at
// some slower rate; persist's state cache does.
//
// Lock rules: one mutex guards the watcher set. Ring sends under it with
// non-blocking sends only, so it never waits on a reader. A watcher's
// channel is closed exactly once, under the mutex, by whichever comes first:
// its context ending (through context.AfterFunc, so no goroutine waits on the
// context) or Close.
package doorbell
