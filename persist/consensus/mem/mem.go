package mem

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/consensus/internal/doorbell"
	"github.com/shardtail/shardtail/persist/consensus/internal/validate"
)

var (
	_ persist.Consensus = (*Consensus)(nil)
	_ persist.Watcher   = (*Consensus)(nil)
)

// errClosed is returned by every operation after Close.
var errClosed = errors.New("mem consensus: closed")

// Consensus is an in-memory persist.Consensus. Create it with New.
type Consensus struct {
	mu     sync.Mutex
	closed bool                               // mu must be held.
	logs   map[string][]persist.VersionedData // mu must be held. Ascending SeqNo, never empty.

	bell doorbell.Bell
}

// New returns an empty in-memory Consensus.
func New() *Consensus {
	return &Consensus{logs: make(map[string][]persist.VersionedData)}
}

// enter checks what every operation checks first: the context and Close.
// mu must be held.
func (c *Consensus) enter(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mem consensus: %s: %w", op, err)
	}
	if c.closed {
		return fmt.Errorf("%s: %w", op, errClosed)
	}
	return nil
}

// Head returns the latest version of key, or nil if it has none.
func (c *Consensus) Head(ctx context.Context, key string) (*persist.VersionedData, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(ctx, "head"); err != nil {
		return nil, err
	}
	log := c.logs[key]
	if len(log) == 0 {
		return nil, nil
	}
	head := clone(log[len(log)-1])
	return &head, nil
}

// CompareAndSet appends new to key's log iff the head is expected (nil: the
// key has no versions) and new.SeqNo is greater.
func (c *Consensus) CompareAndSet(ctx context.Context, key string, expected *persist.SeqNo, new persist.VersionedData) (bool, error) {
	if err := validate.CompareAndSet(expected, new); err != nil {
		return false, fmt.Errorf("mem consensus: cas %q: %w", key, err)
	}
	committed, err := c.compareAndSet(ctx, key, expected, new)
	if committed {
		// Ring outside mu: the Bell has its own lock and never blocks.
		c.bell.Ring(key)
	}
	return committed, err
}

func (c *Consensus) compareAndSet(ctx context.Context, key string, expected *persist.SeqNo, new persist.VersionedData) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(ctx, "cas"); err != nil {
		return false, err
	}
	log := c.logs[key]
	switch {
	case expected == nil && len(log) != 0:
		return false, nil
	case expected != nil && (len(log) == 0 || log[len(log)-1].SeqNo != *expected):
		return false, nil
	}
	c.logs[key] = append(log, clone(new))
	return true, nil
}

// Scan returns up to limit versions of key with SeqNo >= from, ascending.
func (c *Consensus) Scan(ctx context.Context, key string, from persist.SeqNo, limit int) ([]persist.VersionedData, error) {
	if err := validate.Limit(limit); err != nil {
		return nil, fmt.Errorf("mem consensus: scan %q: %w", key, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(ctx, "scan"); err != nil {
		return nil, err
	}
	log := c.logs[key]
	i, _ := slices.BinarySearchFunc(log, from, func(v persist.VersionedData, s persist.SeqNo) int {
		return cmp.Compare(v.SeqNo, s)
	})
	log = log[i:]
	out := make([]persist.VersionedData, 0, min(limit, len(log)))
	for _, v := range log[:min(limit, len(log))] {
		out = append(out, clone(v))
	}
	return out, nil
}

// Truncate deletes the versions of key below seqno and returns how many it
// deleted; seqno beyond the head, or a key with no versions, is
// persist.ErrTruncateBeyondHead.
func (c *Consensus) Truncate(ctx context.Context, key string, seqno persist.SeqNo) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(ctx, "truncate"); err != nil {
		return 0, err
	}
	log := c.logs[key]
	if len(log) == 0 || seqno > log[len(log)-1].SeqNo {
		return 0, fmt.Errorf("mem consensus: truncate %q to %s: %w", key, seqno, persist.ErrTruncateBeyondHead)
	}
	i, _ := slices.BinarySearchFunc(log, seqno, func(v persist.VersionedData, s persist.SeqNo) int {
		return cmp.Compare(v.SeqNo, s)
	})
	// Copy the survivors so the deleted versions' data can be collected.
	c.logs[key] = slices.Clone(log[i:])
	return i, nil
}

// ListKeys returns every key with versions; since Truncate never deletes a
// head, that is every key ever written.
func (c *Consensus) ListKeys(ctx context.Context) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(ctx, "list keys"); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(c.logs))
	for k := range c.logs {
		keys = append(keys, k)
	}
	return keys, nil
}

// Watch returns a channel that receives the key of every CompareAndSet this
// Consensus commits from now on, until ctx is done or Close; then the
// channel is closed. A watcher that falls behind misses rings (see
// WatchDrops) and must poll as well.
func (c *Consensus) Watch(ctx context.Context) (<-chan string, error) {
	ch, err := c.bell.Watch(ctx)
	if err != nil {
		return nil, fmt.Errorf("mem consensus: watch: %w", err)
	}
	return ch, nil
}

// WatchDrops returns how many rings were dropped because a watcher's
// channel was full.
func (c *Consensus) WatchDrops() uint64 { return c.bell.Dropped() }

// Close discards the logs, closes every Watch channel and makes every later
// operation fail. It is idempotent.
func (c *Consensus) Close() error {
	c.mu.Lock()
	c.closed = true
	c.logs = nil
	c.mu.Unlock()
	c.bell.Close()
	return nil
}

func clone(v persist.VersionedData) persist.VersionedData {
	return persist.VersionedData{SeqNo: v.SeqNo, Data: bytes.Clone(v.Data)}
}
