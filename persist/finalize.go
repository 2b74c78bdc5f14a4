package persist

import (
	"context"
	"fmt"
)

// Finalization is the end of a dropped shard, after Materialize's
// finalize_shard: DropShard only tombstones (writers and new readers fail,
// waiting listeners end), so the tombstoned state still references every
// part and the shard's blobs stay forever. FinalizeShard then
//
//  1. tombstones the shard if it is not yet (so it may be called alone);
//  2. commits the finalized state: no readers and no writers, since
//     advanced to upper and one empty batch over [0, upper) — our form of
//     Materialize's empty since and upper, since nothing is readable at
//     since <= t < upper — so no version from here on references a part;
//  3. writes a rollup of that state (unless the newest rollup is of it)
//     and truncates consensus below it, so no live version references an
//     older blob;
//  4. deletes every blob under the shard's prefix but that rollup.
//
// What is left is at most three tiny versions and one rollup: the tombstone,
// so a reader that comes later (a tail process that has not yet seen the
// drop) gets ErrShardTombstoned rather than ErrShardNotFound. Every step is
// idempotent and a crash between them leaves a state the next call
// completes, so callers keep a durable list of dropped shards and call
// FinalizeShard until it succeeds.
//
// A reader that is still reading when the parts go ends with
// ErrShardTombstoned (a missing part of a tombstoned shard is the drop, not
// corruption), but the rows it had not read are lost to it: callers wait
// until the shard has no live leased readers, or a grace period, before
// finalizing (see State.LiveLeasedReaders).

// FinalizeShard tombstones shard and deletes all its data (see above). It is
// idempotent.
func (c *Client) FinalizeShard(ctx context.Context, shard string) error {
	m, err := c.machine(ctx, shard)
	if err != nil {
		return err
	}
	// Maintenance of the shard in this process must not compact or collect
	// while the blobs go.
	t := c.maintTask(shard)
	if t == nil {
		return ErrClosed
	}
	t.run.Lock()
	defer t.run.Unlock()
	if _, err := m.apply(ctx, tombstone()); err != nil {
		return fmt.Errorf("finalize %s: tombstone: %w", shard, err)
	}
	s, err := m.apply(ctx, finalize())
	if err != nil {
		return fmt.Errorf("finalize %s: %w", shard, err)
	}
	target, key := s.LatestRollup()
	if target != s.SeqNo && !c.finalizedRollup(ctx, key) {
		started := c.cfg.Now()
		if key, err = c.versions.writeRollup(ctx, s); err != nil {
			return fmt.Errorf("finalize %s: %w", shard, err)
		}
		if _, err := m.apply(ctx, c.commitUploads(started, addRollup(s.SeqNo, key))); err != nil {
			return fmt.Errorf("finalize %s: record rollup: %w", shard, err)
		}
		target = s.SeqNo
	}
	if _, err := c.consensus.Truncate(ctx, shard, target); err != nil {
		return fmt.Errorf("finalize %s: truncate below %s: %w", shard, target, err)
	}
	s, err = m.apply(ctx, removeRollups(target))
	if err != nil {
		return fmt.Errorf("finalize %s: forget rollups: %w", shard, err)
	}
	keep := map[string]bool{}
	for _, k := range s.Rollups {
		keep[k] = true
	}
	var doomed []string
	if err := c.blob.List(ctx, shard+"/", func(b BlobMeta) error {
		if !keep[b.Key] {
			doomed = append(doomed, b.Key)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("finalize %s: list: %w", shard, err)
	}
	for _, k := range doomed {
		existed, err := c.blob.Delete(ctx, k)
		if err != nil {
			return fmt.Errorf("finalize %s: delete %s: %w", shard, k, err)
		}
		if existed {
			c.metrics.blobsDeleted.Inc()
		}
	}
	if len(doomed) > 0 {
		c.log.Info("persist: finalized dropped shard", "shard", shard, "blobs_deleted", len(doomed))
	}
	return nil
}

// finalizedRollup reports whether the rollup at key is of a finalized
// state, so that a retried FinalizeShard does not write another.
func (c *Client) finalizedRollup(ctx context.Context, key string) bool {
	st, err := c.versions.readRollup(ctx, key)
	return err == nil && st.Finalized()
}

// finalize empties a tombstoned shard's state: no readers or writers, since
// at upper, and no parts. It is a no-op on a finalized shard.
func finalize() transition {
	return func(s *State) (*State, error) {
		if !s.Tombstone {
			return nil, fmt.Errorf("finalize: %w: shard is not tombstoned", ErrCorruptState)
		}
		if s.Finalized() {
			return nil, errNoOp
		}
		n := s.clone()
		clear(n.Readers)
		clear(n.Writers)
		n.Since = n.Upper
		n.Batches = []*Batch{}
		if n.Upper > 0 {
			n.Batches = append(n.Batches, &Batch{ID: n.NextID, Lower: 0, Upper: n.Upper, Since: n.Upper})
			n.NextID++
		}
		return n, nil
	}
}

// Finalized reports whether s is a finalized shard's state: tombstoned and
// holding no readers, writers or parts.
func (s *State) Finalized() bool {
	if !s.Tombstone || len(s.Readers) > 0 || len(s.Writers) > 0 || s.Since != s.Upper {
		return false
	}
	for _, b := range s.Batches {
		if len(b.Parts) > 0 {
			return false
		}
	}
	return true
}

// LiveLeasedReaders counts the leased readers whose lease has not run out
// at nowMs: those that may still read the shard. Critical readers do not
// count (they never read).
func (s *State) LiveLeasedReaders(nowMs int64) int {
	n := 0
	for _, r := range s.Readers {
		if r.LeaseMs > 0 && r.LastHeartbeatMs+r.LeaseMs >= nowMs {
			n++
		}
	}
	return n
}

// ExpireReader removes a reader's registration from shard, releasing its
// holds: how a critical reader opened with a stable ID is retired, and how
// an owner removes critical readers an older version registered anew at
// every start. Removing a reader that is not registered is a no-op.
func (c *Client) ExpireReader(ctx context.Context, shard string, id ReaderID) error {
	m, err := c.machine(ctx, shard)
	if err != nil {
		return err
	}
	_, err = m.apply(ctx, expireReader(id))
	return err
}
