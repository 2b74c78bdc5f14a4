package persist

import (
	"fmt"
	"slices"

	"github.com/shardtail/shardtail/persist/mapdiff"
	"github.com/shardtail/shardtail/row"
)

// stateDiff is what one CAS writes to consensus: the change from version
// From to version To. Its size depends on what changed, not on how many
// readers or batches the state holds, which is what keeps a storm of reader
// registrations cheap.
type stateDiff struct {
	From       SeqNo `json:"from"`
	To         SeqNo `json:"to"`
	WalltimeMs int64 `json:"walltime_ms"`
	// Rollup is the latest rollup as of To, denormalized into every diff so
	// that a cold reader finds its starting point from the head alone.
	RollupSeqNo SeqNo  `json:"rollup_seqno"`
	RollupKey   string `json:"rollup_key"`

	Since     uint64      `json:"since"`
	Upper     uint64      `json:"upper"`
	NextID    uint64      `json:"next_id"`
	Tombstone bool        `json:"tombstone,omitempty"`
	Schema    *row.Schema `json:"schema,omitempty"`

	ReadersSet map[ReaderID]ReaderState `json:"readers_set,omitempty"`
	ReadersDel []ReaderID               `json:"readers_del,omitempty"`
	WritersSet map[WriterID]WriterState `json:"writers_set,omitempty"`
	WritersDel []WriterID               `json:"writers_del,omitempty"`
	BatchesAdd []*Batch                 `json:"batches_add,omitempty"`
	BatchesDel []uint64                 `json:"batches_del,omitempty"`
	RollupsSet map[SeqNo]string         `json:"rollups_set,omitempty"`
	RollupsDel []SeqNo                  `json:"rollups_del,omitempty"`
}

// diffStates computes the diff from old to new (new.SeqNo == old.SeqNo+1).
func diffStates(old, new *State) *stateDiff {
	d := &stateDiff{
		From: old.SeqNo, To: new.SeqNo, WalltimeMs: new.WalltimeMs,
		Since: new.Since, Upper: new.Upper, NextID: new.NextID, Tombstone: new.Tombstone,
	}
	d.RollupSeqNo, d.RollupKey = new.LatestRollup()
	if !old.Schema.Equal(new.Schema) {
		s := new.Schema
		d.Schema = &s
	}
	d.ReadersSet, d.ReadersDel = mapdiff.Diff(old.Readers, new.Readers)
	d.WritersSet, d.WritersDel = mapdiff.Diff(old.Writers, new.Writers)
	d.RollupsSet, d.RollupsDel = mapdiff.Diff(old.Rollups, new.Rollups)

	oldIDs := make(map[uint64]bool, len(old.Batches))
	for _, b := range old.Batches {
		oldIDs[b.ID] = true
	}
	for _, b := range new.Batches {
		if oldIDs[b.ID] {
			delete(oldIDs, b.ID)
		} else {
			d.BatchesAdd = append(d.BatchesAdd, b)
		}
	}
	for id := range oldIDs {
		d.BatchesDel = append(d.BatchesDel, id)
	}
	slices.Sort(d.BatchesDel)
	return d
}

// applyDiff returns the state after d. It fails when d does not follow s.
func applyDiff(s *State, d *stateDiff) (*State, error) {
	if d.From != s.SeqNo || d.To != s.SeqNo+1 {
		return nil, fmt.Errorf("%w: diff %s->%s does not apply to %s", ErrCorruptState, d.From, d.To, s.SeqNo)
	}
	n := s.clone()
	n.SeqNo, n.WalltimeMs = d.To, d.WalltimeMs
	n.Since, n.Upper, n.NextID, n.Tombstone = d.Since, d.Upper, d.NextID, d.Tombstone
	if d.Schema != nil {
		n.Schema = *d.Schema
	}
	mapdiff.Apply(n.Readers, d.ReadersSet, d.ReadersDel)
	mapdiff.Apply(n.Writers, d.WritersSet, d.WritersDel)
	mapdiff.Apply(n.Rollups, d.RollupsSet, d.RollupsDel)
	if len(d.BatchesDel) > 0 {
		n.Batches = slices.DeleteFunc(n.Batches, func(b *Batch) bool {
			_, found := slices.BinarySearch(d.BatchesDel, b.ID)
			return found
		})
	}
	if len(d.BatchesAdd) > 0 {
		n.Batches = append(n.Batches, d.BatchesAdd...)
		slices.SortFunc(n.Batches, func(a, b *Batch) int {
			switch {
			case a.Lower < b.Lower:
				return -1
			case a.Lower > b.Lower:
				return 1
			}
			return 0
		})
	}
	if err := n.Validate(); err != nil {
		return nil, fmt.Errorf("%w: after diff %s: %v", ErrCorruptState, d.To, err)
	}
	return n, nil
}
