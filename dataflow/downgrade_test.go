package dataflow

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/persist"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/subscribe"
	"github.com/shardtail/shardtail/tail"
)

// countingConsensus counts committed compare-and-sets.
type countingConsensus struct {
	persist.Consensus
	commits atomic.Int64
}

func (c *countingConsensus) CompareAndSet(ctx context.Context, key string, exp *persist.SeqNo, v persist.VersionedData) (bool, error) {
	ok, err := c.Consensus.CompareAndSet(ctx, key, exp, v)
	if err == nil && ok {
		c.commits.Add(1)
	}
	return ok, err
}

// listenBatches runs a subscribe with the given downgrade interval through
// batches listen batches, one append each, and returns the CAS commits the
// subscribe made (all but the appends) and its reader's since at the end:
// once it reached awaitSince (the downgrade follows the listen on the
// subscribe's goroutine, a moment after Next returned), or after 10 s.
func listenBatches(t *testing.T, interval time.Duration, batches, awaitSince uint64) (subscribeCASes int64, since uint64) {
	t.Helper()
	cons := &countingConsensus{Consensus: consmem.New()}
	// No background compaction and no rollups: every CAS is an append or
	// the subscribe's.
	ctx, p, shard, w := setupWith(t, cons, persist.Config{PollInterval: 10 * time.Millisecond, ReaderHeartbeat: -1,
		CompactionMinInputs: -1, RollupEvery: 1 << 20})
	if err := w.CompareAndAppend(ctx, ups(0, 0), 0, 1); err != nil {
		t.Fatal(err)
	}
	before := cons.commits.Load()
	s := StartSubscribe(SubscribeConfig{Persist: p, Purpose: "counted", DowngradeInterval: interval,
		Request: subscribe.Request{Shard: shard, AsOf: 0, Snapshot: true, Output: &formatter.Options{Relation: schema, Progress: true}}})
	defer s.Close()
	for i := uint64(1); i <= batches; i++ {
		if err := w.CompareAndAppend(ctx, ups(i, int64(i)), i, i+1); err != nil {
			t.Fatal(err)
		}
		// One listen batch per append: wait until the subscribe passed it.
		for s.Frontier() <= i {
			if _, err := s.Next(ctx, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	readerSince := func() uint64 {
		st, err := p.State(ctx, shard)
		if err != nil {
			t.Fatal(err)
		}
		for _, rs := range st.Readers {
			if rs.Purpose == "counted" {
				return rs.Since
			}
		}
		t.Fatal("the subscribe's reader is not registered")
		return 0
	}
	since = readerSince()
	for deadline := time.Now().Add(10 * time.Second); since < awaitSince && time.Now().Before(deadline); since = readerSince() {
		time.Sleep(10 * time.Millisecond)
	}
	return cons.commits.Load() - before - int64(batches), since
}

// TestSubscribeDowngradesRateLimited: across many listen batches the
// subscribe downgrades its reader's since at most once per interval (a CAS
// per batch per subscriber made the shard's CAS the bottleneck), and with a
// short interval it still follows the listen.
func TestSubscribeDowngradesRateLimited(t *testing.T) {
	const batches = 40
	cases, since := listenBatches(t, time.Hour, batches, 0)
	// One CAS registers the reader, at most one downgrades it.
	if cases > 2 {
		t.Errorf("%d listen batches with an hour's interval cost the subscribe %d CASes, want at most 2 (register, one downgrade)", batches, cases)
	}
	if since >= batches {
		t.Errorf("since %d after an hour's interval, want it held below %d", since, batches)
	}

	_, since = listenBatches(t, time.Nanosecond, batches, batches)
	if since != batches {
		t.Errorf("since %d with a 1 ns interval, want %d (the frontier %d less one)", since, batches, batches+1)
	}
}

// TestDefaultDowngradeInterval: the dataflow path downgrades as often as
// the fast path by default, so neither is handicapped against the other.
func TestDefaultDowngradeInterval(t *testing.T) {
	if got, want := DefaultDowngradeInterval, tail.DefaultDowngradeInterval; got != want {
		t.Fatalf("DefaultDowngradeInterval %v, want the fast path's %v", got, want)
	}
}
