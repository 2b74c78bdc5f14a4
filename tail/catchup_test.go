package tail

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
)

// catchUpChunk is the persist listen chunk of the catch-up tests: far
// smaller than what they write, so that a catch-up takes many chunks.
const catchUpChunk = 16 << 10

// stalledFixture is a tail whose window covers almost nothing, with
// readers that keep up and stalled subscribers (a small queue budget)
// detached while rows are written and the shard compacts the batches
// into merged ones. want is the readers' stream.
type stalledFixture struct {
	*fixture
	budget  *membudget.Budget
	stalled []*Subscriber
	got     [][]formatter.Row
	want    []string
}

func newStalledFixture(t *testing.T, cfg Config, stalled int) *stalledFixture {
	t.Helper()
	return newStalledFixtureOn(t, cfg, stalled, blobmem.New())
}

// newStalledFixtureOn is newStalledFixture with its parts in blob.
func newStalledFixtureOn(t *testing.T, cfg Config, stalled int, blob persist.Blob) *stalledFixture {
	t.Helper()
	budget := membudget.New(256 << 10)
	cfg.Budget, cfg.WindowBytes = budget, 1
	f := &stalledFixture{fixture: newFixtureStore(t, cfg, blob, consmem.New(), persist.Config{ListenChunkBytes: catchUpChunk}),
		budget: budget}
	asOf := f.upper - 1
	reader := f.subscribe(asOf, true, 0, nil)
	for range stalled {
		f.stalled = append(f.stalled, f.subscribe(asOf, true, 1<<10, nil))
	}
	f.write(ins(-1, "warm-up"))
	readerRows := drain(t, f.ctx, reader, f.upper)
	for _, s := range f.stalled {
		f.got = append(f.got, drain(t, f.ctx, s, f.upper)) // joined, then stall
	}
	// 384 KiB in 192 writes, compacted as they go: the stalled
	// subscribers resume inside merged batches of many times.
	for i := range 192 {
		f.write(ins(int64(i), fmt.Sprint(i, strings.Repeat("v", 2<<10))))
		readerRows = append(readerRows, drain(t, f.ctx, reader, f.upper)...)
		if i%16 == 15 {
			if _, err := f.p.Maintain(f.ctx, f.shard); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, s := range f.stalled {
		if !isDetached(s) {
			t.Fatalf("stalled subscriber %d was not detached", i)
		}
	}
	f.want = canon(readerRows)
	return f
}

// resume drains the stalled subscribers, each on its own goroutine, and
// checks that each got the readers' stream.
func (f *stalledFixture) resume(t *testing.T, subs ...int) {
	t.Helper()
	var wg sync.WaitGroup
	for _, i := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows, err := drainErr(f.ctx, f.stalled[i], f.upper)
			if err != nil {
				t.Errorf("stalled subscriber %d: %v", i, err)
				return
			}
			f.got[i] = append(f.got[i], rows...)
		}()
	}
	wg.Wait()
	for _, i := range subs {
		if got := canon(f.got[i]); !reflect.DeepEqual(got, f.want) {
			t.Fatalf("stalled subscriber %d got %d rows, want the readers' %d:\n got %v\nwant %v", i, len(got), len(f.want), got, f.want)
		}
	}
}

// catchUpsEnded waits for the tail's catch-ups to end (a catch-up drops
// its last chunk when it sees that every member took it) and checks that
// they hold nothing any more.
func (f *stalledFixture) catchUpsEnded(t *testing.T) {
	t.Helper()
	for _, tl := range f.m.running() {
		for {
			tl.mu.Lock()
			n := len(tl.catchUps)
			tl.mu.Unlock()
			if n == 0 {
				break
			}
			select {
			case <-f.ctx.Done():
				t.Fatalf("%d catch-ups still running after every subscriber caught up", n)
			case <-time.After(time.Millisecond):
			}
		}
	}
	if h := f.budget.Holder(membudget.HolderCatchUp); h.Bytes() != 0 {
		t.Errorf("catch-ups hold %d bytes once ended, want 0", h.Bytes())
	}
}

// drainErr is drain for other goroutines: it returns the error instead of
// failing the test.
func drainErr(ctx context.Context, s *Subscriber, frontier uint64) ([]formatter.Row, error) {
	var out []formatter.Row
	for {
		rows, err := s.Next(ctx, 0)
		if err != nil {
			return out, err
		}
		out = append(out, rows...)
		if last := rows[len(rows)-1]; last.Progressed && last.Time >= frontier {
			return out, nil
		}
	}
}

// TestCatchUpsShared: many detached subscribers resuming at once from a
// shard that compacted their history share one catch-up, read one chunk
// at a time: every subscriber gets every row, and what the catch-ups held
// (charged to tail_catchup) never passes their slots' bound, far below
// what the subscribers read together.
func TestCatchUpsShared(t *testing.T) {
	const stalled, slots = 24, 2
	f := newStalledFixture(t, Config{MaxCatchUps: slots, CatchUpGrace: time.Hour}, stalled)
	// Hold every slot until all have joined: they must share one
	// catch-up, whatever order they arrive in.
	for range slots {
		f.m.catchUpSlots.Acquire(context.Background(), 1)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.resume(t, seq(stalled)...)
	}()
	catchUps := func() float64 { return testutil.ToFloat64(f.m.Metrics().catchUps) }
	for catchUps() < stalled {
		select {
		case <-done:
			t.Fatalf("resumed with every catch-up slot held (%v catch-ups)", catchUps())
		case <-time.After(time.Millisecond):
		}
	}
	for range slots {
		f.m.catchUpSlots.Release(1)
	}
	<-done
	if t.Failed() {
		return
	}
	if got := testutil.ToFloat64(f.m.Metrics().catchUpShares); got != 1 {
		t.Errorf("%v catch-ups started, want 1 shared by the %d subscribers", got, stalled)
	}
	chunks := testutil.ToFloat64(f.m.Metrics().catchUpChunks)
	if chunks < 10 {
		t.Errorf("%v chunks read, want the history read in chunks of %d bytes", chunks, catchUpChunk)
	}
	// One catch-up holds its read (2 chunks) and then a chunk (at most a
	// chunk and one time) with its formatted rows.
	h := f.budget.Holder(membudget.HolderCatchUp)
	if peak, max := h.Peak(), int64(2*catchUpChunk+3*(catchUpChunk+4<<10)); h.Peak() <= 0 || peak > max {
		t.Errorf("catch-ups held %d bytes at their peak, want some and at most %d", peak, max)
	}
	f.catchUpsEnded(t)
}

// TestCatchUpEvictsSlowMember: a member of a catch-up that takes nothing
// of a chunk while others wait is evicted after the grace, so the others
// finish; when it reads again it gets every row in a catch-up of its own.
func TestCatchUpEvictsSlowMember(t *testing.T) {
	const stalled, slots = 4, 1
	f := newStalledFixture(t, Config{MaxCatchUps: slots, CatchUpGrace: 50 * time.Millisecond}, stalled)
	f.m.catchUpSlots.Acquire(context.Background(), 1)
	// The slow one joins the catch-up, waiting for its first chunk, and
	// its session stops calling Next.
	slow, stop := context.WithCancel(f.ctx)
	joined := make(chan error)
	go func() {
		_, err := f.stalled[0].Next(slow, 0)
		joined <- err
	}()
	for testutil.ToFloat64(f.m.Metrics().catchUps) < 1 {
		time.Sleep(time.Millisecond)
	}
	stop()
	if err := <-joined; !errors.Is(err, context.Canceled) {
		t.Fatalf("slow subscriber's Next: %v, want %v", err, context.Canceled)
	}
	f.m.catchUpSlots.Release(1)
	f.resume(t, seq(stalled)[1:]...)
	if got := testutil.ToFloat64(f.m.Metrics().catchUpEvictions); got < 1 {
		t.Errorf("%v evictions, want the slow member evicted", got)
	}
	f.resume(t, 0)
	f.catchUpsEnded(t)
}

// TestCatchUpRetriesThroughOutage: a catch-up whose reads fail while the
// storage is unreachable retries them, as the shared listen does, and its
// members keep waiting: once the storage is back every stalled subscriber
// gets every row, none ends with the outage's error.
func TestCatchUpRetriesThroughOutage(t *testing.T) {
	const stalled, slots = 8, 1
	o := &outage{}
	f := newStalledFixtureOn(t, Config{MaxCatchUps: slots, CatchUpGrace: time.Hour}, stalled, cutBlob{blobmem.New(), o})
	f.m.catchUpSlots.Acquire(context.Background(), 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.resume(t, seq(stalled)...)
	}()
	metric := func(c prometheus.Counter) float64 { return testutil.ToFloat64(c) }
	for metric(f.m.Metrics().catchUps) < 1 {
		time.Sleep(time.Millisecond)
	}
	o.set(true)
	retried := metric(f.m.Metrics().storageRetries)
	f.m.catchUpSlots.Release(1)
	for metric(f.m.Metrics().storageRetries) < retried+2 {
		select {
		case <-done:
			t.Fatal("the stalled subscribers ended while every part read failed")
		case <-f.ctx.Done():
			t.Fatal(f.ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	o.set(false)
	<-done
	f.catchUpsEnded(t)
}

// seq is 0, 1, ..., n-1.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// parked drives a subscriber as pgwire drives a parked session: Ready
// first, Next only when Ready reported true — with a canceled context,
// for it must not wait then — and after false, nothing until wake.
type parked struct {
	s     *Subscriber
	woken chan struct{}
	// parks and wakes count Ready's false and wake's calls: one wake
	// per park, never one without.
	parks, wakes atomic.Int64
	waiting      bool
}

func newParked(s *Subscriber) *parked { return &parked{s: s, woken: make(chan struct{}, 1)} }

func (p *parked) wake() {
	p.wakes.Add(1)
	select {
	case p.woken <- struct{}{}:
	default: // a second wake: the count tells
	}
}

// ready is Ready, remembering a park.
func (p *parked) ready() bool {
	if p.s.Ready(p.wake) {
		return true
	}
	p.parks.Add(1)
	p.waiting = true
	return false
}

// next returns the subscriber's next rows or error, waiting only for a
// wake, as a parked session.
func (p *parked) next(t *testing.T, ctx context.Context) ([]formatter.Row, error) {
	t.Helper()
	now, cancel := context.WithCancel(ctx)
	cancel()
	for {
		if p.waiting {
			select {
			case <-p.woken:
				p.waiting = false
			case <-ctx.Done():
				t.Fatalf("parked after Ready's false, never woken (%d parks, %d wakes)", p.parks.Load(), p.wakes.Load())
			}
		}
		if !p.ready() {
			continue
		}
		rows, err := p.s.Next(now, 0)
		if errors.Is(err, context.Canceled) {
			t.Fatal("Next waited after Ready reported true")
		}
		return rows, err
	}
}

// drain is drain for a parked session.
func (p *parked) drain(t *testing.T, ctx context.Context, frontier uint64) []formatter.Row {
	t.Helper()
	var out []formatter.Row
	for {
		rows, err := p.next(t, ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
		if last := rows[len(rows)-1]; last.Progressed && last.Time >= frontier {
			return out
		}
	}
}

// TestReadyJoinsCatchUp: the subscriber of a parked session, detached
// behind the window, does not leave its catch-up from the shard to Next
// (whose wait would hold one of pgwire's few resumers): Ready joins the
// catch-up and reports false while the catch-up waits for a slot to read
// its chunk, the chunk wakes it, once, and Next then returns the rows
// without waiting; so driven to the end it gets the readers' stream. A
// subscriber closed while its catch-up waits is never woken, and the
// catch-up ends.
func TestReadyJoinsCatchUp(t *testing.T) {
	const stalled, slots = 2, 1
	f := newStalledFixture(t, Config{MaxCatchUps: slots, CatchUpGrace: time.Hour}, stalled)
	f.m.catchUpSlots.Acquire(context.Background(), 1)
	p, closed := newParked(f.stalled[0]), newParked(f.stalled[1])
	for _, q := range []*parked{p, closed} {
		if q.ready() {
			t.Fatal("Ready is true while the catch-up waits for a slot to read: Next would wait for the read")
		}
	}
	if got := testutil.ToFloat64(f.m.Metrics().catchUps); got != stalled {
		t.Fatalf("%v catch-ups joined, want Ready to join one for each of the %d", got, stalled)
	}
	closed.s.Close()
	select {
	case <-p.woken:
		t.Fatal("woken before the catch-up read anything")
	case <-time.After(20 * time.Millisecond):
	}
	f.m.catchUpSlots.Release(1)
	f.got[0] = append(f.got[0], p.drain(t, f.ctx, f.upper)...)
	if got := canon(f.got[0]); !reflect.DeepEqual(got, f.want) {
		t.Fatalf("parked subscriber got %d rows, want the readers' %d:\n got %v\nwant %v", len(got), len(f.want), got, f.want)
	}
	if parks, wakes := p.parks.Load(), p.wakes.Load(); parks < 2 || wakes != parks {
		t.Errorf("%d parks and %d wakes, want a wake per park (and the catch-up's chunks waited for)", parks, wakes)
	}
	f.catchUpsEnded(t)
	if n := closed.wakes.Load(); n != 0 {
		t.Errorf("the subscriber closed in its catch-up was woken %d times, want never", n)
	}
}
