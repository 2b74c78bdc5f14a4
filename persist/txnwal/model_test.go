package txnwal_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/persist/txnwal"
	"github.com/shardtail/shardtail/row"
)

var testSchema = row.Schema{Columns: []row.Column{
	{Name: "k", Type: row.TypeInt8},
	{Name: "v", Type: row.TypeText},
}}

// model is a trivially correct txn-wal: the committed transactions, each
// all-or-nothing at one time, and the registered shards.
type model struct {
	progress   uint64
	registered map[string]bool
	dropped    map[string]bool
	// writes are every committed update, per shard, at its commit's time.
	writes map[string][]row.Update
}

func (m *model) snapshot(shard string, asOf uint64) []row.Update {
	var out []row.Update
	for _, u := range m.writes[shard] {
		if u.T <= asOf {
			out = append(out, row.Update{Row: u.Row, T: asOf, Diff: u.Diff})
		}
	}
	return row.Consolidate(out)
}

func (m *model) listen(shard string, asOf, upper uint64) []row.Update {
	var out []row.Update
	for _, u := range m.writes[shard] {
		if u.T > asOf && u.T < upper {
			out = append(out, u)
		}
	}
	return sortByTime(row.Consolidate(out))
}

func sortByTime(us []row.Update) []row.Update {
	slices.SortStableFunc(us, func(a, b row.Update) int {
		if c := cmpU64(a.T, b.T); c != 0 {
			return c
		}
		return row.Compare(a.Row, b.Row)
	})
	return us
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// process is one process's persist client and txns handle.
type process struct {
	p    *persist.Client
	txns *txnwal.Txns
}

type env struct {
	t    *testing.T
	blob persist.Blob
	cons persist.Consensus
	// clock is the test's oracle: strictly increasing timestamps.
	clock uint64
}

func (e *env) open(ctx context.Context, hook func()) *process {
	e.t.Helper()
	p, err := persist.NewClient(e.blob, e.cons, persist.Config{PollInterval: 5 * time.Millisecond, ReaderHeartbeat: -1,
		CompactionMinInputs: 2, RollupEvery: 8, SnapshotChunkRows: 16, PartTargetBytes: 256})
	if err != nil {
		e.t.Fatal(err)
	}
	tx, err := txnwal.Open(ctx, p, txnwal.Config{PollInterval: 5 * time.Millisecond, AfterCommit: hook})
	if err != nil {
		e.t.Fatal(err)
	}
	p.SetTxnReads(tx)
	return &process{p: p, txns: tx}
}

func (pr *process) close() {
	pr.txns.Close()
	pr.p.Close()
}

func (e *env) ts(_ context.Context, min uint64) (uint64, error) {
	e.clock = max(e.clock+1, min)
	return e.clock, nil
}

// TestModel runs random registrations, multi-shard commits (some cut
// off between the commit and its applies, as a crash would), ticks, drops,
// restarts and reads from a second process against the txns shard and the
// model, and checks after every step that every data shard reads, as a
// snapshot at any time and as a listen, exactly what the model holds.
func TestModel(t *testing.T) {
	seeds, steps := 4, 160 // past two rollups (rollupEvery)
	if testing.Short() {
		seeds, steps = 3, 50
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) { runModel(t, uint64(seed), steps) })
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := &env{t: t, blob: blobmem.New(), cons: consmem.New()}
	// crash is set while a commit must stop after its compare-and-set:
	// the hook cancels the commit's context, so that no apply happens.
	var crash context.CancelFunc
	hook := func() {
		if crash != nil {
			crash()
		}
	}
	owner := e.open(ctx, hook)
	other := e.open(ctx, nil) // a reader process (a tail process)
	defer func() { owner.close(); other.close() }()
	m := &model{registered: map[string]bool{}, dropped: map[string]bool{}, writes: map[string][]row.Update{}}
	var shards []string

	for step := range steps {
		switch op := rng.IntN(12); {
		case op < 2 || len(shards) == 0: // create and register a table
			shard := persist.NewShardID()
			if _, err := owner.p.CreateShard(ctx, shard, testSchema); err != nil {
				t.Fatal(err)
			}
			if err := owner.txns.Register(ctx, shard); err != nil {
				t.Fatalf("step %d: register: %v", step, err)
			}
			shards = append(shards, shard)
			m.registered[shard] = true
			// Registration takes the next time: progress moves past it.
			st, _ := owner.txns.Current()
			if st.Progress <= m.progress {
				t.Fatalf("step %d: progress %d after registering, was %d", step, st.Progress, m.progress)
			}
			m.progress = st.Progress
			e.clock = max(e.clock, st.Progress)
		case op < 7: // a transaction over 1..3 live shards
			live := liveShards(shards, m)
			if len(live) == 0 {
				continue
			}
			rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
			live = live[:1+rng.IntN(min(3, len(live)))]
			var writes []txnwal.Write
			byShard := map[string][]row.Update{}
			for _, shard := range live {
				var ups []row.Update
				for range 1 + rng.IntN(4) {
					d := int64(1)
					if rng.IntN(4) == 0 {
						d = -1
					}
					ups = append(ups, row.Update{Row: row.Row{int64(rng.IntN(6)), fmt.Sprintf("v%d", rng.IntN(2))}, Diff: d})
				}
				b, err := owner.txns.WriteBatch(ctx, shard, ups)
				if err != nil {
					t.Fatal(err)
				}
				writes = append(writes, txnwal.Write{Shard: shard, Batch: b})
				byShard[shard] = ups
			}
			cctx := ctx
			if rng.IntN(3) == 0 {
				cctx, crash = context.WithCancel(ctx)
			}
			ts, err := owner.txns.Commit(cctx, writes, nil, e.ts)
			crash = nil
			if err != nil {
				t.Fatalf("step %d: commit: %v", step, err)
			}
			for shard, ups := range byShard {
				for _, u := range ups {
					m.writes[shard] = append(m.writes[shard], row.Update{Row: u.Row, T: ts, Diff: u.Diff})
				}
			}
			m.progress = ts + 1
		case op < 9: // tick
			p, err := owner.txns.Advance(ctx, e.ts)
			if err != nil {
				t.Fatalf("step %d: tick: %v", step, err)
			}
			m.progress = p
		case op == 9: // drop a table
			live := liveShards(shards, m)
			if len(live) < 2 {
				continue
			}
			shard := live[rng.IntN(len(live))]
			if err := owner.p.DropShard(ctx, shard); err != nil {
				t.Fatal(err)
			}
			if err := owner.txns.Forget(ctx, shard); err != nil {
				t.Fatal(err)
			}
			m.dropped[shard] = true
		case op == 10: // the owner restarts; maybe recovers at once
			owner.close()
			owner = e.open(ctx, hook)
			if rng.IntN(2) == 0 {
				if err := owner.txns.Recover(ctx); err != nil {
					t.Fatalf("step %d: recover: %v", step, err)
				}
			}
		case op == 11: // the reader process restarts
			other.close()
			other = e.open(ctx, nil)
		}
		st, _ := owner.txns.Current()
		if err := st.Validate(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if st.Progress != m.progress && m.progress > 0 {
			t.Fatalf("step %d: progress %d, model %d", step, st.Progress, m.progress)
		}
		// The other process, reading the diffs (and rollups, after a
		// truncation) from consensus, sees exactly the owner's state.
		if got, err := other.txns.Refresh(ctx); err != nil {
			t.Fatal(err)
		} else if !reflect.DeepEqual(normalize(got), normalize(st)) {
			t.Fatalf("step %d: state read back differs:\n got %+v\nwant %+v", step, got, st)
		}
		checkReads(t, ctx, rng, step, []*process{owner, other}, shards, m)
	}
	// Every commit is applied and tidied by a recovery.
	if err := owner.txns.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.txns.Advance(ctx, e.ts); err != nil {
		t.Fatal(err)
	}
	if st, _ := owner.txns.Current(); len(st.Commits) != 0 {
		t.Fatalf("after recovery and a tick: %d commits listed, want 0", len(st.Commits))
	}
}

func liveShards(shards []string, m *model) []string {
	var out []string
	for _, s := range shards {
		if !m.dropped[s] {
			out = append(out, s)
		}
	}
	return out
}

// checkReads compares, for one random live shard and process, a snapshot
// at a random time and a listen from it up to the progress with the model.
func checkReads(t *testing.T, ctx context.Context, rng *rand.Rand, step int, procs []*process, shards []string, m *model) {
	t.Helper()
	live := liveShards(shards, m)
	if len(live) == 0 || m.progress == 0 {
		return
	}
	pr := procs[rng.IntN(len(procs))]
	shard := live[rng.IntN(len(live))]
	r, err := pr.p.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "model"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	asOf := r.Since() + uint64(rng.IntN(int(m.progress-r.Since())))
	cur, err := r.Snapshot(ctx, asOf)
	if err != nil {
		t.Fatalf("step %d: snapshot of %s at %d: %v", step, shard, asOf, err)
	}
	got, err := cur.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := m.snapshot(shard, asOf); !equal(got, want) {
		t.Fatalf("step %d: snapshot of %s at %d:\n got %v\nwant %v", step, shard, asOf, got, want)
	}
	l, err := r.Listen(ctx, asOf)
	if err != nil {
		t.Fatal(err)
	}
	var ups []row.Update
	frontier := asOf
	for frontier < m.progress {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		batch, f, err := l.Next(lctx)
		cancel()
		if err != nil {
			t.Fatalf("step %d: listen of %s from %d at %d (progress %d): %v", step, shard, asOf, frontier, m.progress, err)
		}
		if f <= frontier {
			t.Fatalf("step %d: listen frontier went from %d to %d", step, frontier, f)
		}
		for _, u := range batch {
			if u.T < frontier || u.T >= f {
				t.Fatalf("step %d: listen update at %d outside [%d, %d)", step, u.T, frontier, f)
			}
		}
		ups = append(ups, batch...)
		frontier = f
	}
	if want := m.listen(shard, asOf, frontier); !equal(sortByTime(row.Consolidate(ups)), want) {
		t.Fatalf("step %d: listen of %s from %d to %d:\n got %v\nwant %v", step, shard, asOf, frontier, ups, want)
	}
}

func equal(a, b []row.Update) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// normalize makes empty slices nil, as a JSON round trip does.
func normalize(s *txnwal.State) txnwal.State {
	n := *s
	n.Commits = slices.Clone(n.Commits)
	if len(n.Commits) == 0 {
		n.Commits = nil
	}
	if len(n.Recent) == 0 {
		n.Recent = nil
	}
	for i, c := range n.Commits {
		for j, w := range c.Writes {
			if len(w.Batch.Parts) == 0 {
				n.Commits[i].Writes = slices.Clone(c.Writes)
				n.Commits[i].Writes[j].Batch.Parts = nil
			}
		}
	}
	return n
}
