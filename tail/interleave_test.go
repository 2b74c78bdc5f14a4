package tail

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardtail/shardtail/row"
)

// TestJoinWhilePublishing: subscribers that start, take their snapshot and
// join the live stream while the listen publishes batch after batch (from
// the window, after a private catch-up when the window is one batch, or
// detached and resumed when their queue budget is small) each get every
// write exactly once: at AS OF if it was written by then, else at its own
// time, with progress rows that only advance. A batch published between a
// subscriber's window batches and its attachment, or while it is detached,
// would show here as a missing or doubled key.
func TestJoinWhilePublishing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window int64
		budget int64
	}{{"FromWindow", 64 << 20, 0}, {"PrivateCatchUp", 1, 0}, {"Detached", 64 << 20, 300}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{WindowBytes: tc.window})
			// Times are epoch milliseconds, as the oracle's: the window
			// keeps batches by their age too.
			now := uint64(time.Now().UnixMilli())
			if err := f.w.CompareAndAppend(f.ctx, nil, f.upper, now); err != nil {
				t.Fatal(err)
			}
			f.upper = now
			const writes = 120
			base := f.upper // key i is written at base + i
			var upper atomic.Uint64
			upper.Store(f.upper)
			wrote := make(chan error, 1)
			go func() {
				u := base
				for i := range writes {
					ups := []row.Update{{Row: row.Row{int64(i), "v"}, T: u, Diff: 1}}
					if err := f.w.CompareAndAppend(f.ctx, ups, u, u+1); err != nil {
						wrote <- err
						return
					}
					u++
					upper.Store(u)
					if i%8 == 0 {
						time.Sleep(time.Millisecond) // let subscribers join in between
					}
				}
				wrote <- nil
			}()
			type result struct {
				asOf uint64
				rows []string
				err  error
			}
			results := make(chan result)
			var finals []chan uint64
			const subs = 12
			for range subs {
				asOf := upper.Load() - 1
				s := f.subscribe(asOf, true, tc.budget, nil)
				fin := make(chan uint64, 1)
				finals = append(finals, fin)
				go func() {
					var got []string
					var last uint64
					end := uint64(0)
					for end == 0 || last < end {
						if end == 0 {
							select {
							case end = <-fin:
							default:
							}
						}
						rows, err := s.Next(f.ctx, 0)
						if err != nil {
							results <- result{asOf: asOf, rows: got, err: err}
							return
						}
						for _, r := range rows {
							if !r.Progressed {
								got = append(got, fmt.Sprintf("%d %v", r.Time, r.Columns()))
								continue
							}
							if r.Time <= last && last != 0 {
								results <- result{asOf: asOf, rows: got, err: fmt.Errorf("progress %d after %d", r.Time, last)}
								return
							}
							last = r.Time
						}
						if end == 0 {
							select {
							case end = <-fin:
							default:
							}
						}
					}
					results <- result{asOf: asOf, rows: got}
				}()
				time.Sleep(2 * time.Millisecond)
			}
			if err := <-wrote; err != nil {
				t.Fatal(err)
			}
			// The end: one more batch, which every subscriber then
			// reaches, waiting in Next or not.
			end := upper.Load()
			for _, fin := range finals {
				fin <- end + 1
			}
			if err := f.w.CompareAndAppend(f.ctx, nil, end, end+1); err != nil {
				t.Fatal(err)
			}
			for range subs {
				r := <-results
				if r.err != nil && !errors.Is(r.err, io.EOF) {
					t.Fatalf("subscriber at %d: %v (rows %q)", r.asOf, r.err, r.rows)
				}
				var want []string
				for i := range writes {
					at := max(base+uint64(i), r.asOf)
					want = append(want, fmt.Sprintf("%d [1 %d v]", at, i))
				}
				slices.Sort(want)
				got := slices.Sorted(slices.Values(r.rows))
				if !slices.Equal(got, want) {
					t.Fatalf("subscriber at AS OF %d:\n got %q\nwant %q", r.asOf, got, want)
				}
			}
		})
	}
}
