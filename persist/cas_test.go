package persist_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardtail/shardtail/persist"
)

// countingConsensus counts compare-and-set attempts and the ones that lost
// to a concurrent change. Each attempt takes a round trip's time, as it
// does against a real server, so that concurrent callers overlap.
type countingConsensus struct {
	persist.Consensus
	attempts  atomic.Int64
	conflicts atomic.Int64
}

func (c *countingConsensus) CompareAndSet(ctx context.Context, key string, exp *persist.SeqNo, v persist.VersionedData) (bool, error) {
	c.attempts.Add(1)
	time.Sleep(time.Millisecond)
	ok, err := c.Consensus.CompareAndSet(ctx, key, exp, v)
	if err == nil && !ok {
		c.conflicts.Add(1)
	}
	return ok, err
}

// registrationStorm registers perClient readers of one shard at once from
// each of clients, and returns the CAS attempts and conflicts it took.
func registrationStorm(t *testing.T, clients, perClient, rollupEvery int) (attempts, conflicts int64) {
	t.Helper()
	e := newEnv(t)
	e.cfg.RollupEvery = rollupEvery
	counting := &countingConsensus{Consensus: e.consensus}
	e.consensus = counting
	ctx := ctxT(t)
	shard := persist.NewShardID()
	cs := make([]*persist.Client, clients)
	for i := range cs {
		cs[i] = e.client()
	}
	must(cs[0].CreateShard(ctx, shard, testSchema))(t)
	for _, c := range cs[1:] {
		must(c.CachedState(ctx, shard))(t) // load the shard before the storm
	}
	counting.attempts.Store(0)
	counting.conflicts.Store(0)

	start := make(chan struct{})
	var wg sync.WaitGroup
	readers := make(chan *persist.Reader, clients*perClient)
	errs := make(chan error, clients*perClient)
	for _, c := range cs {
		for range perClient {
			wg.Go(func() {
				<-start
				r, err := c.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "storm"})
				if err != nil {
					errs <- err
					return
				}
				readers <- r
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	close(readers)
	for err := range errs {
		t.Fatal(err)
	}
	attempts, conflicts = counting.attempts.Load(), counting.conflicts.Load()
	for r := range readers {
		r.Close()
	}
	if s := must(cs[0].State(ctx, shard))(t); len(s.Readers) != 0 {
		t.Fatalf("%d readers left registered after close", len(s.Readers))
	}
	return attempts, conflicts
}

// A storm of reader registrations in one process commits one CAS each: the
// process's callers take turns at the shard's CAS instead of racing each
// other (which cost about N²/2 attempts, each cloning the whole state).
func TestRegistrationStormOneProcess(t *testing.T) {
	const n = 64
	attempts, conflicts := registrationStorm(t, 1, n, noRollups)
	if attempts != n || conflicts != 0 {
		t.Fatalf("%d registrations took %d CAS attempts (%d conflicts), want %d and 0", n, attempts, conflicts, n)
	}
}

// noRollups is a RollupEvery that a test's storm never reaches: it counts
// registrations alone.
const noRollups = 1 << 20

// A storm that passes RollupEvery rolls up about once per RollupEvery
// registrations. Callers that waited their turn all commit states far past
// the latest rollup; each rolling up (and its rollup's commit rolling up
// again) grew without bound.
func TestRegistrationStormRollsUpOnce(t *testing.T) {
	const n, every = 256, 16
	attempts, conflicts := registrationStorm(t, 1, n, every)
	if limit := int64(n + 2*n/every); attempts > limit || conflicts != 0 {
		t.Fatalf("%d registrations with RollupEvery %d took %d CAS attempts (%d conflicts), want at most %d and 0",
			n, every, attempts, conflicts, limit)
	}
}

// Across processes conflicts are real; a loser backs off with jitter, so a
// storm costs far fewer than the N²/2 attempts of retrying at once.
func TestRegistrationStormAcrossProcesses(t *testing.T) {
	const clients, perClient = 32, 2
	const n = clients * perClient
	attempts, conflicts := registrationStorm(t, clients, perClient, noRollups)
	t.Logf("%d registrations from %d clients: %d CAS attempts, %d conflicts", n, clients, attempts, conflicts)
	if limit := int64(n * n / 8); attempts > limit {
		t.Fatalf("%d registrations took %d CAS attempts, want at most %d (N²/8)", n, attempts, limit)
	}
}
