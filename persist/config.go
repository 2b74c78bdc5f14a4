package persist

import (
	"errors"
	"fmt"
	"time"

	"github.com/shardtail/shardtail/membudget"
)

// Defaults for Config.
const (
	DefaultRollupEvery         = 128
	DefaultReaderLease         = 15 * time.Minute
	DefaultWriterLease         = 60 * time.Minute
	DefaultPollInterval        = 1 * time.Second
	DefaultPartTargetBytes     = 8 << 20
	DefaultSnapshotChunkRows   = 8192
	DefaultCompactionMinInputs = 8
	DefaultOrphanGrace         = 1 * time.Hour
	DefaultSweepInterval       = 30 * time.Minute
	DefaultListenChunkBytes    = 8 << 20
	DefaultPartCacheBytes      = 256 << 20
)

// Config tunes a Client. The zero value of a field means its default, except
// where a field says 0 disables something.
type Config struct {
	// RollupEvery is how many state versions may pass between full rollups
	// of a shard's state to blob. Diffs in consensus between rollups keep the
	// bytes written per CAS independent of the size of the state.
	RollupEvery int
	// ReaderLease is how long a leased reader may go without a heartbeat
	// before anyone may expire it and release its since hold.
	ReaderLease time.Duration
	// ReaderHeartbeat is the interval of a reader's background heartbeat.
	// 0 means ReaderLease/2; negative disables the heartbeat task (tests).
	ReaderHeartbeat time.Duration
	// WriterLease is how long a writer's idempotency record is kept.
	WriterLease time.Duration
	// PollInterval is how often a waiting listener re-reads consensus when no
	// in-process change or doorbell woke it. It bounds cross-process latency
	// when the consensus backend has no doorbell.
	PollInterval time.Duration
	// PartTargetBytes is the target encoded size of one part.
	PartTargetBytes int
	// SnapshotChunkRows bounds the rows in one snapshot chunk.
	SnapshotChunkRows int
	// CompactionMinInputs is how many batches accumulate before background
	// compaction merges them. Negative disables background compaction.
	CompactionMinInputs int
	// OrphanGrace is how old an unreferenced blob must be before the sweep
	// deletes it as the orphan of a write that never committed (a crash
	// between upload and CAS). Uploads are refused a commit after half of
	// it (ErrUploadExpired), so the sweep never deletes a blob that a
	// write in flight, in any process, could still commit.
	OrphanGrace time.Duration
	// SweepInterval is how often background maintenance sweeps a shard's
	// orphaned blobs; the first maintenance of a shard after the process
	// starts sweeps too. Negative disables the background sweep
	// (Client.Sweep still works).
	SweepInterval time.Duration
	// ListenChunkBytes bounds the updates (row.Update.Size) one
	// Listen.Next returns when a batch holds several times: it returns
	// whole times up to the bound, at least one. A listen behind
	// compaction then hands its consumer (which formats and encodes what
	// it gets) a merged batch piece by piece, and reading such a batch
	// holds about this much (each call reads the batch again, keeping its
	// next times only), never the whole batch.
	ListenChunkBytes int
	// MaxConcurrentEncodes bounds the parts over 128 KiB the process
	// encodes at once (each holds about 2.5 times its rows' bytes, see
	// encodeCost; a smaller part's encoding takes no slot); 0 means one
	// per two CPUs (at least one).
	MaxConcurrentEncodes int
	// MaxConcurrentCompactions bounds the compactions the process runs
	// at once, over every shard; 0 means one per two CPUs (at least one).
	MaxConcurrentCompactions int
	// PartCacheBytes bounds the process's cache of recently read parts,
	// decoded (partcache.go): a snapshot cursor reads a cached part
	// without fetching or decoding it, or a part's cached first batch
	// without waiting for it; negative disables it.
	PartCacheBytes int64
	// Memory, if set, is charged with what part encodings and compactions
	// hold while they run (the process's memory budget's
	// membudget.HolderPersist), and with the part cache when Budget is
	// not set.
	Memory *membudget.Holder
	// Budget, if set, is the process's memory budget: the part cache is
	// charged to its membudget.HolderPartCache and is the first stage of
	// its policy (membudget.StageCache): over the budget, the cache lets
	// its least recently used parts go and keeps no new ones.
	Budget *membudget.Budget
	// Now returns the wall clock in milliseconds; tests replace it to drive
	// lease expiry. nil means time.Now.
	Now func() int64
	// BeforeRegister, when set, is called by OpenReader before the reader's
	// registration is committed, outside any lock: tests use it to act in
	// the window between a caller's decision and its reader's hold (a
	// consensus wrapper cannot, because this process's compare-and-sets on
	// a shard take turns). nil in production.
	BeforeRegister func(shard string, opts ReaderOptions)
}

func (c Config) withDefaults() Config {
	if c.RollupEvery == 0 {
		c.RollupEvery = DefaultRollupEvery
	}
	if c.ReaderLease == 0 {
		c.ReaderLease = DefaultReaderLease
	}
	if c.ReaderHeartbeat == 0 {
		c.ReaderHeartbeat = c.ReaderLease / 2
	}
	if c.WriterLease == 0 {
		c.WriterLease = DefaultWriterLease
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.PartTargetBytes == 0 {
		c.PartTargetBytes = DefaultPartTargetBytes
	}
	if c.SnapshotChunkRows == 0 {
		c.SnapshotChunkRows = DefaultSnapshotChunkRows
	}
	if c.CompactionMinInputs == 0 {
		c.CompactionMinInputs = DefaultCompactionMinInputs
	}
	if c.OrphanGrace == 0 {
		c.OrphanGrace = DefaultOrphanGrace
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.ListenChunkBytes == 0 {
		c.ListenChunkBytes = DefaultListenChunkBytes
	}
	if c.PartCacheBytes == 0 {
		c.PartCacheBytes = DefaultPartCacheBytes
	}
	if c.MaxConcurrentEncodes == 0 {
		c.MaxConcurrentEncodes = defaultSlots()
	}
	if c.MaxConcurrentCompactions == 0 {
		c.MaxConcurrentCompactions = defaultSlots()
	}
	if c.Now == nil {
		c.Now = func() int64 { return time.Now().UnixMilli() }
	}
	return c
}

// Validate reports which field is wrong and why.
func (c Config) Validate() error {
	switch {
	case c.RollupEvery < 0:
		return errors.New("persist config: RollupEvery must not be negative")
	case c.ReaderLease < 0:
		return errors.New("persist config: ReaderLease must not be negative")
	case c.PollInterval < 0:
		return errors.New("persist config: PollInterval must not be negative")
	case c.PartTargetBytes < 0:
		return errors.New("persist config: PartTargetBytes must not be negative")
	case c.SnapshotChunkRows < 0:
		return errors.New("persist config: SnapshotChunkRows must not be negative")
	case c.ListenChunkBytes < 0:
		return errors.New("persist config: ListenChunkBytes must not be negative")
	case c.MaxConcurrentEncodes < 0:
		return errors.New("persist config: MaxConcurrentEncodes must not be negative")
	case c.MaxConcurrentCompactions < 0:
		return errors.New("persist config: MaxConcurrentCompactions must not be negative")
	case c.OrphanGrace < 0:
		return errors.New("persist config: OrphanGrace must not be negative")
	}
	if c.ReaderHeartbeat > 0 && c.ReaderLease > 0 && c.ReaderHeartbeat >= c.ReaderLease {
		return fmt.Errorf("persist config: ReaderHeartbeat (%v) must be shorter than ReaderLease (%v)", c.ReaderHeartbeat, c.ReaderLease)
	}
	return nil
}
