package tail

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/persist"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/subscribe"
)

// gatedConsensus blocks compare-and-sets on the keys of one shard while
// its gate is shut, as a consensus store that stalls on one key would.
type gatedConsensus struct {
	persist.Consensus

	mu      sync.Mutex
	shard   string        // mu: the shard whose CAS blocks; "" for none
	open    chan struct{} // mu: closed to let them through
	blocked chan struct{} // receives once per CAS that blocks
}

func (g *gatedConsensus) shut(shard string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shard, g.open = shard, make(chan struct{})
}

func (g *gatedConsensus) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shard != "" {
		close(g.open)
		g.shard = ""
	}
}

func (g *gatedConsensus) CompareAndSet(ctx context.Context, key string, expected *persist.SeqNo, new persist.VersionedData) (bool, error) {
	g.mu.Lock()
	shard, open := g.shard, g.open
	g.mu.Unlock()
	if shard != "" && strings.Contains(key, shard) {
		select {
		case g.blocked <- struct{}{}:
		default:
		}
		select {
		case <-open:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return g.Consensus.CompareAndSet(ctx, key, expected, new)
}

// TestFirstSubscribesDoNotSerialize checks that creating one collection's
// shared tail (registering its readers: consensus round trips) does not
// hold up the first subscribe to another collection, and that a second
// subscribe to the collection being created waits for that one creation
// instead of making its own.
func TestFirstSubscribesDoNotSerialize(t *testing.T) {
	g := &gatedConsensus{Consensus: consmem.New(), blocked: make(chan struct{}, 1)}
	f := newFixtureOn(t, Config{}, g)
	other := persist.NewShardID()
	if _, err := f.p.CreateShard(f.ctx, other, schema); err != nil {
		t.Fatal(err)
	}
	req := func(shard string) subscribe.Request {
		return subscribe.Request{Shard: shard, AsOf: 0, AsOfAtLeast: true, Snapshot: true,
			Output: &formatter.Options{Relation: schema, Progress: true}}
	}

	g.shut(f.shard)
	defer g.release()
	type result struct {
		s   *Subscriber
		err error
	}
	stalled := make(chan result, 2)
	for range 2 {
		go func() {
			s, err := f.m.Subscribe(f.ctx, req(f.shard))
			stalled <- result{s, err}
		}()
	}
	select {
	case <-g.blocked:
	case <-f.ctx.Done():
		t.Fatal("the stalled collection's subscribe never reached consensus")
	}

	done := make(chan result, 1)
	go func() {
		s, err := f.m.Subscribe(f.ctx, req(other))
		done <- result{s, err}
	}()
	// A deadlock detector, not a speed bound: serialized, the subscribe
	// waits for the stalled one, which waits for the gate, forever.
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("subscribe to the other collection: %v", r.err)
		}
		r.s.Close()
	case <-time.After(20 * time.Second):
		g.release()
		<-done
		t.Fatal("the first subscribe to one collection waited for another collection's tail to be created")
	}

	g.release()
	var tails []*SharedTail
	for range 2 {
		r := <-stalled
		if r.err != nil {
			t.Fatalf("subscribe to the stalled collection: %v", r.err)
		}
		tails = append(tails, r.s.t)
		r.s.Close()
	}
	if tails[0] != tails[1] {
		t.Errorf("two subscribes arriving while the collection's tail was created got different tails")
	}
	if got, want := f.m.Tails(), 2; got != want {
		t.Errorf("Tails() = %d, want %d", got, want)
	}
}
