package tail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardtail/shardtail/dataflow"
	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/subscribe"
)

var schema = row.Schema{Columns: []row.Column{{Name: "k", Type: row.TypeInt8}, {Name: "v", Type: row.TypeText, Nullable: true}}}

// fixture is a shard with a writer and a tail manager.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	p      *persist.Client
	shard  string
	w      *persist.Writer
	upper  uint64
	m      *Manager
	policy *persist.Reader
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	return newFixtureOn(t, cfg, consmem.New())
}

// newFixtureOn is newFixture on the given consensus.
func newFixtureOn(t *testing.T, cfg Config, cons persist.Consensus) *fixture {
	t.Helper()
	return newFixtureStore(t, cfg, blobmem.New(), cons, persist.Config{})
}

// newFixtureStore is newFixture on the given storage and persist
// configuration (the fixture's poll interval, compaction and heartbeat
// settings apply).
func newFixtureStore(t *testing.T, cfg Config, blob persist.Blob, cons persist.Consensus, pcfg persist.Config) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	pcfg.PollInterval, pcfg.CompactionMinInputs, pcfg.ReaderHeartbeat = 20*time.Millisecond, -1, -1
	if cfg.DetachStalledAfter == 0 {
		// A test's subscriber may leave its queue alone for as long as
		// a loaded machine makes it: only TestStalledDetached stalls.
		cfg.DetachStalledAfter = -1
	}
	p, err := persist.NewClient(blob, cons, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, p: p, shard: persist.NewShardID()}
	if _, err := p.CreateShard(ctx, f.shard, schema); err != nil {
		t.Fatal(err)
	}
	if f.w, err = p.OpenWriter(ctx, f.shard); err != nil {
		t.Fatal(err)
	}
	if f.policy, err = p.OpenReader(ctx, f.shard, persist.ReaderOptions{Critical: true}); err != nil {
		t.Fatal(err)
	}
	f.m = NewManager(p, cfg)
	t.Cleanup(func() { f.m.Close(); f.policy.Close(); p.Close() })
	f.write() // upper 1: something to subscribe to
	return f
}

// write appends updates at the next time (or just advances the upper).
func (f *fixture) write(ups ...row.Update) uint64 {
	f.t.Helper()
	t := f.upper
	for i := range ups {
		ups[i].T = t
	}
	if err := f.w.CompareAndAppend(f.ctx, ups, f.upper, f.upper+1); err != nil {
		f.t.Fatal(err)
	}
	f.upper++
	return t
}

func ins(k int64, v string) row.Update { return row.Update{Row: row.Row{k, v}, Diff: 1} }
func del(k int64, v string) row.Update { return row.Update{Row: row.Row{k, v}, Diff: -1} }

func (f *fixture) subscribe(asOf uint64, snapshot bool, budget int64, upTo *uint64) *Subscriber {
	f.t.Helper()
	s, err := f.m.Subscribe(f.ctx, subscribe.Request{Shard: f.shard, AsOf: asOf, UpTo: upTo, Snapshot: snapshot,
		Output: &formatter.Options{Relation: schema, Progress: true}, MaxBufferedBytes: budget})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(s.Close)
	return s
}

// source is what tests drain: a tail subscriber or a dataflow subscribe.
type source interface {
	Next(ctx context.Context, max int) ([]formatter.Row, error)
}

// drain reads rows until the delivered progress reaches frontier.
func drain(t *testing.T, ctx context.Context, s source, frontier uint64) []formatter.Row {
	t.Helper()
	var out []formatter.Row
	for {
		rows, err := s.Next(ctx, 0)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
		if last := rows[len(rows)-1]; last.Progressed && last.Time >= frontier {
			return out
		}
	}
}

// canon renders rows with data rows sorted within each timestamp.
func canon(rows []formatter.Row) []string {
	var out, group []string
	flush := func() {
		sort.Strings(group)
		out = append(out, group...)
		group = nil
	}
	for i, r := range rows {
		if i > 0 && (r.Progressed || rows[i-1].Progressed || rows[i-1].Time != r.Time) {
			flush()
		}
		if r.Progressed {
			out = append(out, fmt.Sprintf("%d progress", r.Time))
			continue
		}
		group = append(group, fmt.Sprintf("%d %v", r.Time, r.Columns()))
	}
	flush()
	return out
}

// TestMatchesDataflowPath: for the same writes, a fast-path subscriber's
// output equals the dataflow path's, row for row.
func TestMatchesDataflowPath(t *testing.T) {
	f := newFixture(t, Config{})
	f.write(ins(1, "a"), ins(2, "b"))
	asOf := f.upper - 1
	fast := f.subscribe(asOf, true, 0, nil)
	df := dataflow.StartSubscribe(dataflow.SubscribeConfig{Persist: f.p, Request: subscribe.Request{Shard: f.shard, Output: &formatter.Options{Relation: schema, Progress: true},
		AsOf: asOf, Snapshot: true}})
	defer df.Close()
	for i := range 20 {
		switch i % 3 {
		case 0:
			f.write(ins(int64(10+i), "x"))
		case 1:
			f.write(del(1, "a"), ins(1, fmt.Sprint("a", i)))
		default:
			f.write()
		}
	}
	got, want := canon(drain(t, f.ctx, fast, f.upper)), canon(drain(t, f.ctx, df, f.upper))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fast path:\n%v\ndataflow path:\n%v", got, want)
	}
}

// TestOneListenAndSnapshotReader: many subscribers share two readers, and
// each listen batch is decoded once.
func TestOneListenAndSnapshotReader(t *testing.T) {
	f := newFixture(t, Config{})
	f.write(ins(1, "a"))
	var subs []*Subscriber
	for range 500 {
		subs = append(subs, f.subscribe(f.upper-1, true, 0, nil))
	}
	for _, s := range subs {
		drain(t, f.ctx, s, f.upper)
	}
	st, err := f.p.State(f.ctx, f.shard)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(st.Readers) - 1; n > 2 { // minus the fixture's policy reader
		t.Fatalf("%d readers registered for 500 subscribers, want at most 2", n)
	}
	before := testutil.ToFloat64(f.m.Metrics().decodedBatches)
	for range 5 {
		f.write(ins(7, "z"))
	}
	for _, s := range subs {
		drain(t, f.ctx, s, f.upper)
	}
	if got := testutil.ToFloat64(f.m.Metrics().decodedBatches) - before; got > 5 {
		t.Fatalf("decoded %v batches for 5 writes and 500 subscribers, want each once", got)
	}
}

// TestStormSharesOneCursor: subscribers arriving at once at one AS OF share
// one snapshot cursor, also while it is still opening.
func TestStormSharesOneCursor(t *testing.T) {
	f := newFixture(t, Config{})
	for i := range 50 {
		f.write(ins(int64(i), "a"))
	}
	asOf := f.upper - 1
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := f.m.Subscribe(f.ctx, subscribe.Request{Shard: f.shard, AsOf: asOf, Snapshot: true,
				Output: &formatter.Options{Relation: schema, Progress: true}})
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			if rows := drain(t, f.ctx, s, asOf+1); len(rows) != 52 { // progress, 50 rows, progress
				t.Errorf("%d rows, want 52", len(rows))
			}
		}()
	}
	wg.Wait()
	if n := testutil.ToFloat64(f.m.Metrics().shares); n != 1 {
		t.Fatalf("%v snapshot cursors for 200 subscribers at one AS OF, want 1", n)
	}
}

// TestSnapshotPiecesOnDemand: the first rows of a large snapshot arrive
// after one piece is read, not the whole snapshot.
func TestSnapshotPiecesOnDemand(t *testing.T) {
	f := newFixture(t, Config{})
	var ups []row.Update
	for i := range 50_000 {
		ups = append(ups, ins(int64(i), "v"))
	}
	f.write(ups...)
	s := f.subscribe(f.upper-1, true, 0, nil)
	before := testutil.ToFloat64(f.m.Metrics().snapshotPieces)
	// The progress row at AS OF, then the first piece's rows.
	var rows []formatter.Row
	for len(rows) < 11 {
		got, err := s.Next(f.ctx, 11-len(rows))
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, got...)
	}
	// No piece is read ahead after the first (see share.next).
	if read := testutil.ToFloat64(f.m.Metrics().snapshotPieces) - before; read != 1 {
		t.Fatalf("read %v snapshot pieces to return 10 rows, want 1 of %d", read, 50_000/persist.DefaultSnapshotChunkRows+1)
	}
	// A second subscriber at the same AS OF shares the cursor: it reads no
	// piece the first already read.
	s2 := f.subscribe(f.upper-1, true, 0, nil)
	if _, err := s2.Next(f.ctx, 10); err != nil {
		t.Fatal(err)
	}
	if read := testutil.ToFloat64(f.m.Metrics().snapshotPieces) - before; read != 1 {
		t.Fatalf("a second subscriber read its own pieces: %v", read)
	}
}

// TestSnapshotReadsAhead: once a subscriber takes the newest piece of its
// share (other than the first), the next piece is read in the background,
// while the subscriber works on the one it took, and only that one: the
// read-ahead is one piece ahead of the fastest subscriber.
func TestSnapshotReadsAhead(t *testing.T) {
	f := newFixture(t, Config{})
	var ups []row.Update
	for i := range 4 * persist.DefaultSnapshotChunkRows {
		ups = append(ups, ins(int64(i), "v"))
	}
	f.write(ups...)
	s := f.subscribe(f.upper-1, true, 0, nil)
	before := testutil.ToFloat64(f.m.Metrics().snapshotPieces)
	takeRows(t, f, s, 2) // the progress row and the first piece's first row
	sh := s.sh
	sh.mu.Lock()
	pieces, reading, first := sh.base+len(sh.pieces), sh.reading, sh.pieces[0].chunk.Len()
	sh.mu.Unlock()
	if pieces != 1 || reading {
		t.Fatalf("%d pieces read (reading %v) with the first taken, want 1: nothing is read ahead after the first", pieces, reading)
	}
	taken := 1 + first + 1 // and the second piece's first row
	takeRows(t, f, s, taken-2)
	deadline := time.Now().Add(20 * time.Second)
	for {
		sh.mu.Lock()
		pieces, reading := sh.base+len(sh.pieces), sh.reading
		sh.mu.Unlock()
		if pieces == 3 && !reading {
			break
		}
		if pieces > 3 {
			t.Fatalf("%d pieces read with two taken, want 3 (one read ahead)", pieces)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pieces read with two taken and reading %v: the next piece was not read ahead", pieces, reading)
		}
		time.Sleep(time.Millisecond)
	}
	if read := testutil.ToFloat64(f.m.Metrics().snapshotPieces) - before; read != 3 {
		t.Fatalf("pieces counted %v, want 3", read)
	}
	// The rest of the snapshot arrives whole and in order.
	rows := drain(t, f.ctx, s, f.upper)
	if got, want := len(rows), 4*persist.DefaultSnapshotChunkRows-(taken-1)+1; got != want {
		t.Fatalf("got %d more rows, want %d (the snapshot's rest and the progress row)", got, want)
	}
}

// TestSnapshotPollWaitsForReadAhead: a session polling with a done
// context (the adapter's pollReady, after a FETCH's rows) gets the piece
// being read ahead, as it would get a piece it read itself, rather than
// nothing: otherwise the end of a snapshot never reaches that poll and the
// subscriber joins the live stream only at the next FETCH (the statement
// log's detach cases on the fast path failed that way). The blob holds
// every part the first piece did not need, so the read-ahead of the second
// is in flight, deterministically, when the session polls.
func TestSnapshotPollWaitsForReadAhead(t *testing.T) {
	f, s, blob, got, n := readAheadHeld(t)
	deadline := time.Now().Add(20 * time.Second)
	waits := testutil.ToFloat64(f.m.Metrics().snapshotAheadWaits)
	type result struct {
		rows []formatter.Row
		err  error
	}
	polled := make(chan result, 1)
	go func() {
		done, cancel := context.WithCancel(context.Background())
		cancel()
		rows, err := s.Next(done, 0)
		polled <- result{rows, err}
	}()
	// Let the read-ahead finish once the poll waits for it (or returned).
	for testutil.ToFloat64(f.m.Metrics().snapshotAheadWaits) == waits && len(polled) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the poll neither returned nor waited for the read-ahead")
		}
		time.Sleep(time.Millisecond)
	}
	close(blob.open)
	res := <-polled
	if res.err != nil || len(res.rows) == 0 {
		t.Fatalf("poll with a done context while the next piece was read ahead: got %d rows, error %v; want the piece's rows", len(res.rows), res.err)
	}
	got = append(got, res.rows...)
	got = append(got, drain(t, f.ctx, s, f.upper-1)...)
	data := 0
	for _, r := range got {
		if !r.Progressed {
			data++
		}
	}
	if data != n {
		t.Fatalf("got %d snapshot rows, want %d", data, n)
	}
}

// TestSnapshotReadAheadOutlivesSubscriber: when the last subscriber of a
// share leaves while a piece is read ahead, the read-ahead's end closes
// the cursor and releases the share, as the subscriber's leave would
// have: no cursor (and its seqno lease) stays open for nobody.
func TestSnapshotReadAheadOutlivesSubscriber(t *testing.T) {
	_, s, blob, _, _ := readAheadHeld(t)
	sh := s.sh
	s.Close()
	sh.mu.Lock()
	open, reading := sh.cur != nil, sh.reading
	sh.mu.Unlock()
	if !open || !reading {
		t.Fatalf("after the subscriber left during the read-ahead: cursor open %v, reading %v; want both", open, reading)
	}
	close(blob.open)
	deadline := time.Now().Add(20 * time.Second)
	for {
		sh.mu.Lock()
		open, released := sh.cur != nil, sh.released
		sh.mu.Unlock()
		if !open && released {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the read-ahead ended: cursor open %v, share released %v; want closed and released", open, released)
		}
		time.Sleep(time.Millisecond)
	}
}

// readAheadHeld subscribes to a 2000-row snapshot of small parts on a
// gatedBlob, takes its first two pieces (and the progress row: got) and
// returns once the read-ahead of the third waits for a part the blob
// holds back until blob.open is closed. n is the snapshot's rows.
func readAheadHeld(t *testing.T) (f *fixture, s *Subscriber, blob *gatedBlob, got []formatter.Row, n int) {
	t.Helper()
	blob = &gatedBlob{Blob: blobmem.New(), open: make(chan struct{})}
	f = newFixtureStore(t, Config{}, blob, consmem.New(), persist.Config{PartTargetBytes: 1024})
	var ups []row.Update
	for i := range 2000 {
		ups = append(ups, ins(int64(i), "v"))
	}
	asOf := f.write(ups...)
	f.write()
	// The parts the snapshot's first two pieces read (nothing is read
	// ahead before the second is taken), found by reading them through
	// persist directly (same AS OF, same merge): only those pass.
	r, err := f.p.OpenReader(f.ctx, f.shard, persist.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := r.Snapshot(f.ctx, asOf)
	if err != nil {
		t.Fatal(err)
	}
	blob.record(true)
	taken := 1 // the progress row
	for range 2 {
		chunk, err := cur.Next(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		taken += len(chunk)
	}
	blob.record(false)
	cur.Close()
	r.Close()

	s = f.subscribe(asOf, true, 0, nil)
	got = takeRows(t, f, s, taken)
	deadline := time.Now().Add(20 * time.Second)
	for blob.held.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the third piece was not read ahead (no part read after the second piece)")
		}
		time.Sleep(time.Millisecond)
	}
	return f, s, blob, got, len(ups)
}

// gatedBlob is a blob whose Gets wait, until open is closed, unless they
// read a key recorded as allowed. It hides the inner blob's Lend, so that
// every part read is a Get.
type gatedBlob struct {
	persist.Blob
	open chan struct{}
	held atomic.Int64 // Gets that waited for open

	mu        sync.Mutex
	recording bool                // mu: Gets add their keys to allowed
	allowed   map[string]struct{} // mu
}

// record starts or stops adding the keys read to the allowed ones.
func (g *gatedBlob) record(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.recording = on
}

func (g *gatedBlob) Get(ctx context.Context, key string) ([]byte, error) {
	g.mu.Lock()
	_, ok := g.allowed[key]
	if g.recording {
		if g.allowed == nil {
			g.allowed = make(map[string]struct{})
		}
		g.allowed[key], ok = struct{}{}, true
	}
	g.mu.Unlock()
	if !ok {
		select {
		case <-g.open:
		default:
			g.held.Add(1)
			select {
			case <-g.open:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return g.Blob.Get(ctx, key)
}

// TestDetachResume: a subscriber that stops reading is detached when its
// queue passes the budget, and resumes — from the window or privately from
// the shard — with exactly the stream an unstalled subscriber saw.
func TestDetachResume(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window int64
	}{{"FromWindow", 64 << 20}, {"FromShard", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{WindowBytes: tc.window})
			asOf := f.upper - 1
			steady := f.subscribe(asOf, true, 0, nil)
			stalled := f.subscribe(asOf, true, 600, nil)
			// Both take the snapshot and join the live stream, then the
			// stalled one stops reading.
			f.write(ins(100, "warm-up"))
			steadyRows := drain(t, f.ctx, steady, f.upper)
			stalledRows := drain(t, f.ctx, stalled, f.upper)
			for i := range 30 {
				f.write(ins(int64(i), fmt.Sprint("value-", i)))
				steadyRows = append(steadyRows, drain(t, f.ctx, steady, f.upper)...)
			}
			if testutil.ToFloat64(f.m.Metrics().detaches) == 0 {
				t.Fatal("the stalled subscriber was never detached")
			}
			stalledRows = append(stalledRows, drain(t, f.ctx, stalled, f.upper)...)
			if testutil.ToFloat64(f.m.Metrics().resumes) == 0 {
				t.Fatal("the stalled subscriber never resumed")
			}
			if got, want := canon(stalledRows), canon(steadyRows); !reflect.DeepEqual(got, want) {
				t.Fatalf("stalled stream differs:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestHistoryLoss: a detached subscriber whose position the shard no
// longer retains fails with the 53200 error; parked (Ready, then Next only
// when it reports true), its catch-up wakes it to take the error.
func TestHistoryLoss(t *testing.T) {
	for _, parks := range []bool{false, true} {
		t.Run(map[bool]string{false: "Next", true: "Parked"}[parks], func(t *testing.T) { testHistoryLoss(t, parks) })
	}
}

func testHistoryLoss(t *testing.T, parks bool) {
	f := newFixture(t, Config{WindowBytes: 1})
	asOf := f.upper - 1
	s := f.subscribe(asOf, false, 100, nil)
	f.write()
	drain(t, f.ctx, s, f.upper) // joined the live stream
	for i := range 10 {
		f.write(ins(int64(i), "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"))
	}
	// Wait until the tail has published everything, then let the shard
	// compact past the subscriber's delivered frontier.
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(f.m.Metrics().detaches) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := f.policy.Downgrade(f.ctx, f.upper-1); err != nil {
		t.Fatal(err)
	}
	// The tail's readers follow its frontier (rate-limited): wait until the
	// shard's since has passed what the subscriber delivered.
	for {
		f.write()
		st, err := f.p.State(f.ctx, f.shard)
		if err != nil {
			t.Fatal(err)
		}
		if st.Since > s.Frontier() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	p := newParked(s)
	for {
		var err error
		if parks {
			_, err = p.next(t, f.ctx)
		} else {
			_, err = s.Next(f.ctx, 0)
		}
		if err == nil {
			continue
		}
		var be *subscribe.BufferError
		if !errors.As(err, &be) {
			t.Fatalf("got %v, want a BufferError", err)
		}
		if got := be.Detail(); got != subscribe.DetailHistoryLost {
			t.Fatalf("detail %q, want %q: the position is gone, a client must not resume", got, subscribe.DetailHistoryLost)
		}
		return
	}
}

// TestRetireIdleTail: a tail without subscribers retires and its readers
// leave the shard.
func TestRetireIdleTail(t *testing.T) {
	f := newFixture(t, Config{RetireAfter: time.Hour})
	s := f.subscribe(f.upper-1, true, 0, nil)
	drain(t, f.ctx, s, f.upper)
	s.Close()
	if n := f.m.retireIdle(timeNow().Add(2 * time.Hour)); n != 1 {
		t.Fatalf("retired %d tails, want 1", n)
	}
	st, err := f.p.State(f.ctx, f.shard)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Readers) != 1 {
		t.Fatalf("%d readers after retiring, want only the policy reader", len(st.Readers))
	}
}

// TestUpToAndDrop: UP TO completes a subscriber; dropping the shard ends
// the others with ErrDropped.
func TestUpToAndDrop(t *testing.T) {
	f := newFixture(t, Config{})
	asOf := f.upper - 1
	upTo := asOf + 3
	done := f.subscribe(asOf, true, 0, &upTo)
	live := f.subscribe(asOf, true, 0, nil)
	for range 4 {
		f.write(ins(1, "a"))
	}
	rows := drain(t, f.ctx, done, upTo)
	for _, r := range rows {
		if r.Time >= upTo {
			t.Fatalf("row at %d at or past UP TO %d", r.Time, upTo)
		}
	}
	if _, err := done.Next(f.ctx, 0); !errors.Is(err, io.EOF) {
		t.Fatalf("after UP TO: %v, want EOF", err)
	}
	drain(t, f.ctx, live, f.upper)
	if err := f.p.DropShard(f.ctx, f.shard); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if _, err := live.Next(f.ctx, 0); err != nil {
				if !errors.Is(err, subscribe.ErrDropped) {
					t.Errorf("after drop: %v, want ErrDropped", err)
				}
				return
			}
		}
	}()
	wg.Wait()
}

// flakyConsensus fails every operation while down, as an unreachable
// PostgreSQL would.
type flakyConsensus struct {
	persist.Consensus
	down atomic.Bool
}

var errUnreachable = errors.New("consensus unreachable (test)")

func (c *flakyConsensus) Head(ctx context.Context, key string) (*persist.VersionedData, error) {
	if c.down.Load() {
		return nil, errUnreachable
	}
	return c.Consensus.Head(ctx, key)
}

func (c *flakyConsensus) Scan(ctx context.Context, key string, from persist.SeqNo, limit int) ([]persist.VersionedData, error) {
	if c.down.Load() {
		return nil, errUnreachable
	}
	return c.Consensus.Scan(ctx, key, from, limit)
}

// TestStorageOutage: while consensus is unreachable the shared tail retries
// instead of failing its subscribers; when it returns, they go on with the
// next write, without a gap or an error.
func TestStorageOutage(t *testing.T) {
	cons := &flakyConsensus{Consensus: consmem.New()}
	f := newFixtureOn(t, Config{}, cons)
	s := f.subscribe(f.upper-1, true, 0, nil)
	f.write(ins(1, "a"))
	before := canon(drain(t, f.ctx, s, f.upper))

	cons.down.Store(true)
	for testutil.ToFloat64(f.m.Metrics().storageRetries) < 2 {
		select {
		case <-f.ctx.Done():
			t.Fatal("the tail never retried a read during the outage")
		case <-time.After(10 * time.Millisecond):
		}
	}
	cons.down.Store(false)

	f.write(ins(2, "b"))
	after := canon(drain(t, f.ctx, s, f.upper))
	got := append(before, after...)
	want := []string{"0 progress", "1 progress", "1 [1 1 a]", "2 progress", "2 [1 2 b]", "3 progress"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stream across the outage:\n got %q\nwant %q", got, want)
	}
}

// TestAsOfAtLeast: a subscriber that may start later than its AS OF (the
// statement had none) starts at a time the shared snapshot reader still
// holds instead of an older one, while an exact AS OF is kept.
func TestAsOfAtLeast(t *testing.T) {
	f := newFixture(t, Config{DowngradeInterval: time.Millisecond})
	old := f.upper - 1
	first := f.subscribe(old, true, 0, nil)
	drain(t, f.ctx, first, f.upper)
	var floor uint64
	for floor <= old {
		f.write(ins(1, "a"))
		drain(t, f.ctx, first, f.upper)
		f.m.mu.Lock()
		floor = f.m.tails[f.shard].snapReader.Since()
		f.m.mu.Unlock()
	}
	start := func(atLeast bool) uint64 {
		s, err := f.m.Subscribe(f.ctx, subscribe.Request{Shard: f.shard, AsOf: old, AsOfAtLeast: atLeast, Snapshot: true,
			Output: &formatter.Options{Relation: schema, Progress: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		rows, err := s.Next(f.ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !rows[0].Progressed {
			t.Fatalf("first row %+v is not the progress row at AS OF", rows[0])
		}
		return rows[0].Time
	}
	if got := start(true); got < floor {
		t.Errorf("AT LEAST: started at %d, below the snapshot reader's since %d", got, floor)
	}
	if got := start(false); got != old {
		t.Errorf("exact AS OF %d: started at %d", old, got)
	}
}

// waitPublished waits until s's tail has published up to frontier.
func waitPublished(t *testing.T, ctx context.Context, s *Subscriber, frontier uint64) {
	t.Helper()
	for {
		s.t.mu.Lock()
		done := s.t.frontier >= frontier
		s.t.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the tail never published up to %d", frontier)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestNextReturnsBacklogAtOnce: a subscriber behind by several published
// batches gets all of them from one Next, which the session writes with
// one flush: one write per catch-up, not one per batch.
func TestNextReturnsBacklogAtOnce(t *testing.T) {
	f := newFixture(t, Config{})
	s := f.subscribe(f.upper-1, true, 0, nil)
	f.write(ins(100, "warm-up"))
	drain(t, f.ctx, s, f.upper)
	const batches = 5
	for i := range batches {
		f.write(ins(int64(i), "v"))
		waitPublished(t, f.ctx, s, f.upper) // each write its own batch
	}
	rows, err := s.Next(f.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := 0
	for _, r := range rows {
		if !r.Progressed {
			data++
		}
	}
	if data != batches {
		t.Errorf("one Next returned %d of the %d queued batches' rows: %v", data, batches, canon(rows))
	}
	if last := rows[len(rows)-1]; !last.Progressed || last.Time != f.upper {
		t.Errorf("the last row is %+v; want the progress to %d", last, f.upper)
	}
}

// TestNextLetsGoOfRows: the rows one Next returned for a backlog (a
// slice of the subscriber's own: too large to share, see batch.run) are
// the caller's alone: once it drops them, they are garbage while the
// subscriber stays open. (Its queue's array kept the first slot's batch:
// a resume storm's streams each held their catch-up's thousands of rows
// while their clients read, twice the heap pgwire's storm needed.)
func TestNextLetsGoOfRows(t *testing.T) {
	f := newFixture(t, Config{})
	s := f.subscribe(f.upper-1, true, 0, nil)
	f.write(ins(100, "warm-up"))
	drain(t, f.ctx, s, f.upper)
	for i := range 5 {
		f.write(ins(int64(i), strings.Repeat("v", maxRunBytes/4)))
		waitPublished(t, f.ctx, s, f.upper)
	}
	rows, err := s.Next(f.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 2 {
		t.Fatalf("Next returned %d rows, want the backlog's", len(rows))
	}
	first := weak.Make(&rows[0])
	rows = nil
	// A finalizer's queue or a background mark may hold it for a cycle.
	for range 3 {
		runtime.GC()
	}
	if first.Value() != nil {
		t.Error("the backlog's rows are still reachable after the caller dropped them")
	}
	runtime.KeepAlive(s)
}

// TestCatchUpKeepsEveryProgress: a backlog taken at once by one Next is
// what the batches give one by one: each timestamp's rows, then every
// batch's progress row at its upper, a tick's (no rows) included, as the
// dataflow path sends them.
func TestCatchUpKeepsEveryProgress(t *testing.T) {
	f := newFixture(t, Config{})
	s := f.subscribe(f.upper-1, true, 0, nil)
	f.write(ins(100, "warm-up"))
	drain(t, f.ctx, s, f.upper)
	var want []string
	for i, data := range []bool{true, false, false, true, false} {
		if data {
			at := f.write(ins(int64(i), "v"))
			want = append(want, fmt.Sprintf("%d [1 %d v]", at, i))
		} else {
			f.write()
		}
		want = append(want, fmt.Sprintf("%d progress", f.upper))
		waitPublished(t, f.ctx, s, f.upper) // each write its own batch
	}
	rows, err := s.Next(f.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := canon(rows); !slices.Equal(got, want) {
		t.Errorf("one Next returned\n%v\nwant\n%v", got, want)
	}
}

// TestTakeWithoutTailLock: a session takes its queued batches under its
// subscriber's own lock, not the tail's, so that thousands of sessions do
// not contend with each other and with the fan-out for it: Next returns a
// queued batch while the tail's lock is held (as a long publish holds
// it).
func TestTakeWithoutTailLock(t *testing.T) {
	f := newFixture(t, Config{})
	s := f.subscribe(f.upper-1, true, 0, nil)
	f.write(ins(100, "warm-up"))
	drain(t, f.ctx, s, f.upper)
	at := f.write(ins(1, "v"))
	waitPublished(t, f.ctx, s, f.upper)
	s.t.mu.Lock()
	got := make(chan []string, 1)
	go func() {
		rows, err := s.Next(f.ctx, 0)
		if err != nil {
			t.Error(err)
		}
		got <- canon(rows)
	}()
	select {
	case rows := <-got:
		s.t.mu.Unlock()
		if want := []string{fmt.Sprintf("%d [1 1 v]", at), fmt.Sprintf("%d progress", at+1)}; !slices.Equal(rows, want) {
			t.Errorf("Next returned %v, want %v", rows, want)
		}
	case <-f.ctx.Done():
		s.t.mu.Unlock()
		t.Fatal("Next waited for the tail's lock")
	}
}

// TestLiveListShared: subscribers that take a batch alone at their
// frontier share one list of its rows (built once per output shape), not
// one each, and it is the list Groups would have built.
func TestLiveListShared(t *testing.T) {
	f := newFixture(t, Config{})
	s1 := f.subscribe(f.upper-1, true, 0, nil)
	s2 := f.subscribe(f.upper-1, true, 0, nil)
	f.write(ins(100, "warm-up"))
	drain(t, f.ctx, s1, f.upper)
	drain(t, f.ctx, s2, f.upper)
	at := f.write(ins(1, "v"), ins(2, "w"))
	waitPublished(t, f.ctx, s1, f.upper)
	var lists [2][]formatter.Row
	for i, s := range []*Subscriber{s1, s2} {
		rows, err := s.Next(f.ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		lists[i] = rows
	}
	want := []string{fmt.Sprintf("%d [1 1 v]", at), fmt.Sprintf("%d [1 2 w]", at), fmt.Sprintf("%d progress", at+1)}
	if got := canon(lists[0]); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if &lists[0][0] != &lists[1][0] {
		t.Errorf("each subscriber got a list of its own")
	}
}

// TestBacklogRowsShared: subscribers that take a backlog of batches at
// once (as most of 10,000 subscribers do under a steady writer) get rows
// every subscriber at that point shares, progress rows included: each
// row's encoding is computed once, not once per subscriber; and those
// that take the same batches share one list of them too (batch.run).
func TestBacklogRowsShared(t *testing.T) {
	f := newFixture(t, Config{})
	s1 := f.subscribe(f.upper-1, true, 0, nil)
	s2 := f.subscribe(f.upper-1, true, 0, nil)
	f.write(ins(100, "warm-up"))
	drain(t, f.ctx, s1, f.upper)
	drain(t, f.ctx, s2, f.upper)
	for i, data := range []bool{true, false, true} {
		if data {
			f.write(ins(int64(i), "v"))
		} else {
			f.write()
		}
		waitPublished(t, f.ctx, s1, f.upper) // each write its own batch
	}
	var lists [2][]formatter.Row
	for i, s := range []*Subscriber{s1, s2} {
		rows, err := s.Next(f.ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		lists[i] = rows
	}
	if got, want := canon(lists[0]), canon(lists[1]); !slices.Equal(got, want) || len(got) != 5 {
		t.Fatalf("backlogs differ or are not the 3 batches' 5 rows:\n%v\n%v", got, want)
	}
	if &lists[0][0] != &lists[1][0] || cap(lists[0]) != len(lists[0]) {
		t.Errorf("each subscriber got a list of its own backlog, or one with room to append to")
	}
	enc := formatter.NewCopyEncoder(s1.req.Output, formatter.CopyText)
	var b1, b2 []byte
	for i := range lists[0] {
		m1 := formatter.Messages(enc, lists[0][i:i+1], &b1)
		m2 := formatter.Messages(enc, lists[1][i:i+1], &b2)
		if &m1[0][0] != &m2[0][0] {
			t.Errorf("row %d (%s) encoded for each subscriber", i, canon(lists[0][i:i+1]))
		}
	}
}
