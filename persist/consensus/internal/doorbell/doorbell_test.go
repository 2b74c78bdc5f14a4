package doorbell

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRingReachesEveryWatcher(t *testing.T) {
	var b Bell
	defer b.Close()
	ch1 := mustWatch(t, &b, t.Context())
	ch2 := mustWatch(t, &b, t.Context())
	b.Ring("k")
	for i, ch := range []<-chan string{ch1, ch2} {
		if got := <-ch; got != "k" {
			t.Errorf("watcher %d: got %q, want %q", i, got, "k")
		}
	}
}

func TestContextDoneClosesChannel(t *testing.T) {
	var b Bell
	defer b.Close()
	ctx, cancel := context.WithCancel(t.Context())
	ch := mustWatch(t, &b, ctx)
	cancel()
	waitClosed(t, ch)
	b.Ring("after") // must not panic on the closed channel
}

func TestCloseClosesChannelsAndRefusesWatch(t *testing.T) {
	var b Bell
	ch := mustWatch(t, &b, t.Context())
	b.Close()
	waitClosed(t, ch)
	b.Close() // idempotent
	if _, err := b.Watch(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Watch after Close: got %v, want ErrClosed", err)
	}
}

func TestWatchCanceledContext(t *testing.T) {
	var b Bell
	defer b.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Watch(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch(canceled): got %v, want context.Canceled", err)
	}
}

func TestFullWatcherDropsWithoutBlocking(t *testing.T) {
	var b Bell
	defer b.Close()
	ch := mustWatch(t, &b, t.Context())
	const extra = 10
	for range Buffer + extra {
		b.Ring("k") // must return although nobody reads
	}
	if got := b.Dropped(); got != extra {
		t.Errorf("Dropped() = %d, want %d", got, extra)
	}
	if got := len(ch); got != Buffer {
		t.Errorf("buffered rings = %d, want %d", got, Buffer)
	}
}

func mustWatch(t *testing.T, b *Bell, ctx context.Context) <-chan string {
	t.Helper()
	ch, err := b.Watch(ctx)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	return ch
}

func waitClosed(t *testing.T, ch <-chan string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("channel not closed after 10s")
		}
	}
}
