package tail

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardtail/shardtail/formatter"
)

// TestIdleTickAllocatesNothingPerSubscriber: a tick (a batch with no
// updates) reaching idle subscribers — pushed to each one's queue, waking
// it through Ready's wake, its progress row taken with Next and encoded
// for COPY as a session does, and Ready again — allocates nothing per
// subscriber: ten thousand idle subscribers each ticked every second
// otherwise make garbage that keeps the heap, and the RSS, at twice what
// they hold. What a batch costs once (the batch, its progress row) is
// the same for 1 subscriber and for many.
func TestIdleTickAllocatesNothingPerSubscriber(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on channel and lock operations")
	}
	perTick := func(subs int) float64 {
		f := newFixture(t, Config{})
		opts := &formatter.Options{Relation: schema, Progress: true}
		var woken atomic.Int64
		wake := func() { woken.Add(1) }
		type idle struct {
			s    *Subscriber
			enc  *formatter.CopyEncoder
			buf  []byte
			runs [][]byte
		}
		var idles []*idle
		for range subs {
			s := f.subscribe(f.upper-1, true, 0, nil)
			drain(t, f.ctx, s, f.upper)
			idles = append(idles, &idle{s: s, enc: formatter.NewCopyEncoder(opts, formatter.CopyText)})
		}
		// Idle: the listen has published the shard's last batch, and each
		// subscriber has taken what it queued.
		tl := idles[0].s.t
		for {
			tl.mu.Lock()
			caughtUp := tl.frontier >= f.upper
			tl.mu.Unlock()
			if caughtUp {
				break
			}
			time.Sleep(time.Millisecond)
		}
		for _, in := range idles {
			for in.s.Ready(wake) {
				if _, err := in.s.Next(f.ctx, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		cycle := func() {
			// The tick, as the listen publishes it (not through storage,
			// whose reads allocate per batch and vary with its polls).
			tl.mu.Lock()
			frontier := tl.frontier + 1
			tl.mu.Unlock()
			woken.Store(0)
			tl.publish(nil, frontier)
			if n := woken.Load(); n != int64(subs) {
				t.Fatalf("a tick woke %d of %d idle subscribers", n, subs)
			}
			for _, in := range idles {
				rows, err := in.s.Next(f.ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) != 1 || !rows[0].Progressed || rows[0].Time != frontier {
					t.Fatalf("a tick to %d gave %v, want its progress row", frontier, rows)
				}
				in.runs = formatter.AppendRuns(in.runs[:0], in.enc, rows, &in.buf)
				if in.s.Ready(wake) {
					t.Fatal("Ready after the tick's row is true, want false")
				}
			}
		}
		cycle()
		return testing.AllocsPerRun(100, cycle)
	}
	const many = 200
	one, all := perTick(1), perTick(many)
	per := (all - one) / (many - 1)
	t.Logf("allocations per tick: %.1f with 1 idle subscriber, %.1f with %d: %.3f per subscriber", one, all, many, per)
	if per > 0.05 {
		t.Errorf("a tick allocates %.3f times per idle subscriber, want 0", per)
	}
}
