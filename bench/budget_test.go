package bench

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardtail/shardtail/internal/sockopt"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/tail"
)

// budgetPeak samples a budget's accounted total until stop, keeping the
// largest and the holders at that moment. persist's writes in flight are
// left out of the total: they are charged, but no stage of the policy
// sheds them (persist bounds them by taking turns, see its tests), so
// the policy's bound is on the rest.
type budgetPeak struct {
	mu      sync.Mutex
	peak    int64            // mu
	holders map[string]int64 // mu: at the peak
	samples int              // mu
}

// sample starts sampling b every millisecond; the returned func stops it.
func (p *budgetPeak) sample(b *membudget.Budget) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if n := b.Total() - b.Holder(membudget.HolderPersist).Bytes(); n > 0 {
				p.mu.Lock()
				p.samples++
				if n > p.peak {
					p.peak, p.holders = n, b.Bytes()
				}
				p.mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-exited }
}

// TestBudgetStorm is the scaled-down memory-budget scenario: stalled and
// reading fast-path subscribers over 8 collections while far more than the
// budget is written. The accounted total (sampled) stays within the budget
// plus the slack below, the server survives, every reader receives every
// row, and every stalled subscriber reading again receives every row of
// its table in order and once, or, only if the shard compacted past it,
// the history-loss error. With RETAIN HISTORY long enough, none may get
// that error: they all resume at once from the shard, in catch-ups whose
// chunks stay charged within the budget.
//
// The first two runs leave the stalled subscribers attached however long
// they stall (tail.Config.DetachStalledAfter negative), so that the
// budget alone must hold their backlog; the third detaches them as
// stalled once they have taken nothing for half a second with more than
// the stall floor (here 256 KiB) waiting, usually before the budget needs
// to (the server's
// default, 5 s, is about the length of the scaled run's writes), with the
// server's default TCP_NOTSENT_LOWAT, so that a stalled client's socket
// stops taking its session's writes after 128 KiB rather than megabytes.
func TestBudgetStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 64 MiB through 40 clients: minutes under -race")
	}
	for _, tc := range []struct {
		name       string
		retain     string
		written    int64
		stallAfter time.Duration
		lowWater   int
	}{
		{"DefaultRetention", "", 64 << 20, -1, 0},
		{"RetainHistory", "1 hour", 32 << 20, -1, 0},
		// A stall timeout well under the live phase (0.4 s at the
		// shortest seen, on an idle machine without -race): at 500 ms
		// the budget detached every stalled subscriber first in one
		// run of five.
		{"StalledDetached", "1 hour", 32 << 20, 200 * time.Millisecond, sockopt.DefaultNotSentLowWater},
	} {
		t.Run(tc.name, func(t *testing.T) { budgetStorm(t, tc.retain, tc.written, tc.stallAfter, tc.lowWater) })
	}
}

func budgetStorm(t *testing.T, retain string, written int64, stallAfter time.Duration, lowWater int) {
	const (
		limit                   = 16 << 20
		collections             = 8
		readers, stalled        = 24, 16
		rowBytes, rowsPerInsert = 4 << 10, 32
		batch                   = rowBytes * rowsPerInsert
	)
	// The slack is what the policy leaves or has not shed yet: per
	// collection, a listen batch between its charge and the enforcement
	// it triggers, the newest batch its window keeps, and the queues of
	// subscribers keeping up (at most 1/64 of the budget: tail's detach
	// floor); and pgwire's send buffers, which grow by up to about a
	// formatted batch per client between two enforcements.
	const slack = collections*(2*batch+limit/64) + (readers+stalled)*batch
	budget := membudget.New(limit)
	srv := testserver.Start(t, testserver.Options{Tail: tail.Config{Budget: budget, DetachStalledAfter: stallAfter},
		PGWire: pgwire.Config{NotSentLowWater: lowWater}})
	var peak budgetPeak
	stop := peak.sample(budget)
	r, err := BudgetStorm(context.Background(), BudgetConfig{
		URL: srv.URL(), Collections: collections, Readers: readers, Stalled: stalled,
		WriteBytes: written, RowBytes: rowBytes, RowsPerInsert: rowsPerInsert, RetainHistory: retain, Timeout: 2 * time.Minute,
	})
	stop()
	must(t, err)
	s := r.Storm
	t.Logf("live %.1fs, storm %.1fs; peak accounted %s of budget %s + slack %s over %d samples, at %v; detaches %v (stalled %v), resumes %v, "+
		"caught up from the shard %v in %v catch-ups (%v chunks, peak %s), history loss %v",
		s.LiveSeconds, s.StormSeconds, mib(float64(peak.peak)), mib(limit), mib(slack), peak.samples, peak.holders,
		counterValue(t, srv, "shardtail_tail_budget_detaches_total"), counterValue(t, srv, "shardtail_tail_stall_detaches_total"),
		counterValue(t, srv, "shardtail_tail_resumes_total"), counterValue(t, srv, "shardtail_tail_private_catchups_total"), counterValue(t, srv, "shardtail_tail_catchups_total"),
		counterValue(t, srv, "shardtail_tail_catchup_chunks_total"), mib(float64(budget.Holder(membudget.HolderCatchUp).Peak())),
		counterValue(t, srv, "shardtail_tail_history_loss_errors_total"))
	if peak.peak > limit+slack {
		t.Errorf("the accounted total reached %d bytes, over the budget %d + slack %d (holders %v)", peak.peak, limit, slack, peak.holders)
	}
	if s.Errors != 0 || s.Completed != readers+stalled {
		t.Fatalf("completed %d of %d, errors %d %v", s.Completed, readers+stalled, s.Errors, s.ErrorSamples)
	}
	if got, want := s.LiveRows, r.RowsPerCollection*readers; got != want {
		t.Errorf("readers received %d live rows, want %d (%d each)", got, want, r.RowsPerCollection)
	}
	// A stalled client that did not get every row must have got the
	// history-loss error, and the server must have seen that many losses.
	lost := 0
	for msg, n := range s.StalledFailures {
		if !strings.Contains(msg, "53200") || !strings.Contains(msg, "fell behind") {
			t.Errorf("%d stalled clients failed: %s", n, msg)
		}
		lost += n
	}
	if s.StalledComplete+lost != stalled {
		t.Errorf("%d stalled clients complete and %d lost history, of %d", s.StalledComplete, lost, stalled)
	}
	if hl := counterValue(t, srv, "shardtail_tail_history_loss_errors_total"); float64(lost) > hl {
		t.Errorf("%d stalled clients got the history-loss error, but the server lost history for %v", lost, hl)
	}
	if retain != "" {
		if lost != 0 {
			t.Errorf("%d stalled clients lost history with RETAIN HISTORY FOR '%s'", lost, retain)
		}
		if c := counterValue(t, srv, "shardtail_tail_private_catchups_total"); c == 0 {
			t.Error("no stalled subscriber caught up from the shard: the scenario did not exercise resuming")
		}
		if p := budget.Holder(membudget.HolderCatchUp).Peak(); p > limit/4 {
			t.Errorf("catch-ups held %d bytes at their peak, want at most a quarter of the budget %d", p, limit)
		}
	}
	// The budget, not the kernel or the clients' own limits, held the
	// stalled backlog: it detached them; or the stall rule detached them,
	// each unless the budget did first (on a loaded machine the budget can
	// fill within the stall timeout).
	budgetDetaches := counterValue(t, srv, "shardtail_tail_budget_detaches_total")
	if stallAfter <= 0 {
		if budgetDetaches == 0 {
			t.Error("the budget detached no subscriber: the scenario did not exercise it")
		}
	} else if d := counterValue(t, srv, "shardtail_tail_stall_detaches_total"); d == 0 || d+budgetDetaches < stalled {
		t.Errorf("%v subscribers detached as stalled and %v by the budget; want some as stalled, and at least the %d stalled in all",
			d, budgetDetaches, stalled)
	}
	must(t, execSQL(context.Background(), srv.URL(), "SELECT 1")) // the server is alive
}

func TestParseScenarios(t *testing.T) {
	for in, want := range map[string]string{"": "", "abc": "abc", "budget": "g", "a,budget": "ag", "f, g": "fg", "shapes": "h", "h,budget": "hg", "feed": "i", "i,a": "ia"} {
		if got, err := ParseScenarios(in); err != nil || got != want {
			t.Errorf("ParseScenarios(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"j", "budgets", "a,x"} {
		if got, err := ParseScenarios(in); err == nil {
			t.Errorf("ParseScenarios(%q) = %q, want an error", in, got)
		}
	}
}
