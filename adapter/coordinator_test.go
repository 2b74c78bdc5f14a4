package adapter_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
)

// settleGoroutines waits for the number of goroutines to fall to at most
// want and returns the last count seen: goroutines that were told to stop
// take a moment to return.
func settleGoroutines(t *testing.T, want int) int {
	t.Helper()
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); n > want && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	return n
}

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
	before := settleGoroutines(t, runtime.NumGoroutine())

	c, err := adapter.NewCoordinator(context.Background(), adapter.Config{Persist: pc, Consensus: cons, Tick: -1, Registerer: reg})
	if err == nil {
		c.Close()
		t.Fatal("NewCoordinator succeeded, want a metrics registration error")
	}
	if got := err.Error(); !strings.Contains(got, "shared_tails") && !strings.Contains(got, "registered") {
		t.Errorf("NewCoordinator error = %q, want the duplicate registration", got)
	}
	if got := settleGoroutines(t, before); got > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after a failed NewCoordinator, want at most the %d before:\n%s", got, before, buf[:runtime.Stack(buf, true)])
	}
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
	before := settleGoroutines(t, runtime.NumGoroutine())
	c, err := adapter.NewCoordinator(context.Background(), adapter.Config{Persist: pc, Consensus: cons, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
	if got := settleGoroutines(t, before); got > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after Close, want at most the %d before:\n%s", got, before, buf[:runtime.Stack(buf, true)])
	}
}
