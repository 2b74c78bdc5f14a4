package persist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/google/uuid"
	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/row"
	"golang.org/x/sync/semaphore"
)

// Watcher is implemented by Consensus backends that can ring a doorbell
// when a key changes, possibly in another process (PostgreSQL LISTEN/NOTIFY).
// The channel carries changed keys and is closed when ctx is done. It is a
// hint: deliveries may be dropped, and listeners still poll.
type Watcher interface {
	Watch(ctx context.Context) (<-chan string, error)
}

// Client is the process-wide entry point to persist: it owns one state cache
// (machine) per shard in use and the background tasks (doorbell, compaction
// and GC). Readers and Writers come from it. Close stops the background
// tasks and waits for them.
type Client struct {
	cfg       Config
	blob      Blob
	consensus Consensus
	versions  *versions
	metrics   *Metrics
	log       *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	machines map[string]*machine        // mu
	maint    map[string]*maintTask      // mu
	bells    map[string][]chan struct{} // mu: Doorbell's channels by key
	closed   bool                       // mu
	txnReads TxnReads                   // mu: see SetTxnReads
	hasBell  bool                       // the consensus rings a doorbell
	// encodes and compactions bound the part encodings and compactions
	// running at once (memory.go).
	encodes, compactions *semaphore.Weighted
	// parts caches recently read parts decoded, whole or their first
	// record batches (partcache.go).
	parts *partCache
}

// NewClient returns a Client on the given location. It does not take
// ownership of blob and consensus: the caller closes them after the Client.
func NewClient(blob Blob, consensus Consensus, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cfg = cfg.withDefaults()
	c := &Client{
		cfg:         cfg,
		encodes:     semaphore.NewWeighted(int64(cfg.MaxConcurrentEncodes)),
		compactions: semaphore.NewWeighted(int64(cfg.MaxConcurrentCompactions)),
		blob:        blob,
		consensus:   consensus,
		versions:    &versions{blob: blob, consensus: consensus},
		metrics:     newMetrics(),
		log:         slog.Default(),
		ctx:         ctx,
		cancel:      cancel,
		machines:    map[string]*machine{},
		maint:       map[string]*maintTask{},
		bells:       map[string][]chan struct{}{},
	}
	cacheMem := cfg.Memory
	if cfg.Budget != nil {
		// Transient: what the cache holds is an optimisation, never a
		// reason to end a subscribe (StageCache empties it first; the
		// fills left are bounded).
		cacheMem = cfg.Budget.TransientHolder(membudget.HolderPartCache)
	}
	c.parts = newPartCache(cfg.PartCacheBytes, cacheMem, cfg.Budget, c.metrics)
	if w, ok := consensus.(Watcher); ok {
		ch, err := w.Watch(ctx)
		if err != nil {
			c.log.Warn("persist: consensus doorbell unavailable, polling only", "err", err)
		} else {
			c.hasBell = true
			c.wg.Add(1)
			go c.doorbell(ch)
		}
	}
	return c, nil
}

// Metrics returns the client's metrics.
func (c *Client) Metrics() *Metrics { return c.metrics }

// Config returns the client's configuration with defaults filled in.
func (c *Client) Config() Config { return c.cfg }

// Blob returns the client's blob store.
func (c *Client) Blob() Blob { return c.blob }

// Consensus returns the client's consensus store.
func (c *Client) Consensus() Consensus { return c.consensus }

func (c *Client) doorbell(ch <-chan string) {
	defer c.wg.Done()
	for key := range ch {
		c.mu.Lock()
		m := c.machines[key]
		for _, b := range c.bells[key] {
			select {
			case b <- struct{}{}:
			default: // a ring is already pending
			}
		}
		c.mu.Unlock()
		if m != nil {
			m.poke()
		}
	}
}

// Doorbell returns a channel that receives when the consensus key changes,
// in this process or (with a consensus that rings across processes, as
// PostgreSQL's LISTEN/NOTIFY) in another; rings that arrive while one is
// pending merge. It is a hint: rings may be lost, so callers still poll.
// It returns nil, which never receives, when the consensus has no doorbell.
// Keys other than shards' work too (the adapter's catalog). The channel
// stays registered for the Client's life.
func (c *Client) Doorbell(key string) <-chan struct{} {
	if !c.hasBell {
		return nil
	}
	b := make(chan struct{}, 1)
	c.mu.Lock()
	c.bells[key] = append(c.bells[key], b)
	c.mu.Unlock()
	return b
}

// Close stops background work (compaction, GC, the doorbell) and waits for
// it. Readers and Writers must be closed first.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.parts.drop()
	return nil
}

// NewShardID returns a fresh shard id ("s" + uuid).
func NewShardID() string { return "s" + uuid.NewString() }

// CreateShard initializes a new shard with the given schema and returns its
// state. It fails if the shard exists.
func (c *Client) CreateShard(ctx context.Context, shard string, schema row.Schema) (*State, error) {
	if err := schema.Validate(); err != nil {
		return nil, fmt.Errorf("create shard %s: %w", shard, err)
	}
	s, err := c.versions.initShard(ctx, shard, schema, c.cfg.Now())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if _, ok := c.machines[shard]; !ok {
		c.machines[shard] = newMachine(c, s)
	}
	c.mu.Unlock()
	return s, nil
}

// machine returns the shard's machine, loading its state on first use.
func (c *Client) machine(ctx context.Context, shard string) (*machine, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	m := c.machines[shard]
	c.mu.Unlock()
	if m != nil {
		return m, nil
	}
	s, err := c.versions.fetchCurrent(ctx, shard)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.machines[shard]; m != nil {
		m.observe(s)
		return m, nil
	}
	m = newMachine(c, s)
	c.machines[shard] = m
	return m, nil
}

// State returns the shard's state as of now: it reads consensus, so the
// result includes every change committed (by any process) before the call.
// Concurrent callers in this process share one consensus read.
func (c *Client) State(ctx context.Context, shard string) (*State, error) {
	m, err := c.machine(ctx, shard)
	if err != nil {
		return nil, err
	}
	return m.refresh(ctx)
}

// CachedState returns the newest state this process knows, without I/O
// beyond loading an unknown shard.
func (c *Client) CachedState(ctx context.Context, shard string) (*State, error) {
	m, err := c.machine(ctx, shard)
	if err != nil {
		return nil, err
	}
	s, _ := m.current()
	return s, nil
}

// WaitForUpper blocks until the shard's upper is above t, and returns the
// state that shows it. A txn-wal data shard is made readable at t first.
func (c *Client) WaitForUpper(ctx context.Context, shard string, t uint64) (*State, error) {
	m, err := c.machine(ctx, shard)
	if err != nil {
		return nil, err
	}
	if tx := c.txns(ctx, shard); tx != nil {
		// An idle data shard's physical upper stays behind: make it
		// readable at t (see TxnReads).
		if err := tx.ReadyAt(ctx, shard, t); err != nil {
			return nil, err
		}
	}
	return m.waitUntil(ctx, func(s *State) bool { return s.Upper > t })
}

// DropShard tombstones a shard: writers and new readers fail, and waiting
// listeners end with ErrShardTombstoned.
func (c *Client) DropShard(ctx context.Context, shard string) error {
	m, err := c.machine(ctx, shard)
	if err != nil {
		return err
	}
	_, err = m.apply(ctx, tombstone())
	return err
}

// ErrIsSince reports whether err is a read before the shard's since.
func ErrIsSince(err error) bool { return errors.Is(err, ErrSinceAdvanced) }
