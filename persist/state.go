package persist

import (
	"fmt"
	"maps"
	"slices"

	"github.com/shardtail/shardtail/row"
)

// ReaderID identifies a registered reader of a shard ("r" + uuid).
type ReaderID string

// WriterID identifies a writer of a shard ("w" + uuid).
type WriterID string

// State is one version of a shard's metadata. A State value is immutable once
// published: every transition copies what it changes (the maps and the batch
// slice), so a State may be shared freely between goroutines.
//
// Invariants (checked by Validate):
//   - Since <= Upper.
//   - Batches are contiguous and ordered: Batches[0].Lower == 0,
//     Batches[i].Upper == Batches[i+1].Lower, and the last Upper == Upper.
//   - Since == the meet (minimum) of every reader's since, and never moves
//     backwards; with no readers it stays where it was.
//   - Every rollup seqno is <= SeqNo; there is a rollup at the earliest live
//     version (maintained by versions.go).
type State struct {
	ShardID string `json:"shard"`
	SeqNo   SeqNo  `json:"seqno"`
	// WalltimeMs is when this version was committed.
	WalltimeMs int64                    `json:"walltime_ms"`
	Schema     row.Schema               `json:"schema"`
	Since      uint64                   `json:"since"`
	Upper      uint64                   `json:"upper"`
	Tombstone  bool                     `json:"tombstone,omitempty"`
	NextID     uint64                   `json:"next_id"`
	Batches    []*Batch                 `json:"batches"`
	Readers    map[ReaderID]ReaderState `json:"readers"`
	Writers    map[WriterID]WriterState `json:"writers"`
	// Rollups maps a seqno to the blob key of the full state at it.
	Rollups map[SeqNo]string `json:"rollups"`
}

// Batch is the updates of a shard with times in [Lower, Upper), stored as
// runs of parts. A run is parts in order, each sorted by (row, time) and
// consolidated, every row of part i ordering before every row of part i+1
// (a row may continue from one part into the next). RunStarts lists the
// index in Parts where each run after the first starts; a batch written
// whole or by compaction is one run, a batch built incrementally (a large
// COPY) has one run per flushed part. Times in a batch are at
// least Since (compaction advances them). Batches are immutable: a change
// makes a new batch with a new ID.
type Batch struct {
	ID    uint64 `json:"id"`
	Lower uint64 `json:"lower"`
	Upper uint64 `json:"upper"`
	Since uint64 `json:"since"`
	Parts []Part `json:"parts,omitempty"`
	// RunStarts are the indexes in Parts where runs after the first start.
	RunStarts []int `json:"run_starts,omitempty"`
}

// Runs returns the batch's runs.
func (b *Batch) Runs() [][]Part {
	if len(b.Parts) == 0 {
		return nil
	}
	var runs [][]Part
	start := 0
	for _, s := range b.RunStarts {
		runs = append(runs, b.Parts[start:s])
		start = s
	}
	return append(runs, b.Parts[start:])
}

// Rows is the number of updates in the batch.
func (b *Batch) Rows() int64 {
	var n int64
	for _, p := range b.Parts {
		n += p.Rows
	}
	return n
}

// Bytes is the encoded size of the batch's parts.
func (b *Batch) Bytes() int64 {
	var n int64
	for _, p := range b.Parts {
		n += p.Bytes
	}
	return n
}

// Part is one immutable blob of encoded updates and its stats.
type Part struct {
	Key   string `json:"key"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
	MinT  uint64 `json:"min_t"`
	MaxT  uint64 `json:"max_t"`
	// TsRewrite, when set, is the time of every update in the part,
	// replacing the times stored in it: a part uploaded before its batch's
	// timestamp was chosen (BatchBuilder). MinT and MaxT are already
	// rewritten.
	TsRewrite *uint64 `json:"ts_rewrite,omitempty"`
}

// ReaderState is a registered reader's holds: its since (compaction may not
// advance times past it) and its seqno (GC may not delete blobs referenced
// by any state version at or after it).
type ReaderState struct {
	Since           uint64 `json:"since"`
	SeqNo           SeqNo  `json:"seqno"`
	LastHeartbeatMs int64  `json:"heartbeat_ms"`
	// LeaseMs is how long the reader lives without a heartbeat; 0 means it
	// is critical and never expires (a collection's retention policy).
	LeaseMs int64  `json:"lease_ms"`
	Purpose string `json:"purpose,omitempty"`
}

// WriterState records a writer's last successful append, so that a retry of
// it after an indeterminate error is recognized rather than applied twice.
type WriterState struct {
	LastHeartbeatMs int64  `json:"heartbeat_ms"`
	LeaseMs         int64  `json:"lease_ms"`
	Token           string `json:"token"`
	Upper           uint64 `json:"upper"`
}

// newState is version 1's content for a new shard.
func newState(shardID string, schema row.Schema, nowMs int64) *State {
	return &State{
		ShardID:    shardID,
		Schema:     schema,
		WalltimeMs: nowMs,
		Batches:    []*Batch{},
		Readers:    map[ReaderID]ReaderState{},
		Writers:    map[WriterID]WriterState{},
		Rollups:    map[SeqNo]string{},
	}
}

// clone returns a copy of s whose maps and batch slice may be modified
// without touching s. Batches themselves are immutable and shared.
func (s *State) clone() *State {
	c := *s
	c.Batches = slices.Clone(s.Batches)
	c.Readers = maps.Clone(s.Readers)
	c.Writers = maps.Clone(s.Writers)
	c.Rollups = maps.Clone(s.Rollups)
	if c.Readers == nil {
		c.Readers = map[ReaderID]ReaderState{}
	}
	if c.Writers == nil {
		c.Writers = map[WriterID]WriterState{}
	}
	if c.Rollups == nil {
		c.Rollups = map[SeqNo]string{}
	}
	return &c
}

// Validate checks the invariants listed on State.
func (s *State) Validate() error {
	if s.Since > s.Upper {
		return fmt.Errorf("since %d > upper %d", s.Since, s.Upper)
	}
	var lower uint64
	for i, b := range s.Batches {
		if b.Lower != lower {
			return fmt.Errorf("batch %d: lower %d, want %d", i, b.Lower, lower)
		}
		if b.Upper <= b.Lower {
			return fmt.Errorf("batch %d: empty range [%d, %d)", i, b.Lower, b.Upper)
		}
		lower = b.Upper
	}
	if lower != s.Upper {
		return fmt.Errorf("batches end at %d, upper is %d", lower, s.Upper)
	}
	for id, r := range s.Readers {
		if r.Since < s.Since {
			return fmt.Errorf("reader %s: since %d below shard since %d", id, r.Since, s.Since)
		}
	}
	for seq := range s.Rollups {
		if seq > s.SeqNo {
			return fmt.Errorf("rollup at %s beyond seqno %s", seq, s.SeqNo)
		}
	}
	return nil
}

// LatestRollup returns the newest rollup's seqno and key.
func (s *State) LatestRollup() (SeqNo, string) {
	var best SeqNo
	for seq := range s.Rollups {
		best = max(best, seq)
	}
	return best, s.Rollups[best]
}

// SeqNoSince is the oldest seqno any reader may still read from: GC may
// delete what only versions before it reference. Critical readers hold
// since only (they never read), so a crashed process's retention policy
// does not stop GC.
func (s *State) SeqNoSince() SeqNo {
	since := s.SeqNo
	for _, r := range s.Readers {
		if r.LeaseMs > 0 {
			since = min(since, r.SeqNo)
		}
	}
	return since
}

// recomputeSince sets Since to the meet of the readers' sinces, never moving
// it backwards. mu: s must be a private clone.
func (s *State) recomputeSince() {
	if len(s.Readers) == 0 {
		return
	}
	meet := uint64(1<<64 - 1)
	for _, r := range s.Readers {
		meet = min(meet, r.Since)
	}
	s.Since = max(s.Since, min(meet, s.Upper))
}

// transition is a pure function of a state. It returns the next state, or
// errNoOp if nothing changes (no CAS is made), or another error that aborts
// the command without committing.
type transition func(s *State) (*State, error)

// errNoOp is returned by a transition that would change nothing.
var errNoOp = fmt.Errorf("no-op transition")

// appendResult reports what compareAndAppend decided.
type appendResult int

const (
	appendCommitted appendResult = iota
	appendAlreadyCommitted
)

// compareAndAppend adds batch b at the end of the shard iff its upper is
// expected. A retry of an append that already committed (same writer and
// token) is recognized via the writer's record.
func compareAndAppend(b Batch, writer WriterID, token string, nowMs, leaseMs int64, result *appendResult) transition {
	return func(s *State) (*State, error) {
		if s.Tombstone {
			return nil, ErrShardTombstoned
		}
		if w, ok := s.Writers[writer]; ok && w.Token == token && w.Upper == b.Upper {
			*result = appendAlreadyCommitted
			return nil, errNoOp
		}
		if s.Upper != b.Lower {
			return nil, &UpperMismatchError{Expected: b.Lower, Current: s.Upper}
		}
		n := s.clone()
		n.Writers[writer] = WriterState{LastHeartbeatMs: nowMs, LeaseMs: leaseMs, Token: token, Upper: b.Upper}
		b.ID = n.NextID
		b.Since = n.Since
		n.NextID++
		// Consecutive empty batches (progress-only ticks) merge into one, so
		// that an idle table does not grow its batch list every tick.
		if last := len(n.Batches) - 1; last >= 0 && len(b.Parts) == 0 && len(n.Batches[last].Parts) == 0 {
			merged := *n.Batches[last]
			merged.ID = b.ID
			merged.Upper = b.Upper
			n.Batches[last] = &merged
		} else {
			n.Batches = append(n.Batches, &b)
		}
		n.Upper = b.Upper
		*result = appendCommitted
		return n, nil
	}
}

// registerReader adds a reader holding since at the shard's current since.
func registerReader(id ReaderID, purpose string, nowMs, leaseMs int64) transition {
	return func(s *State) (*State, error) {
		if s.Tombstone {
			return nil, ErrShardTombstoned
		}
		if _, ok := s.Readers[id]; ok {
			return nil, errNoOp
		}
		n := s.clone()
		n.Readers[id] = ReaderState{Since: s.Since, SeqNo: s.SeqNo, LastHeartbeatMs: nowMs, LeaseMs: leaseMs, Purpose: purpose}
		return n, nil
	}
}

// heartbeatReader renews a reader's lease, and optionally downgrades its
// since and moves its seqno hold forward. A since below the reader's current
// since is ignored (since never regresses).
func heartbeatReader(id ReaderID, nowMs int64, since uint64, seqno SeqNo) transition {
	return func(s *State) (*State, error) {
		r, ok := s.Readers[id]
		if !ok {
			return nil, ErrReaderExpired
		}
		r.LastHeartbeatMs = nowMs
		r.Since = max(r.Since, min(since, s.Upper))
		if seqno > r.SeqNo {
			r.SeqNo = seqno
		}
		n := s.clone()
		n.Readers[id] = r
		n.recomputeSince()
		return n, nil
	}
}

// expireReader removes a reader, releasing its holds.
func expireReader(id ReaderID) transition {
	return func(s *State) (*State, error) {
		if _, ok := s.Readers[id]; !ok {
			return nil, errNoOp
		}
		n := s.clone()
		delete(n.Readers, id)
		n.recomputeSince()
		return n, nil
	}
}

// expireStale removes every leased reader and writer whose lease ran out, as
// of nowMs: the readers of a crashed process stop holding back compaction.
func expireStale(nowMs int64, expired *[]ReaderID) transition {
	return func(s *State) (*State, error) {
		var n *State
		for id, r := range s.Readers {
			if r.LeaseMs > 0 && r.LastHeartbeatMs+r.LeaseMs < nowMs {
				if n == nil {
					n = s.clone()
				}
				delete(n.Readers, id)
				*expired = append(*expired, id)
			}
		}
		for id, w := range s.Writers {
			if w.LeaseMs > 0 && w.LastHeartbeatMs+w.LeaseMs < nowMs {
				if n == nil {
					n = s.clone()
				}
				delete(n.Writers, id)
			}
		}
		if n == nil {
			return nil, errNoOp
		}
		n.recomputeSince()
		return n, nil
	}
}

// addRollup records a rollup of the state at seqno.
func addRollup(seqno SeqNo, key string) transition {
	return func(s *State) (*State, error) {
		if _, ok := s.Rollups[seqno]; ok {
			return nil, errNoOp
		}
		n := s.clone()
		n.Rollups[seqno] = key
		return n, nil
	}
}

// removeRollups forgets every rollup below seqno (after GC truncated them).
func removeRollups(below SeqNo) transition {
	return func(s *State) (*State, error) {
		var n *State
		for seq := range s.Rollups {
			if seq < below {
				if n == nil {
					n = s.clone()
				}
				delete(n.Rollups, seq)
			}
		}
		if n == nil {
			return nil, errNoOp
		}
		return n, nil
	}
}

// applyMerge replaces the batches with IDs inputs (which must still be
// present and contiguous, in order) by out. It fails with errMergeStale
// when a concurrent change replaced any input.
func applyMerge(inputs []uint64, out Batch) transition {
	return func(s *State) (*State, error) {
		if s.Tombstone {
			// A merge racing a drop: finalization owns the batches now.
			return nil, errMergeStale
		}
		start := slices.IndexFunc(s.Batches, func(b *Batch) bool { return b.ID == inputs[0] })
		if start < 0 || start+len(inputs) > len(s.Batches) {
			return nil, errMergeStale
		}
		for i, id := range inputs {
			if s.Batches[start+i].ID != id {
				return nil, errMergeStale
			}
		}
		n := s.clone()
		out.ID = n.NextID
		n.NextID++
		n.Batches = slices.Replace(n.Batches, start, start+len(inputs), &out)
		return n, nil
	}
}

// tombstone marks a dropped shard: no more writes or readers.
func tombstone() transition {
	return func(s *State) (*State, error) {
		if s.Tombstone {
			return nil, errNoOp
		}
		n := s.clone()
		n.Tombstone = true
		return n, nil
	}
}
