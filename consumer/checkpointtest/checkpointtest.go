// Package checkpointtest is the acceptance suite every consumer.Checkpoint
// implementation runs: compare-and-set from the zero position, fencing of
// a stale expected position, positions that round-trip with their
// generation and object ids.
package checkpointtest

import (
	"context"
	"errors"
	"testing"

	"github.com/shardtail/shardtail/consumer"
)

// Run checks the Checkpoint contract on fresh checkpoints that open
// returns: two values open returns with the same key must share storage
// (they stand for two workers).
func Run(t *testing.T, open func(t *testing.T, key string) consumer.Checkpoint) {
	ctx := context.Background()
	t.Run("StartsAtZero", func(t *testing.T) {
		got, err := open(t, "zero").Load(ctx)
		if err != nil || !got.Equal(consumer.Position{}) {
			t.Fatalf("Load = %+v, %v; want the zero position", got, err)
		}
	})
	t.Run("CompareAndSet", func(t *testing.T) {
		cp := open(t, "cas")
		p1 := consumer.Position{Frontier: 100, Objects: []string{"u1", "u2"}}
		p2 := consumer.Position{Frontier: 18446744073709551615, Generation: 3, Objects: []string{"u1", "u2"}}
		mustCommit(t, cp, consumer.Position{}, p1)
		load(t, cp, p1)
		if err := cp.Commit(ctx, consumer.Position{}, p2); !errors.Is(err, consumer.ErrFenced) {
			t.Fatalf("Commit from a stale position = %v, want ErrFenced", err)
		}
		load(t, cp, p1)
		mustCommit(t, cp, p1, p2)
		load(t, cp, p2)
	})
	t.Run("TwoWorkers", func(t *testing.T) {
		a, b := open(t, "workers"), open(t, "workers")
		p1 := consumer.Position{Frontier: 5}
		mustCommit(t, a, consumer.Position{}, p1)
		// b did not see a's commit: it is fenced.
		if err := b.Commit(ctx, consumer.Position{}, consumer.Position{Frontier: 7}); !errors.Is(err, consumer.ErrFenced) {
			t.Fatalf("stale worker's Commit = %v, want ErrFenced", err)
		}
		load(t, b, p1)
	})
}

func mustCommit(t *testing.T, cp consumer.Checkpoint, expected, next consumer.Position) {
	t.Helper()
	if err := cp.Commit(context.Background(), expected, next); err != nil {
		t.Fatalf("Commit(%+v, %+v): %v", expected, next, err)
	}
}

func load(t *testing.T, cp consumer.Checkpoint, want consumer.Position) {
	t.Helper()
	got, err := cp.Load(context.Background())
	if err != nil || !got.Equal(want) {
		t.Fatalf("Load = %+v, %v; want %+v", got, err, want)
	}
}
