// Package leakcheck checks that no goroutine outlives what a test stopped:
// count the goroutines before starting it, stop it, then Check.
//
//	before := runtime.NumGoroutine()
//	s := start()
//	s.Close()
//	leakcheck.Check(t, before, "after Close")
//
// Goroutines that were told to stop take a moment to return, so Check
// waits for the count to settle before it fails the test.
package leakcheck

import (
	"runtime"
	"testing"
	"time"
)

// settleTimeout bounds how long Settle waits for goroutines to return.
const settleTimeout = 10 * time.Second

// Settle waits up to settleTimeout for the number of goroutines to fall
// to at most want and returns the last count seen.
func Settle(want int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(settleTimeout); n > want && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	return n
}

// Check fails t with every goroutine's stack when more than before
// goroutines are left once they settled; when names the moment ("after
// Close").
func Check(t testing.TB, before int, when string) {
	t.Helper()
	if got := Settle(before); got > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines %s, want at most the %d before:\n%s", got, when, before, buf[:runtime.Stack(buf, true)])
	}
}
