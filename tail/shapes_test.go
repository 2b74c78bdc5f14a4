package tail

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/subscribe"
)

// TestShapeCache: a shape is formatted once however many subscribers ask
// for it at once, and each shape separately.
func TestShapeCache(t *testing.T) {
	var c shapeCache[int]
	var calls sync.Map // shape key -> *int of format calls
	get := func(opts *formatter.Options, v int) int {
		return c.get(outputKey(nil, opts), func() int {
			n, _ := calls.LoadOrStore(opts.ShapeKey(), new(int))
			*n.(*int)++ // under the cache's lock
			return v
		})
	}
	plain, progress := &formatter.Options{}, &formatter.Options{Progress: true}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { get(plain, 1) })
		wg.Go(func() { get(progress, 2) })
	}
	wg.Wait()
	if got, want := get(plain, 99), 1; got != want {
		t.Errorf("plain shape: got %d, want %d (the first value)", got, want)
	}
	if got, want := get(&formatter.Options{Progress: true}, 99), 2; got != want {
		t.Errorf("progress shape (equal options, another value): got %d, want %d", got, want)
	}
	for _, opts := range []*formatter.Options{plain, progress} {
		got := 0
		if n, ok := calls.Load(opts.ShapeKey()); ok {
			got = *n.(*int)
		}
		if got != 1 {
			t.Errorf("shape %q formatted %d times, want 1", opts.ShapeKey(), got)
		}
	}
}

// TestShapeCacheLookupWhileComputing: a value computed is found without
// waiting for the cache's lock, which a subscriber computing another
// shape holds: every subscriber of a batch looks its rows up as the batch
// is fanned out, and must not queue behind the others (see shapeCache). A
// lookup that waited would deadlock here: compute waits for it.
func TestShapeCacheLookupWhileComputing(t *testing.T) {
	var c shapeCache[int]
	c.get("a", func() int { return 1 })
	computing, release := make(chan struct{}), make(chan struct{})
	done := make(chan int)
	go func() {
		done <- c.get("b", func() int {
			close(computing)
			<-release
			return 2
		})
	}()
	<-computing
	if got := c.get("a", func() int { t.Error("a computed again"); return -1 }); got != 1 {
		t.Errorf("a while b computes: got %d, want 1", got)
	}
	close(release)
	if got := <-done; got != 2 {
		t.Errorf("b: got %d, want 2", got)
	}
	if got := c.get("b", func() int { t.Error("b computed again"); return -1 }); got != 2 {
		t.Errorf("b after: got %d, want 2", got)
	}
}

// BenchmarkShapeCacheGet is the lookup every subscriber of a batch makes
// as the batch is fanned out: of the first key (a table's plain COPY
// subscribers all have one output), and of a later one.
func BenchmarkShapeCacheGet(b *testing.B) {
	var c shapeCache[int]
	first, later := outputKey(nil, &formatter.Options{}), outputKey(nil, &formatter.Options{Progress: true})
	c.get(first, func() int { return 1 })
	c.get(later, func() int { return 2 })
	for _, key := range []string{first, later} {
		b.Run(map[string]string{first: "first", later: "later"}[key], func(b *testing.B) {
			// Another string of the same key, as each subscriber has its own.
			key := string([]byte(key))
			for b.Loop() {
				c.get(key, func() int { b.Fatal("computed again"); return 0 })
			}
		})
	}
}

// keepForever is a Config.WindowAge that keeps the fixture's batches
// (their times are small numbers, not milliseconds since 1970).
const keepForever = 200 * 365 * 24 * time.Hour

// keyFilter is the MFP of WHERE k = key (k the fixture's first column).
type keyFilter int64

func (k keyFilter) Apply(r row.Row) (row.Row, bool, error) { return r, r[0] == int64(k), nil }

// keyShape is the shape of WHERE k = key, indexed on k unless plain.
func keyShape(key int64, indexed bool) *subscribe.Shape {
	sh := &subscribe.Shape{Key: fmt.Sprintf("k = %d", key), MFP: keyFilter(key)}
	if indexed {
		sh.Index = &subscribe.Index{Col: 0, Values: []row.Datum{key}}
	}
	return sh
}

// subscribeShape subscribes to the fixture's shard through sh, without
// PROGRESS, with budget bytes of queue (0: unbounded).
func (f *fixture) subscribeShape(asOf uint64, sh *subscribe.Shape, budget int64) *Subscriber {
	f.t.Helper()
	s, err := f.m.Subscribe(f.ctx, subscribe.Request{Shard: f.shard, AsOf: asOf, Snapshot: true, Shape: sh,
		Output: &formatter.Options{Relation: schema}, MaxBufferedBytes: budget})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(s.Close)
	return s
}

// take reads n data rows from s.
func take(t *testing.T, ctx context.Context, s source, n int) []formatter.Row {
	t.Helper()
	var out []formatter.Row
	for len(out) < n {
		rows, err := s.Next(ctx, n-len(out))
		if err != nil {
			t.Fatalf("after %d of %d rows: %v", len(out), n, err)
		}
		out = append(out, rows...)
	}
	return out
}

// TestShapesRoutedByIndex: subscribers of shapes that differ in the
// constant of an indexed equality each get exactly their rows, and the
// shared tail evaluates each shape once for all its subscribers, on the
// rows the index routes to it only (with the index off, every shape sees
// every row).
func TestShapesRoutedByIndex(t *testing.T) {
	for _, indexed := range []bool{true, false} {
		t.Run(fmt.Sprintf("indexed=%v", indexed), func(t *testing.T) {
			// The fixture's times are small numbers, far older than any
			// WindowAge: keep them all, so that every subscriber joins
			// from the shared window (a private catch-up evaluates its
			// shape for itself).
			f := newFixture(t, Config{WindowAge: keepForever})
			at := f.write(ins(1, "a"), ins(2, "b"), ins(3, "c"))
			var subs [2][]*Subscriber
			for key := range 2 {
				for range 3 {
					subs[key] = append(subs[key], f.subscribeShape(at, keyShape(int64(key+1), indexed), 0))
				}
			}
			f.write(ins(1, "a2"))
			f.write(ins(3, "c2"))
			f.write(ins(3, "c3"))
			f.write(ins(2, "b2"))
			for key, want := range [2][]string{{"1 [1 1 a]", "2 [1 1 a2]"}, {"1 [1 2 b]", "5 [1 2 b2]"}} {
				for i, s := range subs[key] {
					if got := canon(take(t, f.ctx, s, 2)); !reflect.DeepEqual(got, want) {
						t.Errorf("k = %d, subscriber %d: got %q, want %q", key+1, i, got, want)
					}
				}
			}
			// Through the index, each shape evaluates its 2 rows (the
			// snapshot's and one batch's), however many subscribe to it.
			// Without, each shape evaluates the snapshot's 3 rows and the
			// batches' rows up to its subscribers' last row: 4 for k = 1,
			// 7 for k = 2, and at most 14 (once per shape, not per
			// subscriber: that would be 6 times as many).
			evaluated := testutil.ToFloat64(f.m.metrics.rowsEvaluated)
			routed := testutil.ToFloat64(f.m.metrics.rowsRouted)
			ok := evaluated == 4 && routed == 4
			if !indexed {
				ok = evaluated >= 11 && evaluated <= 14 && routed == 0
			}
			if !ok {
				t.Errorf("rows evaluated %v, routed %v", evaluated, routed)
			}
			if got := testutil.ToFloat64(f.m.metrics.catchUps); got != 0 {
				t.Errorf("private catch-ups: %v, want 0", got)
			}
			if got := testutil.ToFloat64(f.m.metrics.shapes.WithLabelValues(f.shard)); got != 2 {
				t.Errorf("shapes of the collection: %v, want 2", got)
			}
		})
	}
}

// TestShapeRoutedResume: a routed subscriber detached over its budget
// resumes after the batches it skipped, from the window or privately from
// the shard, with no row lost or repeated.
func TestShapeRoutedResume(t *testing.T) {
	for _, window := range []int64{0, 1} {
		t.Run(fmt.Sprintf("window=%d", window), func(t *testing.T) {
			// window 0: the window keeps every batch, resumes take them
			// from it; 1: only the newest, resumes catch up privately.
			cfg := Config{WindowAge: keepForever}
			if window == 1 {
				cfg = Config{WindowBytes: 1}
			}
			f := newFixture(t, cfg)
			at := f.write(ins(1, "a"))
			s := f.subscribeShape(at, keyShape(1, true), 1) // every batch is over budget
			if got, want := canon(take(t, f.ctx, s, 1)), []string{"1 [1 1 a]"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("snapshot: got %q, want %q", got, want)
			}
			var want []string
			for i := range 6 {
				key := int64(2 + i%2)
				if i%3 == 0 {
					key = 1
				}
				ts := f.write(ins(key, fmt.Sprint(i)))
				if key == 1 {
					want = append(want, fmt.Sprintf("%d [1 1 %d]", ts, i))
				}
			}
			if got := canon(take(t, f.ctx, s, len(want))); !reflect.DeepEqual(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
			f.write(ins(1, "last"))
			if got := canon(take(t, f.ctx, s, 1)); len(got) != 1 || got[0] != fmt.Sprintf("%d [1 1 last]", f.upper-1) {
				t.Errorf("after resuming: got %q, want the last row only", got)
			}
		})
	}
}

// TestShapeRoutedResumeAfterSkips: a routed subscriber that skipped
// batches holding nothing for it, while the shard compacted past the
// frontier of the last batch it was handed, resumes after the skipped
// batches instead of failing with history loss.
func TestShapeRoutedResumeAfterSkips(t *testing.T) {
	// Only the newest batch stays in the window; the tail's readers
	// downgrade at every batch.
	f := newFixture(t, Config{WindowBytes: 1, DowngradeInterval: time.Nanosecond})
	at := f.write(ins(1, "a"))
	s := f.subscribeShape(at, keyShape(1, true), 1) // a push of any batch detaches it
	want := []string{fmt.Sprintf("%d [1 1 a]", at)}
	if got := canon(take(t, f.ctx, s, 1)); !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot: got %q, want %q", got, want)
	}
	ts := f.write(ins(1, "b"))
	if got, want := canon(take(t, f.ctx, s, 1)), []string{fmt.Sprintf("%d [1 1 b]", ts)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("joining: got %q, want %q", got, want)
	}
	// Batches for another key: skipped. The shard's since passes them.
	var last uint64
	for i := range 5 {
		last = f.write(ins(2, fmt.Sprint(i)))
	}
	if err := f.policy.Downgrade(f.ctx, last); err != nil {
		t.Fatal(err)
	}
	f.write(ins(2, "again")) // the tail's readers downgrade past last
	if err := waitUntil(10*time.Second, func() bool {
		st, err := f.p.State(f.ctx, f.shard)
		return err == nil && st.Since >= last
	}); err != nil {
		t.Fatalf("since did not pass %d: %v", last, err)
	}
	ts = f.write(ins(1, "c")) // pushed over budget: detached
	if got, want := canon(take(t, f.ctx, s, 1)), []string{fmt.Sprintf("%d [1 1 c]", ts)}; !reflect.DeepEqual(got, want) {
		t.Errorf("after the skipped batches: got %q, want %q", got, want)
	}
}

// waitUntil polls cond until it holds or d passes.
func waitUntil(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// TestShapeRoutedProgress: a subscriber with PROGRESS of an indexed shape
// is routed: batches for other values reach it only in a sweep, at most
// once per ProgressInterval, whose progress row covers the batches it
// skipped; its own rows arrive at once with their progress.
func TestShapeRoutedProgress(t *testing.T) {
	f, clock, at := routedFixture(t)
	s := routedSubscriber(t, f, at, 1)
	check := func(what string, frontier uint64, want ...string) {
		t.Helper()
		if got := canon(drain(t, f.ctx, s, frontier)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %q, want %q", what, got, want)
		}
	}
	p := func(ts uint64) string { return fmt.Sprintf("%d progress", ts) }
	check("snapshot", at+1, p(at), fmt.Sprintf("%d [1 1 a]", at), p(at+1))
	// The first batch after the snapshot: from the window at its join,
	// or in a sweep, due now (the listen's first batch may have taken
	// one while the subscriber read its snapshot).
	advance(clock, s)
	other := f.write(ins(2, "x"))
	check("first batch", other+1, p(other+1))
	// The clock stands still: no sweep is due, and batches for other
	// keys are skipped, progress rows and all.
	f.write(ins(2, "y"))
	f.write(ins(3, "z"))
	mine := f.write(ins(1, "b"))
	check("routed", mine+1, fmt.Sprintf("%d [1 1 b]", mine), p(mine+1))
	// A sweep is due: the next batch for another key reports progress.
	advance(clock, s)
	other = f.write(ins(2, "w"))
	check("swept", other+1, p(other+1))
	if got := testutil.ToFloat64(f.m.metrics.pushesSkipped); got < 2 {
		t.Errorf("pushes skipped: %v, want at least 2", got)
	}
}

// TestShapeSweptProgressShared: routed subscribers of different shapes
// that a sweep hands a batch with nothing for them take the batch's one
// progress row, shared (encoded once for all of them), not a row each.
func TestShapeSweptProgressShared(t *testing.T) {
	f, clock, at := routedFixture(t)
	var subs []*Subscriber
	for key := range int64(2) {
		subs = append(subs, routedSubscriber(t, f, at, key+1))
	}
	// A row for each: both have joined the live stream once they read it.
	mine := f.write(ins(1, "b"), ins(2, "c"))
	for _, s := range subs {
		drain(t, f.ctx, s, mine+1)
	}
	advance(clock, subs[0]) // a sweep is due
	other := f.write(ins(3, "x"))
	var progress []*formatter.Row
	for i, s := range subs {
		var last []formatter.Row
		for len(last) == 0 || !last[len(last)-1].Progressed || last[len(last)-1].Time < other+1 {
			rows, err := s.Next(f.ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			last = rows
		}
		if got := canon(last); !reflect.DeepEqual(got, []string{fmt.Sprintf("%d progress", other+1)}) {
			t.Fatalf("subscriber %d: got %q, want the progress row alone", i, got)
		}
		progress = append(progress, &last[0])
	}
	if progress[0] != progress[1] {
		t.Errorf("the subscribers' progress rows are %p and %p, want one shared row", progress[0], progress[1])
	}
}

// TestShapeSweepUnattached: a batch routed to a subscriber still at its
// snapshot, while a sweep is due, is counted once among its pushes (it
// was counted again, and the skipped-pushes counter decreased: a panic).
func TestShapeSweepUnattached(t *testing.T) {
	f, clock, at := routedFixture(t)
	s := routedSubscriber(t, f, at, 1)
	advance(clock, s) // a sweep is due, and the subscriber has not read yet
	mine := f.write(ins(1, "b"))
	// Published before the subscriber attaches: its push queues nothing.
	published := func() bool {
		s.t.mu.Lock()
		defer s.t.mu.Unlock()
		return s.t.frontier > mine
	}
	if err := waitUntil(time.Minute, published); err != nil {
		t.Fatalf("the write was not published: %v", err)
	}
	want := []string{fmt.Sprintf("%d progress", at), fmt.Sprintf("%d [1 1 a]", at), fmt.Sprintf("%d progress", at+1),
		fmt.Sprintf("%d [1 1 b]", mine), fmt.Sprintf("%d progress", mine+1)}
	if got := canon(drain(t, f.ctx, s, mine+1)); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestSweeperSpreads: the sweeper takes each subscriber once per interval,
// spread over the calls in between (a share of them per share of the
// interval), all of them after an interval or more, and none twice in a
// round while subscribers come and go.
func TestSweeperSpreads(t *testing.T) {
	var w sweeper
	subs := make([]*Subscriber, 10)
	for i := range subs {
		subs[i] = &Subscriber{}
		w.add(subs[i])
	}
	start := time.Unix(1000, 0)
	count := func(got []*Subscriber) map[*Subscriber]int {
		n := map[*Subscriber]int{}
		for _, s := range got {
			n[s]++
		}
		return n
	}
	if got := len(w.due(start, time.Second)); got != 10 {
		t.Fatalf("first call: %d due, want all 10", got)
	}
	// A round in steps of 50 ms: half a subscriber's share each.
	seen := map[*Subscriber]int{}
	for i := 1; i <= 20; i++ {
		got := w.due(start.Add(time.Duration(i)*50*time.Millisecond), time.Second)
		if len(got) > 1 {
			t.Errorf("step %d: %d due, want at most 1", i, len(got))
		}
		for s, n := range count(got) {
			seen[s] += n
		}
	}
	for i, s := range subs {
		if seen[s] != 1 {
			t.Errorf("subscriber %d taken %d times in the round, want once", i, seen[s])
		}
	}
	// Removing subscribers keeps the others in turn.
	w.remove(subs[3])
	w.remove(subs[9])
	w.remove(subs[9]) // not there any more: nothing
	got := count(w.due(start.Add(2*time.Second), time.Second))
	if len(got) != 8 || got[subs[3]] != 0 || got[subs[9]] != 0 {
		t.Errorf("after two removals, a whole interval: got %d distinct, want the 8 left", len(got))
	}
	if got := w.due(start.Add(2*time.Second), time.Second); got != nil {
		t.Errorf("no time passed: %d due, want none", len(got))
	}
}

// routedFixture is a fixture whose progress sweep runs on a fake clock
// (seconds, which moves only when told), with one row written at at.
func routedFixture(t *testing.T) (f *fixture, clock *atomic.Int64, at uint64) {
	t.Helper()
	clock = new(atomic.Int64)
	clock.Store(1000)
	timeNow = func() time.Time { return time.Unix(clock.Load(), 0) }
	t.Cleanup(func() { timeNow = time.Now })
	f = newFixture(t, Config{WindowAge: keepForever, ProgressInterval: time.Second})
	return f, clock, f.write(ins(1, "a"))
}

// advance moves routedFixture's clock on by a second between two
// publishes of s's tail. A publish pushes its batch, waking the
// subscriber, before its sweep reads the clock (both under the tail's
// lock): a test that read a batch's rows and then moved the clock bare
// could have that batch's sweep see the new time, spend the due sweep on
// it (a subscriber it was routed to is skipped, having the batch and its
// progress) and leave none for the test's next batch, whose progress
// would come only when the clock moved again (about 2 % of -race runs).
// Under the lock, a publish whose batch the test took has finished.
func advance(clock *atomic.Int64, s *Subscriber) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	clock.Add(1)
}

// routedSubscriber subscribes with PROGRESS to the indexed shape of key
// (routed), from at with its snapshot; closed when the test ends.
func routedSubscriber(t *testing.T, f *fixture, at uint64, key int64) *Subscriber {
	t.Helper()
	s, err := f.m.Subscribe(f.ctx, subscribe.Request{Shard: f.shard, AsOf: at, Snapshot: true, Shape: keyShape(key, true),
		Output: &formatter.Options{Relation: schema, Progress: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
