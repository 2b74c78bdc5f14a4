package tail

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// isDetached reports whether the budget (or its own) detached s and it has
// not resumed yet.
func isDetached(s *Subscriber) bool {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return s.detached
}

// queueArrays is the bytes of the subscribers' queues' own arrays, which
// the queues holder counts besides the batches.
func queueArrays(subs ...*Subscriber) int64 {
	var n int64
	for _, s := range subs {
		s.qmu.Lock()
		n += s.queueArray
		s.qmu.Unlock()
	}
	return n
}

// windowOnly is the bytes the policy's shrink frees: the windows' batches
// before each one's newest that no queue references.
func windowOnly(m *Manager) int64 {
	var n int64
	for _, t := range m.running() {
		t.mu.Lock()
		for i, b := range t.window {
			b.acct.Lock()
			if i < len(t.window)-1 && b.queueRefs.Load() == 0 {
				n += b.bytes + b.extra
			}
			b.acct.Unlock()
		}
		t.mu.Unlock()
	}
	return n
}

// TestBudgetPolicyOrder: over budget, the windows shrink first, and only
// if that is not enough are queues detached, largest first, until the
// total is down to a quarter of the budget (detachTarget): not just
// under it.
func TestBudgetPolicyOrder(t *testing.T) {
	budget := membudget.New(0) // unlimited while the queues fill
	// The fixture's times are small numbers, far older than any age bound.
	f := newFixture(t, Config{Budget: budget, WindowAge: 100 * 365 * 24 * time.Hour})
	asOf := f.upper - 1
	oldest := f.subscribe(asOf, false, 0, nil)
	newer := f.subscribe(asOf, false, 0, nil)
	reader := f.subscribe(asOf, false, 0, nil)
	f.write()
	for _, s := range []*Subscriber{oldest, newer, reader} {
		drain(t, f.ctx, s, f.upper) // attached
	}
	big := strings.Repeat("x", 500)
	for i := range 2 {
		f.write(ins(int64(i), big))
	}
	drain(t, f.ctx, newer, f.upper) // newer stalls 2 batches after oldest
	for i := range 4 {
		f.write(ins(int64(10+i), big))
	}
	drain(t, f.ctx, reader, f.upper) // every batch published
	budget.WaitEnforce()             // no enforcement in flight

	window, queues := budget.Holder(membudget.HolderWindow), budget.Holder(membudget.HolderQueues)
	if arrays := queueArrays(oldest, newer, reader); window.Bytes() == 0 || queues.Bytes() != arrays {
		t.Fatalf("before: window %d, queues %d bytes (%d of them the queues' arrays); want the window to hold every batch",
			window.Bytes(), queues.Bytes(), arrays)
	}
	total := budget.Total()

	// 1. Over by one byte more than the window alone holds (the queues pin
	// all but the progress-only batches, as many as the ticks published):
	// after the shrink the largest queue goes, freeing the 2 batches only
	// it holds, which brings the total under the budget but not down to a
	// quarter of it (the other queue pins the 4 newest): that queue goes
	// too. The reader, which took everything, stays.
	budget.SetLimit(total - windowOnly(f.m) - 1)
	f.m.enforce()
	if got := testutil.ToFloat64(f.m.Metrics().budgetShrinks); got != 1 {
		t.Errorf("window shrinks = %v, want 1", got)
	}
	if got, want := [3]bool{isDetached(oldest), isDetached(newer), isDetached(reader)}, [3]bool{true, true, false}; got != want {
		t.Fatalf("detached (oldest, newer, reader) = %v, want %v", got, want)
	}
	if got := budget.Total(); got > budget.Limit()/4 {
		t.Fatalf("total %d after enforcement, over a quarter of the budget %d", got, budget.Limit())
	}
	if got := testutil.ToFloat64(f.m.Metrics().budgetDetaches); got != 2 {
		t.Errorf("budget detaches = %v, want 2", got)
	}

	// 2. Over by what only the window holds: shrinking it is enough, no
	// queue is detached. Unlimited again while the queues fill (else the
	// window's cap acts first).
	budget.SetLimit(0)
	for _, s := range []*Subscriber{oldest, newer} {
		drain(t, f.ctx, s, f.upper) // resumed
	}
	for i := range 2 {
		f.write(ins(int64(20+i), big))
	}
	drain(t, f.ctx, reader, f.upper)
	drain(t, f.ctx, oldest, f.upper)
	budget.WaitEnforce()
	budget.SetLimit(budget.Total() - 1)
	f.m.enforce()
	if isDetached(newer) {
		t.Fatal("newer detached although shrinking the window was enough")
	}
	if got := testutil.ToFloat64(f.m.Metrics().budgetShrinks); got != 2 {
		t.Errorf("window shrinks = %v, want 2", got)
	}
	if got := budget.Total(); got > budget.Limit() {
		t.Fatalf("total %d after enforcement, over the budget %d", got, budget.Limit())
	}
	if got := testutil.ToFloat64(f.m.Metrics().budgetDetaches); got != 2 {
		t.Errorf("budget detaches = %v, want 2", got)
	}
}

// TestBudgetDetachesStalled: with a small process budget, stalled
// subscribers are detached by the budget (not by their own
// MaxBufferedBytes, which is off) while readers keep receiving; the
// accounted total stays within the budget after enforcement, the metric
// reports the holders, and every stalled subscriber that reads again gets
// every row.
func TestBudgetDetachesStalled(t *testing.T) {
	const limit = 4 << 10
	budget := membudget.New(limit)
	reg := prometheus.NewRegistry()
	if err := budget.Register(reg); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Config{Budget: budget})
	asOf := f.upper - 1
	var stalled, readers []*Subscriber
	var stalledRows, readerRows [][]formatter.Row
	for range 4 {
		stalled = append(stalled, f.subscribe(asOf, true, 0, nil))
	}
	for range 2 {
		readers = append(readers, f.subscribe(asOf, true, 0, nil))
	}
	f.write(ins(-1, "warm-up"))
	for _, s := range stalled {
		stalledRows = append(stalledRows, drain(t, f.ctx, s, f.upper))
	}
	for _, s := range readers {
		readerRows = append(readerRows, drain(t, f.ctx, s, f.upper))
	}
	for i := range 60 {
		f.write(ins(int64(i), fmt.Sprint(strings.Repeat("v", 200), i)))
		for j, s := range readers {
			readerRows[j] = append(readerRows[j], drain(t, f.ctx, s, f.upper)...)
		}
	}
	// The listen loop enforces after each publish, and publishes in
	// order: every enforcement but the last publish's is done.
	for i, s := range stalled {
		if !isDetached(s) {
			t.Errorf("stalled subscriber %d was not detached", i)
		}
	}
	budget.WaitEnforce() // the last publish's enforcement, if it began, is done
	f.m.enforce()        // and if it had not begun, this is it
	if got := testutil.ToFloat64(f.m.Metrics().detaches); got != 0 {
		t.Errorf("per-subscriber detaches = %v, want 0 (budget off)", got)
	}
	if got := testutil.ToFloat64(f.m.Metrics().budgetDetaches); got < float64(len(stalled)) {
		t.Errorf("budget detaches = %v, want at least %d", got, len(stalled))
	}
	// After enforcement the total is within the budget: whatever is still
	// queued fits, and the window is down to at most its newest batch.
	if got := budget.Total(); got > limit {
		t.Errorf("total %d bytes after enforcement, over the %d byte budget (%v)", got, limit, budget.Bytes())
	}
	n, err := testutil.GatherAndCount(reg, "shardtail_memory_bytes")
	if err != nil {
		t.Fatal(err)
	}
	if n < 3 {
		t.Errorf("shardtail_memory_bytes has %d holders, want window, queues and ordered", n)
	}

	want := canon(readerRows[0])
	for i, s := range stalled {
		stalledRows[i] = append(stalledRows[i], drain(t, f.ctx, s, f.upper)...)
		if got := canon(stalledRows[i]); !reflect.DeepEqual(got, want) {
			t.Fatalf("stalled subscriber %d:\n got %v\nwant %v", i, got, want)
		}
	}
	if got := canon(readerRows[1]); !reflect.DeepEqual(got, want) {
		t.Fatalf("readers differ:\n got %v\nwant %v", got, want)
	}
}

// TestBudgetShrinksSnapshotShares: a share's pieces are charged to the
// snapshot holder; over budget, the shrink drops the pieces every
// subscriber of a share took (keeping what a slow one has yet to take) and
// forgets a finished share kept for late joiners. Every subscriber still
// gets the whole snapshot.
func TestBudgetShrinksSnapshotShares(t *testing.T) {
	budget := membudget.New(0)
	snap := budget.Holder(membudget.HolderSnapshot)
	f := newFixture(t, Config{Budget: budget})
	var ups []row.Update
	for i := range 3 * persist.DefaultSnapshotChunkRows {
		ups = append(ups, ins(int64(i), "v"))
	}
	f.write(ups...)
	asOf := f.upper - 1
	fast, slow := f.subscribe(asOf, true, 0, nil), f.subscribe(asOf, true, 0, nil)
	slowRows := takeRows(t, f, slow, 2) // the progress row and piece 0's first row
	want := canon(drain(t, f.ctx, fast, f.upper))
	before := snap.Bytes()
	if before <= 0 {
		t.Fatalf("snapshot holder %d bytes with the whole snapshot retained, want > 0", before)
	}

	// 1. A share still read: the pieces both took go, the rest stays.
	budget.SetLimit(budget.Total() - 1)
	budget.Enforce()
	if after := snap.Bytes(); after <= 0 || after >= before {
		t.Errorf("snapshot holder %d bytes after the shrink, want in (0, %d): slow's unread pieces only", after, before)
	}
	budget.SetLimit(0)
	slowRows = append(slowRows, drain(t, f.ctx, slow, f.upper)...)
	if got := canon(slowRows); !reflect.DeepEqual(got, want) {
		t.Fatalf("slow subscriber's stream differs:\n got %d rows\nwant %d", len(got), len(want))
	}
	if got := snap.Bytes(); got != 0 {
		t.Errorf("snapshot holder %d bytes once the shrunk share's readers finished, want 0", got)
	}

	// 2. A finished share kept for late joiners is forgotten; a late
	// joiner reads the snapshot again.
	f.write(ins(-1, "new"))
	asOf = f.upper - 1
	first := canon(drain(t, f.ctx, f.subscribe(asOf, true, 0, nil), f.upper))
	if snap.Bytes() <= 0 {
		t.Fatal("a finished share is not retained for late joiners")
	}
	budget.SetLimit(budget.Total() - 1)
	budget.Enforce()
	if got := snap.Bytes(); got != 0 {
		t.Errorf("snapshot holder %d bytes after the shrink, want 0 (the kept share forgotten)", got)
	}
	budget.SetLimit(0)
	if got := canon(drain(t, f.ctx, f.subscribe(asOf, true, 0, nil), f.upper)); !reflect.DeepEqual(got, first) {
		t.Fatalf("a late joiner's stream differs: got %d rows, want %d", len(got), len(first))
	}
}

// takeRows reads exactly n rows from s.
func takeRows(t *testing.T, f *fixture, s *Subscriber, n int) []formatter.Row {
	t.Helper()
	var out []formatter.Row
	for len(out) < n {
		rows, err := s.Next(f.ctx, n-len(out))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
	}
	return out
}

// heapInUse is the bytes of live heap objects after a full collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC() // and what the first one's finalizers let go
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestBudgetCountsWhatBatchesRetain: the bytes the budget counts for the
// batches a stalled subscriber pins are the bytes they keep alive: the
// decoded updates, and the rows formatted and encoded for the readers of
// the same batches (which live as long as the batch). The budget's policy
// works on these figures; counting only the updates let the process hold
// twice its budget.
func TestBudgetCountsWhatBatchesRetain(t *testing.T) {
	budget := membudget.New(0) // accounted, never enforced
	// The window keeps only its newest batch: the stalled queue holds the
	// rest.
	f := newFixture(t, Config{Budget: budget, WindowBytes: 1})
	asOf := f.upper - 1
	stalled, reader := f.subscribe(asOf, false, 0, nil), f.subscribe(asOf, false, 0, nil)
	f.write(ins(-1, "warm-up"))
	for _, s := range []*Subscriber{stalled, reader} {
		drain(t, f.ctx, s, f.upper) // attached
	}
	// What the reader's session does with its rows (pgwire's COPY).
	enc := formatter.NewCopyEncoder(reader.req.Output, formatter.CopyText)
	var buf []byte
	read := func() {
		t.Helper()
		for {
			rows, err := reader.Next(f.ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			formatter.Messages(enc, rows, &buf)
			if last := rows[len(rows)-1]; last.Progressed && last.Time >= f.upper {
				return
			}
		}
	}
	const batches, rowsPerBatch, valueBytes = 100, 8, 4 << 10
	budget.WaitEnforce()
	countedBefore, heapBefore := budget.Total(), heapInUse()
	for i := range batches {
		var ups []row.Update
		for j := range rowsPerBatch {
			// Compressible in storage (the in-memory blob holds parts),
			// full size once decoded.
			ups = append(ups, ins(int64(i*rowsPerBatch+j), fmt.Sprint(j, strings.Repeat("v", valueBytes))))
		}
		f.write(ups...)
		read()
	}
	budget.WaitEnforce()
	buf = nil
	retained := heapInUse() - heapBefore
	counted := budget.Total() - countedBefore
	// Part of the heap's growth is not the batches' (persist's state, the
	// fixture's bookkeeping): allow a tenth either way.
	if lo, hi := retained*9/10, retained*11/10; counted < lo || counted > hi {
		t.Errorf("the budget counts %.2f MiB for the batches, the heap grew by %.2f MiB: want within 10 %% (%v)",
			float64(counted)/(1<<20), float64(retained)/(1<<20), budget.Bytes())
	}
	t.Logf("counted %d, retained %d", counted, retained)
	// The window's own bound is kept on the same figures.
	stalled.t.mu.Lock()
	windowBytes := stalled.t.windowBytes.Load()
	stalled.t.mu.Unlock()
	if got, want := windowBytes, budget.Holder(membudget.HolderWindow).Bytes(); got != want {
		t.Errorf("window bytes %d, the window holder counts %d", got, want)
	}
	runtime.KeepAlive(stalled)
}

// TestBudgetCountsSnapshotEncodings: a retained snapshot piece's encodings
// (computed once per wire format, as the share's subscribers send it) are
// charged to the snapshot holder while the share keeps the piece, and
// released with it.
func TestBudgetCountsSnapshotEncodings(t *testing.T) {
	budget := membudget.New(0)
	snap := budget.Holder(membudget.HolderSnapshot)
	f := newFixture(t, Config{Budget: budget})
	const valueBytes = 1 << 10
	var ups []row.Update
	for i := range 100 {
		ups = append(ups, ins(int64(i), strings.Repeat("v", valueBytes)))
	}
	f.write(ups...)
	asOf := f.upper - 1
	// A second subscriber keeps the share (and its pieces) alive.
	s, other := f.subscribe(asOf, true, 0, nil), f.subscribe(asOf, true, 0, nil)
	rows := takeRows(t, f, s, 1+len(ups)) // the progress row and the snapshot
	before := snap.Bytes()
	enc := formatter.NewCopyEncoder(s.req.Output, formatter.CopyText)
	var buf []byte
	formatter.Messages(enc, rows, &buf)
	if got, want := snap.Bytes()-before, int64(len(ups)*valueBytes); got < want {
		t.Errorf("snapshot holder grew by %d bytes with the piece's COPY encoding computed, want at least %d (the values encoded)", got, want)
	}
	drain(t, f.ctx, s, f.upper)
	drain(t, f.ctx, other, f.upper)
	s.Close()
	other.Close()
	budget.SetLimit(1)
	budget.Enforce() // forgets the finished share kept for late joiners
	if got := snap.Bytes(); got != 0 {
		t.Errorf("snapshot holder %d bytes once the share let go of its pieces, want 0", got)
	}
}

// TestSnapshotAloneEncodesItself: a subscriber alone on a share that can
// no longer be joined (its first piece dropped) encodes its pieces into its
// own run buffer (formatter.StreamRuns), charged to the snapshot holder
// while held and uncharged at Release; with a second subscriber on the
// share every piece is written from the share's cached encoding. Either
// way the bytes are the rows' COPY text, and the holder is back to 0 once
// the shares let go.
func TestSnapshotAloneEncodesItself(t *testing.T) {
	for _, tc := range []struct {
		name    string
		readers int
		own     bool // some pieces encoded into the run buffer
	}{
		{"Alone", 1, true},
		{"Shared", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			budget := membudget.New(0)
			snap := budget.Holder(membudget.HolderSnapshot)
			// Pieces are dropped once taken: the share is not kept for
			// late joiners.
			f := newFixture(t, Config{Budget: budget, ShareRetainBytes: 1})
			var ups []row.Update
			for i := range 20_000 {
				ups = append(ups, ins(int64(i), fmt.Sprintf("v%d\t\\", i)))
			}
			f.write(ups...)
			asOf := f.upper - 1
			subs := make([]*Subscriber, tc.readers)
			for i := range subs {
				subs[i] = f.subscribe(asOf, true, 0, nil)
			}
			s := subs[0]
			enc := formatter.NewCopyEncoder(s.req.Output, formatter.CopyText)
			ref := formatter.NewCopyEncoder(s.req.Output, formatter.CopyText)
			var rb formatter.RunBuffer
			var got, want, refBuf []byte
			owned, rows := 0, 0
			for done := false; !done; {
				out, err := s.Next(f.ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				// Up to the progress row that completes the snapshot.
				last := out[len(out)-1]
				done = last.Progressed && last.Time > asOf
				for _, other := range subs[1:] {
					// The other subscriber keeps up, so that the share
					// drops pieces as they are taken.
					takeRows(t, f, other, len(out))
				}
				rows += len(out)
				for _, r := range formatter.StreamRuns(enc, out, &rb) {
					got = append(got, r...)
				}
				// The same rows as rows of their own, encoded from their
				// datums: what the wire must carry.
				plain := make([]formatter.Row, len(out))
				for i, r := range out {
					plain[i] = formatter.Row{Time: r.Time, Progressed: r.Progressed, Tail: r.Columns()}
				}
				for _, r := range formatter.Runs(ref, plain, &refBuf) {
					want = append(want, r...)
				}
				held := snap.Bytes()
				rb.Release()
				if snap.Bytes() < held {
					owned++
				}
			}
			if rows != len(ups)+2 {
				t.Fatalf("got %d rows, want the %d of the snapshot and two progress rows", rows, len(ups))
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("COPY bytes differ from the rows' (%d vs %d bytes)", len(got), len(want))
			}
			if tc.own && owned == 0 {
				t.Error("no piece was encoded into the subscriber's own buffer")
			}
			if !tc.own && owned > 0 {
				t.Errorf("%d batches were encoded into the subscriber's own buffer with a second subscriber on the share", owned)
			}
			for _, s := range subs {
				s.Close()
			}
			budget.SetLimit(1)
			budget.Enforce() // forgets finished shares kept for late joiners
			if got := snap.Bytes(); got != 0 {
				t.Errorf("snapshot holder %d bytes once the shares let go, want 0", got)
			}
		})
	}
}

// TestDetachTarget: the policy detaches queues down to a quarter of the
// budget only when the queues it may detach could get it there; when the
// rest (memory the tail cannot shed) holds more, down to the budget.
func TestDetachTarget(t *testing.T) {
	const limit = 1000
	for _, tc := range []struct{ total, queued, want int64 }{
		{1100, 900, 250},  // the rest, 200, is under a quarter
		{1100, 850, 250},  // exactly a quarter
		{1100, 500, 1000}, // the rest, 600: every queue would go for nothing
	} {
		if got := detachTarget(limit, tc.total, tc.queued); got != tc.want {
			t.Errorf("detachTarget(%d, total %d, queued %d) = %d, want %d", limit, tc.total, tc.queued, got, tc.want)
		}
	}
}

// TestWindowsShareOfBudget: the windows together hold at most a quarter
// of the budget (windowCap), trimmed as batches are published, without
// the budget's shrink: the process is never over its budget.
func TestWindowsShareOfBudget(t *testing.T) {
	const limit = 64 << 10
	budget := membudget.New(limit)
	// The fixture's times are small numbers, far older than any age bound.
	f := newFixture(t, Config{Budget: budget, WindowAge: 100 * 365 * 24 * time.Hour})
	reader := f.subscribe(f.upper-1, false, 0, nil)
	drain(t, f.ctx, reader, f.upper)
	window := budget.Holder(membudget.HolderWindow)
	var published int64
	for i := range 100 {
		f.write(ins(int64(i), strings.Repeat("w", 400)))
		drain(t, f.ctx, reader, f.upper)
		published = max(published, window.Bytes())
		if got := budget.Total(); got > limit {
			t.Fatalf("write %d: total %d over the %d byte budget", i, got, limit)
		}
	}
	// Each publish trims the window to its cap (keeping the newest
	// batch); the reader's formatting adds to the newest batch afterwards.
	tails := f.m.running()
	if len(tails) != 1 {
		t.Fatalf("%d tails, want 1", len(tails))
	}
	tl := tails[0]
	tl.mu.Lock()
	newest := tl.window[len(tl.window)-1]
	tl.mu.Unlock()
	newest.acct.Lock()
	extra := newest.extra
	newest.acct.Unlock()
	if got, want := window.Bytes(), windowCap(limit)+extra; got > want {
		t.Errorf("window holds %d bytes, over its cap %d and what the newest batch's formatting added (%d)", got, windowCap(limit), extra)
	}
	if published < windowCap(limit)/2 {
		t.Fatalf("the window held at most %d bytes: the writes never came near its cap %d", published, windowCap(limit))
	}
	if got := testutil.ToFloat64(f.m.Metrics().budgetShrinks); got != 0 {
		t.Errorf("window shrinks = %v, want 0: the cap, not the budget's policy, bounds the window", got)
	}
}

// TestDetachRechecks: a subscriber whose queue the budget's policy found
// large, and which read it before the policy came to detach it, stays
// attached: it would otherwise catch up from the shard for nothing.
func TestDetachRechecks(t *testing.T) {
	const limit = 1 << 20 // floor 16 KiB; the windows hold it all
	f := newFixture(t, Config{Budget: membudget.New(limit), WindowAge: 100 * 365 * 24 * time.Hour})
	s := f.subscribe(f.upper-1, false, 0, nil)
	f.write()
	drain(t, f.ctx, s, f.upper) // attached
	for i := range 60 {
		f.write(ins(int64(i), strings.Repeat("q", 400)))
	}
	// The tail publishes the writes on its own goroutine: wait until they
	// are queued (a loaded machine publishes late).
	var qs []queued
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if qs, _ = f.m.largeQueues(); len(qs) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(qs) != 1 || qs[0].s != s {
		t.Fatalf("large queues: %d, want the subscriber's alone", len(qs))
	}
	drain(t, f.ctx, s, f.upper)
	f.m.detachWhile(qs, func() bool { return true })
	if isDetached(s) {
		t.Fatal("detached after it read its queue")
	}
}
