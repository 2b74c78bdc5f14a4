package leakcheck

import (
	"runtime"
	"testing"
)

// TestSettleSeesAStoppedGoroutine: a goroutine told to stop is not counted
// once it returned, and one still running is.
func TestSettleSeesAStoppedGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		<-stop
	}()
	if got := runtime.NumGoroutine(); got < before+1 {
		t.Fatalf("%d goroutines with one started, want at least %d", got, before+1)
	}
	close(stop)
	if got := Settle(before); got > before {
		t.Fatalf("Settle = %d after the goroutine was stopped, want at most %d", got, before)
	}
	<-done
}
