package tail

import (
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestStalledDetached: a subscriber that takes nothing while batches wait
// in its queue for longer than StallAfter is detached at the next push;
// one that is far behind but takes a batch now and then stays attached,
// as does one that keeps up. The detached one resumes from the shard with
// every row once it reads again.
func TestStalledDetached(t *testing.T) {
	clock := new(atomic.Int64) // seconds
	timeNow = func() time.Time { return time.Unix(clock.Load(), 0) }
	t.Cleanup(func() { timeNow = time.Now })
	f := newFixture(t, Config{StallAfter: 5 * time.Second})
	asOf := f.upper - 1
	reader := f.subscribe(asOf, false, 0, nil)
	slow := f.subscribe(asOf, false, 0, nil)
	stalled := f.subscribe(asOf, false, 0, nil)
	f.write()
	var want, slowRows, stalledRows []string
	for _, s := range []*Subscriber{reader, slow, stalled} {
		drain(t, f.ctx, s, f.upper) // attached at second 0
	}
	// Batches larger than a take (catchUpBytes): slow takes one at a time.
	big := strings.Repeat("x", catchUpBytes+1)
	write := func(at int64, k int64) {
		t.Helper()
		clock.Store(at)
		f.write(ins(k, big))
		// The reader has taken the batch, so it was published, queued
		// for the others at this second.
		want = append(want, canon(drain(t, f.ctx, reader, f.upper))...)
	}
	for sec := range int64(3) {
		write(sec+1, sec) // queued at seconds 1, 2, 3
	}
	clock.Store(9)
	rows, err := slow.Next(f.ctx, 0) // takes the first batch at second 9
	if err != nil {
		t.Fatal(err)
	}
	slowRows = append(slowRows, canon(rows)...)
	if isDetached(slow) || isDetached(stalled) {
		t.Fatal("detached before a push found them stalled")
	}

	// At second 10 the oldest batch waiting for stalled is 9 s old and it
	// took nothing since second 0; slow's is 8 s old, but it took one at
	// second 9.
	write(10, 3)
	if !isDetached(stalled) {
		t.Fatal("the stalled subscriber is still attached")
	}
	if isDetached(slow) || isDetached(reader) {
		t.Fatalf("detached: slow %v, reader %v; want neither", isDetached(slow), isDetached(reader))
	}
	if got := testutil.ToFloat64(f.m.Metrics().stallDetaches); got != 1 {
		t.Fatalf("stall detaches = %v, want 1", got)
	}

	slowRows = append(slowRows, canon(drain(t, f.ctx, slow, f.upper))...)
	stalledRows = append(stalledRows, canon(drain(t, f.ctx, stalled, f.upper))...)
	if got := testutil.ToFloat64(f.m.Metrics().resumes); got != 1 {
		t.Errorf("resumes = %v, want 1", got)
	}
	for name, got := range map[string][]string{"slow": slowRows, "stalled": stalledRows} {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s received %d rows, want the reader's %d:\n got %.200q\nwant %.200q", name, len(got), len(want), got, want)
		}
	}
}
