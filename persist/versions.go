package persist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/shardtail/shardtail/row"
)

// versions reads and writes the versions of shard states: diffs in
// consensus (one key per shard), rollups in blob.
type versions struct {
	blob      Blob
	consensus Consensus
}

func rollupKey(shard string, seqno SeqNo) string {
	return fmt.Sprintf("%s/%s/r%s", shard, seqno, uuid.NewString())
}

func partKey(shard string) string {
	return fmt.Sprintf("%s/p%s", shard, uuid.NewString())
}

// writeRollup writes the whole of s to a new blob and returns its key.
func (v *versions) writeRollup(ctx context.Context, s *State) (string, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encode rollup: %w", err)
	}
	key := rollupKey(s.ShardID, s.SeqNo)
	if err := v.blob.Set(ctx, key, data); err != nil {
		return "", fmt.Errorf("write rollup %s: %w", key, err)
	}
	return key, nil
}

func (v *versions) readRollup(ctx context.Context, key string) (*State, error) {
	data, err := v.blob.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read rollup %s: %w", key, err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%w: rollup %s: %v", ErrCorruptState, key, err)
	}
	s.ensureMaps()
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%w: rollup %s: %v", ErrCorruptState, key, err)
	}
	return &s, nil
}

func (s *State) ensureMaps() {
	if s.Readers == nil {
		s.Readers = map[ReaderID]ReaderState{}
	}
	if s.Writers == nil {
		s.Writers = map[WriterID]WriterState{}
	}
	if s.Rollups == nil {
		s.Rollups = map[SeqNo]string{}
	}
	if s.Batches == nil {
		s.Batches = []*Batch{}
	}
}

func decodeDiff(vd VersionedData) (*stateDiff, error) {
	var d stateDiff
	if err := json.Unmarshal(vd.Data, &d); err != nil {
		return nil, fmt.Errorf("%w: diff %s: %v", ErrCorruptState, vd.SeqNo, err)
	}
	if d.To != vd.SeqNo {
		return nil, fmt.Errorf("%w: diff stored at %s claims %s", ErrCorruptState, vd.SeqNo, d.To)
	}
	return &d, nil
}

// initShard creates version 1 of a shard: a rollup of the initial state,
// then a CAS that expects no versions. It returns the state, or
// errShardExists if the shard already has versions.
func (v *versions) initShard(ctx context.Context, shard string, schema row.Schema, nowMs int64) (*State, error) {
	s := newState(shard, schema, nowMs)
	s.SeqNo = 1
	key := rollupKey(shard, 1)
	s.Rollups[1] = key
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	if err := v.blob.Set(ctx, key, data); err != nil {
		return nil, fmt.Errorf("write initial rollup: %w", err)
	}
	d := diffStates(&State{}, s)
	d.From = 0
	enc, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	ok, err := v.consensus.CompareAndSet(ctx, shard, nil, VersionedData{SeqNo: 1, Data: enc})
	if err != nil {
		return nil, fmt.Errorf("init shard %s: %w", shard, err)
	}
	if !ok {
		// Someone else initialized it; our rollup is garbage.
		_, _ = v.blob.Delete(ctx, key)
		return nil, errShardExists
	}
	return s, nil
}

var errShardExists = errors.New("shard exists")

// fetchCurrent reads a shard's latest state: the head diff names the latest
// rollup; the rollup plus the diffs after it give the state at the head.
// It returns ErrShardNotFound for a key with no versions.
func (v *versions) fetchCurrent(ctx context.Context, shard string) (*State, error) {
	for attempt := 0; ; attempt++ {
		head, err := v.consensus.Head(ctx, shard)
		if err != nil {
			return nil, fmt.Errorf("read head of %s: %w", shard, err)
		}
		if head == nil {
			return nil, fmt.Errorf("%w: %s", ErrShardNotFound, shard)
		}
		hd, err := decodeDiff(*head)
		if err != nil {
			return nil, err
		}
		s, err := v.readRollup(ctx, hd.RollupKey)
		if errors.Is(err, ErrNotFound) && attempt < 10 {
			// GC deleted the rollup after we read the head: the head moved on.
			continue
		}
		if err != nil {
			return nil, err
		}
		s, err = v.catchUp(ctx, s)
		if errors.Is(err, errTruncated) && attempt < 10 {
			continue
		}
		return s, err
	}
}

var errTruncated = errors.New("versions truncated")

// catchUp applies every diff after s.SeqNo. It fails with errTruncated when
// the diffs right after s are gone (GC truncated past s).
func (v *versions) catchUp(ctx context.Context, s *State) (*State, error) {
	const page = 1024
	for {
		diffs, err := v.consensus.Scan(ctx, s.ShardID, s.SeqNo+1, page)
		if err != nil {
			return nil, fmt.Errorf("scan %s from %s: %w", s.ShardID, s.SeqNo+1, err)
		}
		if len(diffs) == 0 {
			return s, nil
		}
		if diffs[0].SeqNo != s.SeqNo+1 {
			return nil, errTruncated
		}
		for _, vd := range diffs {
			d, err := decodeDiff(vd)
			if err != nil {
				return nil, err
			}
			if s, err = applyDiff(s, d); err != nil {
				return nil, err
			}
		}
		if len(diffs) < page {
			return s, nil
		}
	}
}

// compareAndSet commits new as the successor of old. It reports false on an
// expectation mismatch (someone else committed old.SeqNo+1).
func (v *versions) compareAndSet(ctx context.Context, old, new *State) (bool, int, error) {
	d := diffStates(old, new)
	enc, err := json.Marshal(d)
	if err != nil {
		return false, 0, err
	}
	expected := old.SeqNo
	ok, err := v.consensus.CompareAndSet(ctx, new.ShardID, &expected, VersionedData{SeqNo: new.SeqNo, Data: enc})
	return ok, len(enc), err
}
