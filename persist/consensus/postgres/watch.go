package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// listenBackoff and maxListenBackoff pace the listener's reconnects.
	listenBackoff    = 100 * time.Millisecond
	maxListenBackoff = 5 * time.Second
)

// Watch returns a channel that receives the key of every CompareAndSet
// committed from now on, by this Consensus or (on PostgreSQL) by any other
// process on the same database, until ctx is done or Close; then the
// channel is closed. It is a doorbell: rings can be late, repeated, or
// lost (a full channel, see WatchDrops; a listener reconnecting), so
// watchers must poll as well.
func (c *Consensus) Watch(ctx context.Context) (<-chan string, error) {
	ch, err := c.bell.Watch(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres consensus: watch: %w", err)
	}
	if c.notify {
		c.startListener()
	}
	return ch, nil
}

// WatchDrops returns how many rings were dropped because a watcher's
// channel was full.
func (c *Consensus) WatchDrops() uint64 { return c.bell.Dropped() }

// startListener starts the listener goroutine unless it runs or Close
// began; Close waits for it.
func (c *Consensus) startListener() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.listening {
		return
	}
	c.listening = true
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.listenLoop(c.ctx)
	}()
}

// listenLoop keeps a LISTEN connection until ctx is done, reconnecting
// with exponential backoff (reset by every connection that got as far as
// LISTEN).
func (c *Consensus) listenLoop(ctx context.Context) {
	backoff := listenBackoff
	for {
		listened := c.listenOnce(ctx)
		if listened {
			backoff = listenBackoff
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxListenBackoff)
	}
}

// listenOnce connects, LISTENs and rings the doorbell for every other
// process's notification until the connection fails or ctx is done. It
// reports whether it got as far as LISTEN.
func (c *Consensus) listenOnce(ctx context.Context) (listened bool) {
	conn, err := pgx.ConnectConfig(ctx, c.listen)
	if err != nil {
		return false
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return false
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		if c.ownBackend(n.PID) {
			continue // CompareAndSet rang it already
		}
		c.bell.Ring(n.Payload)
	}
}

// ownBackend reports whether pid is one of the pool's connections. Should
// another process's backend notify and exit, and the pool's next
// connection get its PID before the listener reads the notification, the
// ring is skipped: a lost ring, which watchers tolerate.
func (c *Consensus) ownBackend(pid uint32) bool {
	c.pidMu.Lock()
	defer c.pidMu.Unlock()
	_, ok := c.pids[pid]
	return ok
}
