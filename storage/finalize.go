package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/shardtail/shardtail/persist"
)

// DefaultFinalizeGrace is Config.FinalizeGrace's default: long enough for a
// subscriber in a tail process to see the drop (it polls every second) and
// for a slow read in flight to finish; a reader that lingers longer is a
// client that stopped reading or a crashed process, and loses nothing it
// would otherwise have received: it ends with the drop's 42704 either way.
const DefaultFinalizeGrace = 5 * time.Minute

// finalizeKey is the consensus key of the shards pending finalization.
const finalizeKey = "storage_finalize"

// The finalization queue. A dropped collection's shard is only tombstoned
// by the DROP: its state still references every part, so without more its
// blobs stay forever. Like Materialize's storage controller, role `all`
// keeps a durable list of shards to finalize (persist.FinalizeShard: since
// and upper to the end, every blob deleted, consensus truncated) and works
// through it in the background and at every start, so a crash anywhere
// between the DROP and the end of finalization only delays it:
//
//  1. DROP adds the shards to the list (a CAS on finalizeKey) *before* the
//     catalog commit: a crash after the commit cannot forget them. A drop
//     whose commit then fails leaves entries of live shards, which the
//     finalizer never finalizes (it checks the catalog) and forgets once
//     they are FinalizeGrace old.
//  2. The catalog commit, then the tombstone: waiting listeners end with
//     42704, and readers registered on the shard keep reading what was
//     written before the drop.
//  3. The finalizer finalizes a listed shard that the catalog does not
//     name once no live leased reader is left on it, or at the latest
//     FinalizeGrace after the drop (a reader still going then ends with
//     the same 42704), and removes it from the list.

// pendingFinalization is the durable list: shard id → when it was listed
// (unix milliseconds).
type pendingFinalization struct {
	Shards map[string]int64 `json:"shards"`
}

// Finalizer keeps the list. Its methods are safe for concurrent use.
type Finalizer struct {
	persist   *persist.Client
	consensus persist.Consensus
	grace     time.Duration

	// run serializes passes (the loop's and tests').
	run sync.Mutex
	mu  sync.Mutex
	// pending is the list as this process last read or wrote it; empty
	// means there is nothing to do until the next drop here (a pass reads
	// consensus again before acting).
	pending map[string]int64 // mu
}

// NewFinalizer returns the finalizer of p's dropped shards; grace is
// FinalizeGrace (0 means DefaultFinalizeGrace).
func NewFinalizer(p *persist.Client, grace time.Duration) *Finalizer {
	if grace == 0 {
		grace = DefaultFinalizeGrace
	}
	return &Finalizer{persist: p, consensus: p.Consensus(), grace: max(grace, 0), pending: map[string]int64{}}
}

// update applies fn to the durable list by compare-and-set and returns the
// committed list.
func (f *Finalizer) update(ctx context.Context, fn func(p map[string]int64) bool) (map[string]int64, error) {
	for {
		head, err := f.consensus.Head(ctx, finalizeKey)
		if err != nil {
			return nil, fmt.Errorf("read finalization list: %w", err)
		}
		var cur pendingFinalization
		var expected *persist.SeqNo
		if head != nil {
			if err := json.Unmarshal(head.Data, &cur); err != nil {
				return nil, fmt.Errorf("%w: finalization list at %s: %v", persist.ErrCorruptState, head.SeqNo, err)
			}
			expected = &head.SeqNo
		}
		if cur.Shards == nil {
			cur.Shards = map[string]int64{}
		}
		if !fn(cur.Shards) {
			f.remember(cur.Shards)
			return cur.Shards, nil
		}
		data, err := json.Marshal(cur)
		if err != nil {
			return nil, err
		}
		next := persist.SeqNo(1)
		if head != nil {
			next = head.SeqNo + 1
		}
		ok, err := f.consensus.CompareAndSet(ctx, finalizeKey, expected, persist.VersionedData{SeqNo: next, Data: data})
		if err != nil && !persist.IsIndeterminate(err) {
			return nil, fmt.Errorf("write finalization list: %w", err)
		}
		if !ok || err != nil {
			continue // lost a race, or unknown: re-read and apply again (fn is idempotent)
		}
		// Only the head is ever read: drop the versions before it.
		_, _ = f.consensus.Truncate(ctx, finalizeKey, next)
		f.remember(cur.Shards)
		return cur.Shards, nil
	}
}

func (f *Finalizer) remember(p map[string]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = maps.Clone(p)
}

// Add lists shards for finalization: DROP calls it before its catalog
// commit (step 1 above).
func (f *Finalizer) Add(ctx context.Context, shards []string) error {
	if len(shards) == 0 {
		return nil
	}
	now := f.persist.Config().Now()
	_, err := f.update(ctx, func(p map[string]int64) bool {
		changed := false
		for _, sh := range shards {
			if _, ok := p[sh]; !ok {
				p[sh] = now
				changed = true
			}
		}
		return changed
	})
	return err
}

// idle reports whether this process knows of nothing to finalize.
func (f *Finalizer) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending) == 0
}

// load reads the durable list (at start: finalizations a crash cut short).
func (f *Finalizer) load(ctx context.Context) error {
	_, err := f.update(ctx, func(map[string]int64) bool { return false })
	return err
}

// Pass finalizes every listed shard that is due (see above) and returns how
// many it finalized. live returns the shards the catalog names, read after
// any drop that listed a shard committed or failed.
func (f *Finalizer) Pass(ctx context.Context, live LiveShards) (int, error) {
	f.run.Lock()
	defer f.run.Unlock()
	if f.idle() {
		return 0, nil
	}
	listed, err := f.update(ctx, func(map[string]int64) bool { return false })
	if err != nil || len(listed) == 0 {
		return 0, err
	}
	named, err := live(ctx)
	if err != nil {
		return 0, err
	}
	now := f.persist.Config().Now()
	graceMs := f.grace.Milliseconds()
	var done []string
	var errs []error
	for _, shard := range slices.Sorted(maps.Keys(listed)) {
		listedMs := listed[shard]
		if named[shard] {
			if now-listedMs > graceMs {
				done = append(done, shard) // a drop that did not commit
			}
			continue
		}
		ready, err := f.due(ctx, shard, now, now-listedMs >= graceMs)
		switch {
		case errors.Is(err, persist.ErrShardNotFound):
			done = append(done, shard) // never created
		case err != nil:
			errs = append(errs, fmt.Errorf("finalize %s: %w", shard, err))
		case ready:
			done = append(done, shard)
		}
	}
	if len(done) > 0 {
		if _, err := f.update(ctx, func(p map[string]int64) bool {
			for _, sh := range done {
				delete(p, sh)
			}
			return true
		}); err != nil {
			errs = append(errs, err)
		}
	}
	return len(done), errors.Join(errs...)
}

// due tombstones a dropped shard that a crash left untombstoned, and
// finalizes it when no live reader is left or force (its grace is over).
// It reports whether the shard is finalized.
func (f *Finalizer) due(ctx context.Context, shard string, now int64, force bool) (bool, error) {
	st, err := f.persist.State(ctx, shard)
	if err != nil {
		return false, err
	}
	if !st.Tombstone {
		// The process died between the catalog commit and the tombstone:
		// end the readers first, and finalize on a later pass.
		return false, f.persist.DropShard(ctx, shard)
	}
	if !force && st.LiveLeasedReaders(now) > 0 {
		return false, nil
	}
	if err := f.persist.FinalizeShard(ctx, shard); err != nil {
		return false, err
	}
	return true, nil
}

// finalizeInterval bounds how often the finalizer looks at its list; it
// does nothing while the list is empty.
const finalizeInterval = time.Second

// LiveShards returns the shards the catalog names, read after any drop
// that listed a shard committed or failed.
type LiveShards func(ctx context.Context) (map[string]bool, error)

// Run finalizes dropped shards until ctx is done: once at start (the list
// a crash left), then every finalizeInterval. Errors are logged to log and
// retried on the next pass.
func (f *Finalizer) Run(ctx context.Context, live LiveShards, log *slog.Logger) {
	if err := f.load(ctx); err != nil && ctx.Err() == nil {
		log.Warn("finalize dropped shards: read list", "err", err)
	}
	t := time.NewTicker(finalizeInterval)
	defer t.Stop()
	for {
		if _, err := f.Pass(ctx, live); err != nil && ctx.Err() == nil {
			log.Warn("finalize dropped shards", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
