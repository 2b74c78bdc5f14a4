package adapter_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/internal/testsupport/leakcheck"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
)

// TestNewCoordinatorFailureStopsWhatItStarted makes NewCoordinator fail
// after it started the fast path's manager (its metrics cannot register)
// and checks that the error comes back and no goroutine it started is left.
func TestNewCoordinatorFailureStopsWhatItStarted(t *testing.T) {
	cons := consmem.New()
	pc, err := persist.NewClient(blobmem.New(), cons, persist.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	reg := prometheus.NewRegistry()
	// A collector of the same name as one of the fast path's metrics: the
	// coordinator's registration of those fails.
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "shardtail", Subsystem: "tail", Name: "shared_tails", Help: "taken"}))
	before := leakcheck.Settle(runtime.NumGoroutine())

	c, err := adapter.NewCoordinator(context.Background(), adapter.Config{Persist: pc, Consensus: cons, Tick: -1, Registerer: reg})
	if err == nil {
		c.Close()
		t.Fatal("NewCoordinator succeeded, want a metrics registration error")
	}
	if got := err.Error(); !strings.Contains(got, "shared_tails") && !strings.Contains(got, "registered") {
		t.Errorf("NewCoordinator error = %q, want the duplicate registration", got)
	}
	leakcheck.Check(t, before, "after a failed NewCoordinator")
}

// TestCoordinatorCloseStops checks that a coordinator that started (with
// its tick and finalizer) leaves no goroutine behind once closed, and that
// Close reports no error when nothing failed.
func TestCoordinatorCloseStops(t *testing.T) {
	cons := consmem.New()
	pc, err := persist.NewClient(blobmem.New(), cons, persist.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	before := leakcheck.Settle(runtime.NumGoroutine())
	c, err := adapter.NewCoordinator(context.Background(), adapter.Config{Persist: pc, Consensus: cons, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
	leakcheck.Check(t, before, "after Close")
}
