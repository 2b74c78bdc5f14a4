package persist

import (
	"context"
	"fmt"
	"time"
)

// The sweep deletes orphaned blobs: parts and rollups that a write,
// compaction or rollup uploaded but never committed, because the process
// died between the upload and the CAS (or the CAS failed indeterminately and
// was never retried). GC cannot find them: it deletes what state versions
// stop referencing, and no version ever referenced an orphan. So the sweep
// works from the other side: it lists the shard's blobs and deletes those
// that no live state version references and that are older than
// Config.OrphanGrace.
//
// A blob's age comes from Blob.List (the store's modification time), not
// from its key: keys are uuids without a time, and dating by the store also
// covers blobs written before this sweep existed.
//
// Why a write in flight is never touched: an upload may only be committed
// until half the grace has passed since it began (commitUploads), and the
// sweep lists before it reads the live references. A blob it deletes was
// set before listNow-grace; a commit of it would have happened before
// listNow-grace/2, so before the list, and the references read after the
// list include it. This holds while the clocks of the processes and the
// blob store disagree by less than grace/2.

// Sweep deletes the shard's orphaned blobs (see above) now, whatever
// Config.SweepInterval says, and returns how many it deleted. Background
// maintenance runs it every SweepInterval.
func (c *Client) Sweep(ctx context.Context, shard string) (int, error) {
	m, err := c.machine(ctx, shard)
	if err != nil {
		return 0, err
	}
	t := c.maintTask(shard)
	if t == nil {
		return 0, ErrClosed
	}
	t.run.Lock()
	defer t.run.Unlock()
	return c.sweep(ctx, m)
}

// maybeSweep sweeps when the shard's last sweep in this process is
// SweepInterval ago, or there was none. t.run must be held.
func (c *Client) maybeSweep(ctx context.Context, m *machine, t *maintTask) (int, error) {
	if c.cfg.SweepInterval < 0 {
		return 0, nil
	}
	now := c.cfg.Now()
	if t.swept && now < t.nextSweepMs {
		return 0, nil
	}
	// Rate-limit failed sweeps too: a failing store is not hammered.
	t.swept, t.nextSweepMs = true, now+c.cfg.SweepInterval.Milliseconds()
	return c.sweep(ctx, m)
}

// sweep lists the shard's blobs older than the grace period, then reads the
// live references, then deletes the listed blobs that are not referenced.
// The order matters (see above).
func (c *Client) sweep(ctx context.Context, m *machine) (int, error) {
	cutoff := time.UnixMilli(c.cfg.Now()).Add(-c.cfg.OrphanGrace)
	var old []string
	err := c.blob.List(ctx, m.shard+"/", func(b BlobMeta) error {
		if b.Modified.Before(cutoff) {
			old = append(old, b.Key)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", m.shard, err)
	}
	if len(old) == 0 {
		return 0, nil
	}
	live, err := c.liveKeys(ctx, m)
	if err != nil {
		return 0, err
	}
	swept := 0
	for _, key := range old {
		if live[key] {
			continue
		}
		existed, err := c.blob.Delete(ctx, key)
		if err != nil {
			return swept, fmt.Errorf("delete orphan %s: %w", key, err)
		}
		if existed { // else GC or another sweep got there first
			swept++
			c.metrics.blobsSwept.Inc()
		}
	}
	if swept > 0 {
		c.log.Info("persist: swept orphaned blobs", "shard", m.shard, "count", swept)
	}
	return swept, nil
}

// liveKeys returns the key of every blob that some state version of the
// shard still in consensus references: the parts of its batches and its
// rollups. Readers hold versions at or after the earliest one (GC truncates
// only below every hold), and a cold load starts from a rollup a live
// version names, so nothing outside the set can ever be fetched. The union
// over the versions is the earliest one's references plus whatever each
// later diff adds.
func (c *Client) liveKeys(ctx context.Context, m *machine) (map[string]bool, error) {
	// Read the state before finding the earliest version: a concurrent GC
	// keeps the rollup at the new earliest version in every state.
	s, err := m.refresh(ctx)
	if err != nil {
		return nil, err
	}
	first, err := c.consensus.Scan(ctx, m.shard, 0, 1)
	if err != nil {
		return nil, err
	}
	if len(first) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrShardNotFound, m.shard)
	}
	earliest := first[0].SeqNo
	key, ok := s.Rollups[earliest]
	if !ok {
		return nil, fmt.Errorf("%w: no rollup at earliest version %s", ErrCorruptState, earliest)
	}
	st, err := c.versions.readRollup(ctx, key)
	if err != nil {
		return nil, err // a concurrent GC deleted it: sweep next time
	}
	live := map[string]bool{key: true}
	for _, b := range st.Batches {
		for _, p := range b.Parts {
			live[p.Key] = true
		}
	}
	for _, k := range st.Rollups {
		live[k] = true
	}
	const page = 1024
	for from := st.SeqNo + 1; ; {
		diffs, err := c.consensus.Scan(ctx, m.shard, from, page)
		if err != nil {
			return nil, err
		}
		if len(diffs) == 0 {
			return live, nil
		}
		if diffs[0].SeqNo != from {
			return nil, errTruncated // a concurrent GC; sweep next time
		}
		for _, vd := range diffs {
			d, err := decodeDiff(vd)
			if err != nil {
				return nil, err
			}
			live[d.RollupKey] = true
			for _, k := range d.RollupsSet {
				live[k] = true
			}
			for _, b := range d.BatchesAdd {
				for _, p := range b.Parts {
					live[p.Key] = true
				}
			}
		}
		if len(diffs) < page {
			return live, nil
		}
		from = diffs[len(diffs)-1].SeqNo + 1
	}
}

// commitUploads guards t, a transition that commits blobs uploaded from
// startedMs on: once half of OrphanGrace has passed since then, the sweep
// may be about to take them for orphans, so t may no longer commit and
// fails with ErrUploadExpired instead. A no-op or failing t (an append that
// already committed, a stale merge) passes through unchanged. The blobs are
// left to the sweep, which alone can tell whether an earlier, indeterminate
// attempt committed them.
func (c *Client) commitUploads(startedMs int64, t transition) transition {
	deadline := startedMs + c.cfg.OrphanGrace.Milliseconds()/2
	return func(s *State) (*State, error) {
		n, err := t(s)
		if err == nil {
			if now := c.cfg.Now(); now > deadline {
				return nil, fmt.Errorf("%w: %w: uploaded %v ago, more than half the orphan grace period %v",
					ErrIndeterminate, ErrUploadExpired, time.Duration(now-startedMs)*time.Millisecond, c.cfg.OrphanGrace)
			}
		}
		return n, err
	}
}
