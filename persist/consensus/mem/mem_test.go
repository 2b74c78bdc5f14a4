package mem

import (
	"testing"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/persisttest"
)

func TestConsensus(t *testing.T) {
	persisttest.TestConsensus(t, func(t *testing.T) persist.Consensus { return New() })
}

func TestClosed(t *testing.T) {
	c := New()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Head(t.Context(), "k"); err == nil || persist.IsIndeterminate(err) {
		t.Errorf("Head after Close = %v; want a determinate error", err)
	}
	if _, err := c.Watch(t.Context()); err == nil {
		t.Error("Watch after Close: no error")
	}
}

func BenchmarkCAS(b *testing.B) {
	c := New()
	defer c.Close()
	persisttest.BenchmarkConsensusCompareAndSet(b, c)
}
