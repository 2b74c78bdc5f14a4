package txnwal

import (
	"fmt"
	"maps"
	"slices"

	"github.com/shardtail/shardtail/persist"
)

// State is one version of the txns shard. A State is immutable once
// published: every transition returns a copy.
//
// Invariants (checked by Validate):
//   - Every commit has TS < Progress, and commits are in strictly
//     increasing TS order.
//   - Every data shard's LastWrite < Progress.
//   - For every data shard, the commits still listed that write it are the
//     newest of its writes: one that is applied may have been tidied away,
//     and tidy removes a commit only once every shard it wrote has it.
type State struct {
	// Progress is the logical upper of every registered data shard: every
	// commit is at a time below it, and new commits are at or above it.
	Progress uint64 `json:"progress"`
	// Shards are the registered data shards.
	Shards map[string]DataShard `json:"shards"`
	// Commits are the commits not yet tidied, in time order. Each is
	// applied to its data shards after it is committed, by the committer,
	// the next reader, or the owner's restart (see Txns.Apply).
	Commits []Commit `json:"commits"`
	// Recent are the ids of the newest tidied commits (at most
	// recentCommits): a commit retried after an indeterminate CAS is
	// recognized even if it was applied and tidied meanwhile.
	Recent []string `json:"recent,omitempty"`
}

// DataShard is a registered data shard's record.
type DataShard struct {
	// Registered is the time the shard was registered at.
	Registered uint64 `json:"registered"`
	// LastWrite is the time of the newest commit that wrote the shard (0
	// for none): its physical upper is above it once every commit is
	// applied, so a reader whose cached upper is not re-reads it.
	LastWrite uint64 `json:"last_write,omitempty"`
}

// Commit is one transaction: the batches it wrote, each to a data shard,
// all at TS.
type Commit struct {
	ID     string  `json:"id"`
	TS     uint64  `json:"ts"`
	Writes []Write `json:"writes"`
}

// Write is one data shard's part of a commit.
type Write struct {
	Shard string               `json:"shard"`
	Batch persist.WrittenBatch `json:"batch"`
}

// recentCommits bounds State.Recent.
const recentCommits = 256

func newState() *State {
	return &State{Shards: map[string]DataShard{}, Commits: []Commit{}}
}

func (s *State) clone() *State {
	c := *s
	c.Shards = maps.Clone(s.Shards)
	if c.Shards == nil {
		c.Shards = map[string]DataShard{}
	}
	c.Commits = slices.Clone(s.Commits)
	c.Recent = slices.Clone(s.Recent)
	return &c
}

// Validate checks the invariants listed on State.
func (s *State) Validate() error {
	var last uint64
	for i, c := range s.Commits {
		if c.TS >= s.Progress {
			return fmt.Errorf("commit %s at %d not below progress %d", c.ID, c.TS, s.Progress)
		}
		if i > 0 && c.TS <= last {
			return fmt.Errorf("commit %s at %d not after %d", c.ID, c.TS, last)
		}
		last = c.TS
	}
	for id, d := range s.Shards {
		if d.LastWrite >= s.Progress && d.LastWrite > 0 {
			return fmt.Errorf("shard %s: last write %d not below progress %d", id, d.LastWrite, s.Progress)
		}
	}
	return nil
}

// committed reports whether the commit id is in s (listed or recently
// tidied).
func (s *State) committed(id string) bool {
	if slices.Contains(s.Recent, id) {
		return true
	}
	return slices.ContainsFunc(s.Commits, func(c Commit) bool { return c.ID == id })
}

// writesTo returns the listed commits that write shard, in time order.
func (s *State) writesTo(shard string) []Commit {
	var out []Commit
	for _, c := range s.Commits {
		if slices.ContainsFunc(c.Writes, func(w Write) bool { return w.Shard == shard }) {
			out = append(out, c)
		}
	}
	return out
}

// transition is a pure function of a State: it returns the next State, or
// errNoOp when nothing changes (no CAS), or an error that aborts.
type transition func(s *State) (*State, error)

// register adds shard at ts (>= Progress), advancing Progress past it.
// Registering a registered shard is a no-op.
func register(shard string, ts uint64) transition {
	return func(s *State) (*State, error) {
		if _, ok := s.Shards[shard]; ok {
			return nil, errNoOp
		}
		if ts < s.Progress {
			return nil, &TimestampError{TS: ts, Progress: s.Progress}
		}
		n := s.clone()
		n.Shards[shard] = DataShard{Registered: ts}
		n.Progress = ts + 1
		return n, nil
	}
}

// forget removes shard (dropped): its later reads and writes no longer go
// through the txns shard. Its commits not yet applied stay listed; their
// apply finds the shard tombstoned and skips it.
func forget(shard string) transition {
	return func(s *State) (*State, error) {
		if _, ok := s.Shards[shard]; !ok {
			return nil, errNoOp
		}
		n := s.clone()
		delete(n.Shards, shard)
		return n, nil
	}
}

// commit records c: every written shard must be registered, c.TS >=
// Progress, and for every shard in readAt, no commit after the time it
// was read at may have written it (a read-modify-write's check, as a
// compare-and-append's expected upper was). A commit already recorded is a
// no-op.
func commit(c Commit, readAt map[string]uint64) transition {
	return func(s *State) (*State, error) {
		if s.committed(c.ID) {
			return nil, errNoOp
		}
		if c.TS < s.Progress {
			return nil, &TimestampError{TS: c.TS, Progress: s.Progress}
		}
		for _, w := range c.Writes {
			if _, ok := s.Shards[w.Shard]; !ok {
				return nil, fmt.Errorf("%w: %s", ErrNotRegistered, w.Shard)
			}
		}
		for shard, at := range readAt {
			if d := s.Shards[shard]; d.LastWrite > at {
				return nil, fmt.Errorf("%w: %s written at %d after the read at %d", ErrConflict, shard, d.LastWrite, at)
			}
		}
		n := s.clone()
		for _, w := range c.Writes {
			d := n.Shards[w.Shard]
			d.LastWrite = c.TS
			n.Shards[w.Shard] = d
		}
		n.Commits = append(n.Commits, c)
		n.Progress = c.TS + 1
		return n, nil
	}
}

// advance moves Progress to upper (the tick): every registered shard's
// logical upper advances at once. A lower upper is a no-op.
func advance(upper uint64) transition {
	return func(s *State) (*State, error) {
		if upper <= s.Progress {
			return nil, errNoOp
		}
		n := s.clone()
		n.Progress = upper
		return n, nil
	}
}

// tidy removes the commits whose ids are in applied (the caller checked
// that every shard they wrote has them), remembering their ids in Recent.
func tidy(applied map[string]bool) transition {
	return func(s *State) (*State, error) {
		n := s.clone()
		n.Commits = n.Commits[:0:0]
		for _, c := range s.Commits {
			if applied[c.ID] {
				n.Recent = append(n.Recent, c.ID)
			} else {
				n.Commits = append(n.Commits, c)
			}
		}
		if len(n.Commits) == len(s.Commits) {
			return nil, errNoOp
		}
		if over := len(n.Recent) - recentCommits; over > 0 {
			n.Recent = slices.Clone(n.Recent[over:])
		}
		return n, nil
	}
}

// then runs a and then b on its result; a no-op of either is skipped.
func then(a, b transition) transition {
	return func(s *State) (*State, error) {
		n, err := a(s)
		switch {
		case err == errNoOp:
			n = s
		case err != nil:
			return nil, err
		}
		m, err := b(n)
		switch {
		case err == errNoOp && n == s:
			return nil, errNoOp
		case err == errNoOp:
			return n, nil
		}
		return m, err
	}
}
