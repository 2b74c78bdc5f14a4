package tail

import (
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardtail/shardtail/membudget"
)

// stallFixture is a fixture whose clock (seconds) moves only when told,
// detaching subscribers stalled for 5 s, under a budget whose stallFloor
// is 128 KiB: two batches of bigRow.
func stallFixture(t *testing.T) (f *fixture, clock *atomic.Int64) {
	t.Helper()
	clock = new(atomic.Int64)
	timeNow = func() time.Time { return time.Unix(clock.Load(), 0) }
	t.Cleanup(func() { timeNow = time.Now })
	f = newFixture(t, Config{DetachStalledAfter: 5 * time.Second, Budget: membudget.New(8 << 20)})
	if got := stallFloor(f.m.cfg.Budget.Limit()); got != 128<<10 {
		t.Fatalf("stall floor %d, want 128 KiB", got)
	}
	return f, clock
}

// bigRow is larger than a take (catchUpBytes): a subscriber behind takes
// one such batch at a time.
var bigRow = strings.Repeat("x", catchUpBytes+1)

// writeAt writes u at second sec of clock and returns the rows reader got
// for it. When it returns the publish's fan-out is done: reader took the
// batch, and the tail's lock, which the fan-out holds, was free after it.
func writeAt(t *testing.T, f *fixture, clock *atomic.Int64, sec int64, reader *Subscriber, k int64, v string) []string {
	t.Helper()
	clock.Store(sec)
	f.write(ins(k, v))
	rows := canon(drain(t, f.ctx, reader, f.upper))
	reader.t.mu.Lock()
	reader.t.mu.Unlock() //nolint:staticcheck // waits for the publish's fan-out
	return rows
}

// TestStalledDetached: a subscriber that takes nothing while more than
// stallFloor waits in its queue for longer than DetachStalledAfter is
// detached at the next push; one that is far behind but took a batch
// lately stays attached, as does one that took nothing for long while
// its queue was empty (an idle, parked session) when a burst arrives.
// The detached one resumes from the shard with every row once it reads
// again.
func TestStalledDetached(t *testing.T) {
	f, clock := stallFixture(t)
	asOf := f.upper - 1
	reader := f.subscribe(asOf, false, 0, nil)
	slow := f.subscribe(asOf, false, 0, nil)
	stalled := f.subscribe(asOf, false, 0, nil)
	idle := f.subscribe(asOf, false, 0, nil)
	f.write()
	for _, s := range []*Subscriber{reader, slow, stalled, idle} {
		drain(t, f.ctx, s, f.upper) // attached at second 0
	}
	var want []string
	got := map[*Subscriber][]string{}
	take := func(s *Subscriber, all bool) {
		t.Helper()
		if all {
			got[s] = append(got[s], canon(drain(t, f.ctx, s, f.upper))...)
			return
		}
		rows, err := s.Next(f.ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		got[s] = append(got[s], canon(rows)...)
	}
	for sec := range int64(3) {
		want = append(want, writeAt(t, f, clock, sec+1, reader, sec, bigRow)...) // queued at seconds 1, 2, 3
	}
	take(idle, true)
	clock.Store(9)
	take(slow, false) // the batch of second 1, at second 9
	if isDetached(slow) || isDetached(stalled) {
		t.Fatal("detached before a push found them stalled")
	}

	// At second 10 the batches waiting for stalled have waited since
	// second 1; slow's since second 9, when it took one; idle's queue is
	// empty.
	want = append(want, writeAt(t, f, clock, 10, reader, 3, bigRow)...)
	if !isDetached(stalled) {
		t.Fatal("the stalled subscriber is still attached")
	}
	if isDetached(slow) || isDetached(idle) || isDetached(reader) {
		t.Fatalf("detached: slow %v, idle %v, reader %v; want none", isDetached(slow), isDetached(idle), isDetached(reader))
	}
	take(slow, true)
	take(idle, true)

	// At second 30 slow and idle have taken nothing for 20 s, but their
	// queues were empty: a burst waits only from its first push.
	for k := range int64(3) {
		want = append(want, writeAt(t, f, clock, 30, reader, 10+k, bigRow)...)
	}
	if isDetached(slow) || isDetached(idle) {
		t.Fatalf("detached by a burst after a quiet spell: slow %v, idle %v", isDetached(slow), isDetached(idle))
	}
	if got := testutil.ToFloat64(f.m.Metrics().stallDetaches); got != 1 {
		t.Fatalf("stall detaches = %v, want 1", got)
	}

	for _, s := range []*Subscriber{slow, stalled, idle} {
		take(s, true)
	}
	if got := testutil.ToFloat64(f.m.Metrics().resumes); got != 1 {
		t.Errorf("resumes = %v, want 1", got)
	}
	for name, s := range map[string]*Subscriber{"slow": slow, "stalled": stalled, "idle": idle} {
		if !reflect.DeepEqual(got[s], want) {
			t.Errorf("%s received %d rows, want the reader's %d:\n got %.200q\nwant %.200q", name, len(got[s]), len(want), got[s], want)
		}
	}
}

// TestStalledUnderFloor: a stalled subscriber whose queue holds no more
// than stallFloor stays attached however long it waits; once the queue
// passes the floor, the next push detaches it.
func TestStalledUnderFloor(t *testing.T) {
	f, clock := stallFixture(t)
	asOf := f.upper - 1
	reader := f.subscribe(asOf, false, 0, nil)
	stalled := f.subscribe(asOf, false, 0, nil)
	f.write()
	drain(t, f.ctx, reader, f.upper)
	drain(t, f.ctx, stalled, f.upper)
	writeAt(t, f, clock, 1, reader, 1, "small")
	writeAt(t, f, clock, 100, reader, 2, "small")
	writeAt(t, f, clock, 101, reader, 3, bigRow)
	writeAt(t, f, clock, 102, reader, 4, bigRow) // queued: under the floor before this push
	if isDetached(stalled) {
		t.Fatal("detached with less than the floor queued")
	}
	writeAt(t, f, clock, 103, reader, 5, "small") // now over it
	if !isDetached(stalled) {
		t.Fatal("still attached with more than the floor queued for 102 s")
	}
}
