package txnwal

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/shardtail/shardtail/persist"
)

// The txns shard is stored in consensus as a chain of diffs, one per
// version, with the whole state (a rollup) every rollupEvery versions:
// the bytes of a tick or a commit then do not grow with the number of
// registered tables (1,000 tables' full state is ~60 KB; a tick's diff a
// few bytes). Versions below the newest rollup are truncated.

// rollupEvery is how many versions pass between full states.
const rollupEvery = 64

// scanPage is how many versions one consensus Scan reads.
const scanPage = 256

// entry is one version of the txns shard.
type entry struct {
	// Full is the whole state at this version (a rollup), or nil.
	Full *State `json:"full,omitempty"`
	// Diff is the change from the previous version, when Full is nil.
	Diff *stateDiff `json:"diff,omitempty"`
	// Rollup is the seqno of the newest rollup at or before this version:
	// a cold load reads from there.
	Rollup persist.SeqNo `json:"rollup"`
}

// stateDiff is the change between two consecutive states.
type stateDiff struct {
	Progress   uint64               `json:"progress"`
	SetShards  map[string]DataShard `json:"set_shards,omitempty"`
	DelShards  []string             `json:"del_shards,omitempty"`
	AddCommits []Commit             `json:"add_commits,omitempty"`
	DelCommits []string             `json:"del_commits,omitempty"`
	AddRecent  []string             `json:"add_recent,omitempty"`
}

// diffStates returns the change from old to next.
func diffStates(old, next *State) *stateDiff {
	d := &stateDiff{Progress: next.Progress}
	for k, v := range next.Shards {
		if o, ok := old.Shards[k]; !ok || o != v {
			if d.SetShards == nil {
				d.SetShards = map[string]DataShard{}
			}
			d.SetShards[k] = v
		}
	}
	for k := range old.Shards {
		if _, ok := next.Shards[k]; !ok {
			d.DelShards = append(d.DelShards, k)
		}
	}
	oldIDs := map[string]bool{}
	for _, c := range old.Commits {
		oldIDs[c.ID] = true
	}
	newIDs := map[string]bool{}
	for _, c := range next.Commits {
		newIDs[c.ID] = true
		if !oldIDs[c.ID] {
			d.AddCommits = append(d.AddCommits, c)
		}
	}
	for _, c := range old.Commits {
		if !newIDs[c.ID] {
			d.DelCommits = append(d.DelCommits, c.ID)
		}
	}
	for _, id := range next.Recent {
		if !slices.Contains(old.Recent, id) {
			d.AddRecent = append(d.AddRecent, id)
		}
	}
	return d
}

// applyDiff returns old changed by d.
func applyDiff(old *State, d *stateDiff) *State {
	n := old.clone()
	n.Progress = d.Progress
	maps.Copy(n.Shards, d.SetShards)
	for _, k := range d.DelShards {
		delete(n.Shards, k)
	}
	n.Commits = slices.DeleteFunc(n.Commits, func(c Commit) bool { return slices.Contains(d.DelCommits, c.ID) })
	n.Commits = append(n.Commits, d.AddCommits...)
	slices.SortFunc(n.Commits, func(a, b Commit) int { return cmpU64(a.TS, b.TS) })
	n.Recent = append(n.Recent, d.AddRecent...)
	if over := len(n.Recent) - recentCommits; over > 0 {
		n.Recent = slices.Clone(n.Recent[over:])
	}
	return n
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// encodeNext is the version seq+1 that moves cur (at seq, whose newest
// rollup is rollup) to next, and the newest rollup after it.
func encodeNext(seq, rollup persist.SeqNo, cur, next *State) ([]byte, persist.SeqNo, error) {
	e := entry{Rollup: rollup}
	if seq == 0 || (seq+1)%rollupEvery == 0 {
		e.Full, e.Rollup = next, seq+1
	} else {
		e.Diff = diffStates(cur, next)
	}
	data, err := json.Marshal(e)
	return data, e.Rollup, err
}

func decodeEntry(vd persist.VersionedData) (*entry, error) {
	var e entry
	if err := json.Unmarshal(vd.Data, &e); err != nil {
		return nil, fmt.Errorf("%w: version %s: %v", ErrCorruptState, vd.SeqNo, err)
	}
	if e.Full == nil && e.Diff == nil {
		return nil, fmt.Errorf("%w: version %s holds neither a state nor a diff", ErrCorruptState, vd.SeqNo)
	}
	if e.Full != nil && e.Full.Shards == nil {
		e.Full.Shards = map[string]DataShard{}
	}
	return &e, nil
}

// loaded is a state with its version and newest rollup.
type loaded struct {
	state  *State
	seq    persist.SeqNo
	rollup persist.SeqNo
}

// catchUp returns cur advanced by every version after it, reading from
// the newest rollup when versions after cur were truncated (or cur is the
// empty state of a process that has read nothing). ok is false when the
// key has no versions.
func catchUp(ctx context.Context, cons persist.Consensus, key string, cur loaded) (loaded, error) {
	if cur.seq == 0 {
		return coldLoad(ctx, cons, key)
	}
	for {
		vs, err := cons.Scan(ctx, key, cur.seq+1, scanPage)
		if err != nil {
			return loaded{}, err
		}
		if len(vs) == 0 {
			return cur, nil
		}
		if vs[0].SeqNo != cur.seq+1 {
			return coldLoad(ctx, cons, key) // truncated past us
		}
		for _, vd := range vs {
			if cur, err = applyVersion(cur, vd); err != nil {
				return loaded{}, err
			}
		}
		if len(vs) < scanPage {
			return cur, nil
		}
	}
}

// coldLoad reads the state from the newest rollup and the diffs after it.
func coldLoad(ctx context.Context, cons persist.Consensus, key string) (loaded, error) {
	for range 8 { // a truncation racing the read: start again
		head, err := cons.Head(ctx, key)
		if err != nil || head == nil {
			return loaded{state: newState()}, err
		}
		e, err := decodeEntry(*head)
		if err != nil {
			return loaded{}, err
		}
		if e.Full != nil {
			return loaded{state: e.Full, seq: head.SeqNo, rollup: head.SeqNo}, nil
		}
		vs, err := cons.Scan(ctx, key, e.Rollup, 1)
		if err != nil {
			return loaded{}, err
		}
		if len(vs) == 0 || vs[0].SeqNo != e.Rollup {
			continue
		}
		first, err := decodeEntry(vs[0])
		if err != nil {
			return loaded{}, err
		}
		if first.Full == nil {
			return loaded{}, fmt.Errorf("%w: version %s is not the rollup it is named as", ErrCorruptState, e.Rollup)
		}
		cur, err := catchUp(ctx, cons, key, loaded{state: first.Full, seq: e.Rollup, rollup: e.Rollup})
		if err != nil {
			return loaded{}, err
		}
		if cur.seq >= head.SeqNo {
			return cur, nil
		}
	}
	return loaded{}, fmt.Errorf("%w: could not load past concurrent truncations", ErrCorruptState)
}

// applyVersion advances cur by the version vd (its successor).
func applyVersion(cur loaded, vd persist.VersionedData) (loaded, error) {
	e, err := decodeEntry(vd)
	if err != nil {
		return loaded{}, err
	}
	if e.Full != nil {
		return loaded{state: e.Full, seq: vd.SeqNo, rollup: vd.SeqNo}, nil
	}
	return loaded{state: applyDiff(cur.state, e.Diff), seq: vd.SeqNo, rollup: e.Rollup}, nil
}
