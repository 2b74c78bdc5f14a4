package coalesce

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// TestLinearizable checks that every caller's read started after it called:
// a value written before Do is seen once Do returns.
func TestLinearizable(t *testing.T) {
	var source, seen atomic.Int64
	var reads atomic.Int64
	r := New(func() error {
		reads.Add(1)
		seen.Store(source.Load())
		return nil
	})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				v := int64(i*1000 + j + 1)
				for {
					old := source.Load()
					if old >= v || source.CompareAndSwap(old, v) {
						break
					}
				}
				want := source.Load()
				if err := r.Do(context.Background()); err != nil {
					t.Error(err)
					return
				}
				if got := seen.Load(); got < want {
					t.Errorf("read %d after writing %d", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := reads.Load(); n >= 64*50 {
		t.Errorf("%d reads for %d calls: nothing was shared", n, 64*50)
	}
}

// TestError checks that a read's error reaches its callers and that a later
// read runs again.
func TestError(t *testing.T) {
	fail := errors.New("boom")
	var n atomic.Int64
	r := New(func() error {
		if n.Add(1) == 1 {
			return fail
		}
		return nil
	})
	if err := r.Do(context.Background()); !errors.Is(err, fail) {
		t.Fatalf("first Do: %v, want %v", err, fail)
	}
	if err := r.Do(context.Background()); err != nil {
		t.Fatalf("second Do: %v", err)
	}
}

// TestCanceled checks that a caller whose context ends stops waiting.
func TestCanceled(t *testing.T) {
	release := make(chan struct{})
	r := New(func() error { <-release; return nil })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Do(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do: %v, want context.Canceled", err)
	}
	close(release)
	if err := r.Do(context.Background()); err != nil {
		t.Fatal(err)
	}
}
