package persist

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/shardtail/shardtail/row"
)

// maintTask serializes background maintenance of one shard: at most one run
// at a time, and a request during a run schedules exactly one more.
type maintTask struct {
	// run is held by Maintain: in one process, compaction never reads parts
	// that a concurrent GC deletes.
	run     sync.Mutex
	mu      sync.Mutex
	running bool // mu
	again   bool // mu

	// swept and nextSweepMs rate-limit the sweep of orphaned blobs; run.
	swept       bool
	nextSweepMs int64
}

// afterAppend schedules background maintenance of shard when the client
// runs it (CompactionMinInputs >= 0).
func (c *Client) afterAppend(shard string) {
	if c.cfg.CompactionMinInputs < 0 {
		return
	}
	t := c.maintTask(shard)
	if t == nil {
		return
	}
	t.mu.Lock()
	if t.running {
		t.again = true
		t.mu.Unlock()
		return
	}
	t.running = true
	t.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			if _, err := c.Maintain(c.ctx, shard); err != nil && c.ctx.Err() == nil {
				c.log.Warn("persist: maintenance", "shard", shard, "err", err)
			}
			t.mu.Lock()
			if !t.again || c.ctx.Err() != nil {
				t.running = false
				t.mu.Unlock()
				return
			}
			t.again = false
			t.mu.Unlock()
		}
	}()
}

// ScheduleMaintenance schedules background maintenance of shard (as an
// append does) when the client runs it. An owner calls it for shards that
// see no appends for long, such as idle tables on txn-wal, so that their
// stale leases still expire and their orphaned uploads are still swept.
func (c *Client) ScheduleMaintenance(shard string) { c.afterAppend(shard) }

// maintTask returns shard's task, or nil when the client is closed.
func (c *Client) maintTask(shard string) *maintTask {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	t := c.maint[shard]
	if t == nil {
		t = &maintTask{}
		c.maint[shard] = t
	}
	return t
}

// MaintenanceReport says what one Maintain call did.
type MaintenanceReport struct {
	ExpiredReaders []ReaderID
	Compactions    int
	BlobsDeleted   int
	TruncatedTo    SeqNo
	// BlobsSwept counts the orphaned blobs the sweep deleted (see Sweep);
	// Maintain sweeps at most every Config.SweepInterval.
	BlobsSwept int
}

// Maintain runs one round of shard maintenance: it expires readers and
// writers whose leases ran out, compacts batches (merging runs and advancing
// times to since), and garbage-collects blobs and consensus versions that no
// live reader can reach. It is safe to run concurrently with anything,
// including Maintain in another process: every step commits by CAS and
// deletes only what no state version at or after the oldest reader hold
// references. (A compaction in another process holds no seqno, so a GC here
// may delete an input it is reading: that compaction then fails and its
// output is discarded; readers are never affected.)
func (c *Client) Maintain(ctx context.Context, shard string) (MaintenanceReport, error) {
	var rep MaintenanceReport
	m, err := c.machine(ctx, shard)
	if err != nil {
		return rep, err
	}
	t := c.maintTask(shard)
	if t == nil {
		return rep, ErrClosed
	}
	t.run.Lock()
	defer t.run.Unlock()
	if _, err := m.apply(ctx, expireStale(c.cfg.Now(), &rep.ExpiredReaders)); err != nil {
		return rep, fmt.Errorf("expire: %w", err)
	}
	for range 4 {
		merged, err := c.compactOnce(ctx, m)
		if err != nil {
			return rep, fmt.Errorf("compact: %w", err)
		}
		if !merged {
			break
		}
		rep.Compactions++
	}
	rep.BlobsDeleted, rep.TruncatedTo, err = c.gc(ctx, m)
	if err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	rep.BlobsSwept, err = c.maybeSweep(ctx, m, t)
	if err != nil {
		return rep, fmt.Errorf("sweep: %w", err)
	}
	return rep, nil
}

// pickMerge chooses batches to merge: the longest suffix of the batch list
// in which no batch is more than twice the rows of everything after it.
// Like a binary counter, each update is rewritten O(log n) times. Batches
// whose times are all below since (and so collapse under compaction) join
// regardless.
func pickMerge(s *State, minInputs int) (start, end int) {
	n := len(s.Batches)
	if n < 2 || n < minInputs {
		for i, b := range s.Batches {
			if len(b.RunStarts) > 0 {
				return i, i + 1
			}
		}
		return 0, 0
	}
	start = n - 1
	total := s.Batches[start].Rows()
	for start > 0 {
		prev := s.Batches[start-1]
		if prev.Rows() > 2*total && prev.Upper > s.Since {
			break
		}
		start--
		total += prev.Rows()
	}
	if n-start < 2 {
		// No group to merge; a batch of several runs (a bulk load) is
		// merged into one run on its own, so reads hold one part, not one
		// per run.
		for i, b := range s.Batches {
			if len(b.RunStarts) > 0 {
				return i, i + 1
			}
		}
		return 0, 0
	}
	return start, n
}

// compactOnce merges one group of batches. It reports whether it committed.
func (c *Client) compactOnce(ctx context.Context, m *machine) (bool, error) {
	s, _ := m.current()
	if s.Tombstone {
		return false, nil
	}
	start, end := pickMerge(s, c.cfg.CompactionMinInputs)
	if end == 0 || (end-start == 1 && len(s.Batches[start].RunStarts) == 0) {
		return false, nil
	}
	// One of the process's compaction slots: compactions of every shard
	// take turns. The state may move on while this one waits; a merge of
	// batches replaced meanwhile fails its CAS as any stale merge does.
	if err := c.compactions.Acquire(ctx, 1); err != nil {
		return false, err
	}
	defer c.compactions.Release(1)
	inputs := s.Batches[start:end]
	since := s.Since
	started := c.cfg.Now()
	parts, err := c.mergeParts(ctx, s.ShardID, s.Schema, inputs, since)
	if err != nil {
		return false, err
	}
	out := Batch{Lower: inputs[0].Lower, Upper: inputs[len(inputs)-1].Upper, Since: since, Parts: parts}
	ids := make([]uint64, len(inputs))
	for i, b := range inputs {
		ids[i] = b.ID
	}
	_, err = m.apply(ctx, c.commitUploads(started, applyMerge(ids, out)))
	if errors.Is(err, errMergeStale) {
		// A concurrent change replaced an input. If it was this merge
		// committing before an indeterminate error, our parts are live.
		cur, _ := m.current()
		if len(parts) > 0 && referencesPart(cur, parts[0].Key) {
			return true, nil
		}
		c.deleteBlobs(context.WithoutCancel(ctx), parts)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.metrics.compactions.Inc()
	return true, nil
}

func referencesPart(s *State, key string) bool {
	for _, b := range s.Batches {
		for _, p := range b.Parts {
			if p.Key == key {
				return true
			}
		}
	}
	return false
}

// mergeParts streams the consolidating merge of batches, with times advanced
// to since, into new parts of about PartTargetBytes each (one run). The
// merged updates it buffers for a part are charged to the client's memory
// holder until the part is written.
func (c *Client) mergeParts(ctx context.Context, shard string, schema row.Schema, batches []*Batch, since uint64) ([]Part, error) {
	it := newMergeIter(c, schema, batches, compactionTimes(since))
	defer it.close()
	var parts []Part
	var buf []row.Update
	size := 0
	var held int64 // charged for buf
	defer func() { c.charge(-held) }()
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		p, err := c.writePart(ctx, shard, schema, buf)
		if err != nil {
			return err
		}
		parts = append(parts, p)
		buf, size = nil, 0
		c.charge(-held)
		held = 0
		return nil
	}
	for {
		u, ok, err := it.next(ctx)
		if err != nil {
			c.deleteBlobs(context.WithoutCancel(ctx), parts)
			return nil, err
		}
		if !ok {
			break
		}
		buf = append(buf, u)
		n := u.Size()
		c.charge(n)
		held += n
		if size += rowSize(u.Row) + 16; size >= c.cfg.PartTargetBytes {
			if err := flush(); err != nil {
				c.deleteBlobs(context.WithoutCancel(ctx), parts)
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		c.deleteBlobs(context.WithoutCancel(ctx), parts)
		return nil, err
	}
	return parts, nil
}

// gc deletes what no reader can reach any more and truncates consensus.
//
// Let target be the newest rollup at or below the oldest seqno any reader
// holds. Versions before target are unreachable: readers hold target or
// later, and a cold load starts from a rollup at or after target. So:
//  1. replay versions [earliest, target] from the rollup at earliest, and
//     collect the parts of batches they removed (compaction inputs): no
//     version at or after target references them, so delete them;
//  2. truncate consensus below target (the rollup at target keeps the
//     "rollup at earliest" invariant);
//  3. delete the rollups below target and forget them in state.
//
// A crash between steps leaves only garbage that the next gc removes: step 1
// is repeated from the same earliest version, deletes are idempotent.
func (c *Client) gc(ctx context.Context, m *machine) (int, SeqNo, error) {
	s, _ := m.current()
	hold := s.SeqNoSince()
	var target SeqNo
	for seq := range s.Rollups {
		if seq <= hold && seq > target {
			target = seq
		}
	}
	first, err := c.consensus.Scan(ctx, s.ShardID, 0, 1)
	if err != nil {
		return 0, 0, err
	}
	if len(first) == 0 || target <= first[0].SeqNo {
		return 0, 0, nil
	}
	earliest := first[0].SeqNo
	key, ok := s.Rollups[earliest]
	if !ok {
		return 0, 0, fmt.Errorf("%w: no rollup at earliest version %s", ErrCorruptState, earliest)
	}
	st, err := c.versions.readRollup(ctx, key)
	if err != nil {
		return 0, 0, err
	}
	garbage := map[string]bool{}
	for st.SeqNo < target {
		diffs, err := c.consensus.Scan(ctx, s.ShardID, st.SeqNo+1, int(min(1024, target-st.SeqNo)))
		if err != nil {
			return 0, 0, err
		}
		if len(diffs) == 0 || diffs[0].SeqNo != st.SeqNo+1 {
			return 0, 0, errTruncated // another gc ran concurrently; retry later
		}
		for _, vd := range diffs {
			d, err := decodeDiff(vd)
			if err != nil {
				return 0, 0, err
			}
			for _, b := range st.Batches {
				if contains(d.BatchesDel, b.ID) {
					for _, p := range b.Parts {
						garbage[p.Key] = true
					}
				}
			}
			if st, err = applyDiff(st, d); err != nil {
				return 0, 0, err
			}
		}
	}
	deleted := 0
	for key := range garbage {
		if _, err := c.blob.Delete(ctx, key); err != nil {
			return deleted, 0, fmt.Errorf("delete %s: %w", key, err)
		}
		deleted++
		c.metrics.blobsDeleted.Inc()
	}
	if _, err := c.consensus.Truncate(ctx, s.ShardID, target); err != nil {
		return deleted, 0, fmt.Errorf("truncate %s below %s: %w", s.ShardID, target, err)
	}
	for seq, key := range s.Rollups {
		if seq < target && strings.HasPrefix(key, s.ShardID+"/") {
			if _, err := c.blob.Delete(ctx, key); err != nil {
				return deleted, target, err
			}
			deleted++
		}
	}
	if _, err := m.apply(ctx, removeRollups(target)); err != nil {
		return deleted, target, err
	}
	return deleted, target, nil
}

func contains(sorted []uint64, id uint64) bool {
	for _, x := range sorted {
		if x == id {
			return true
		}
	}
	return false
}
