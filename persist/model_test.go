package persist_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// model is a trivially correct shard: every update ever appended.
type model struct {
	updates []row.Update
	upper   uint64
}

func (m *model) snapshot(asOf uint64) []row.Update {
	var out []row.Update
	for _, u := range m.updates {
		if u.T <= asOf {
			out = append(out, row.Update{Row: u.Row, T: asOf, Diff: u.Diff})
		}
	}
	return row.Consolidate(out)
}

func (m *model) listen(asOf, upper uint64) []row.Update {
	var out []row.Update
	for _, u := range m.updates {
		if u.T > asOf && u.T < upper {
			out = append(out, u)
		}
	}
	return sortByTime(row.Consolidate(out))
}

func sortByTime(us []row.Update) []row.Update {
	slices.SortStableFunc(us, func(a, b row.Update) int { return int(int64(a.T) - int64(b.T)) })
	return us
}

// TestModel runs random appends, compactions, since downgrades, reader
// registrations and process restarts against a shard and the model, and
// after every step checks that every valid snapshot and listen equals the
// model's.
func TestModel(t *testing.T) {
	seeds := 6
	steps := 120
	if testing.Short() {
		seeds, steps = 2, 60
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) { runModel(t, uint64(seed), steps) })
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 42))
	e := newEnv(t)
	e.cfg.CompactionMinInputs = 2
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	policy := must(c.OpenReader(ctx, shard, persist.ReaderOptions{Critical: true, Purpose: "policy"}))(t)
	var extra []*persist.Reader
	m := &model{}

	for step := range steps {
		switch op := rng.IntN(10); {
		case op < 5: // append
			n := rng.IntN(6)
			newUpper := m.upper + 1 + uint64(rng.IntN(3))
			var ups []row.Update
			for range n {
				k := int64(rng.IntN(5))
				var v row.Datum = fmt.Sprintf("v%d", rng.IntN(2))
				if rng.IntN(5) == 0 {
					v = nil
				}
				d := int64(rng.IntN(3)) - 1
				if d == 0 {
					d = 2
				}
				ups = append(ups, row.Update{Row: row.Row{k, v}, T: m.upper + uint64(rng.IntN(int(newUpper-m.upper))), Diff: d})
			}
			if err := w.CompareAndAppend(ctx, ups, m.upper, newUpper); err != nil {
				t.Fatalf("step %d: append: %v", step, err)
			}
			m.updates = append(m.updates, ups...)
			m.upper = newUpper
		case op == 5: // compaction + gc
			if _, err := c.Maintain(ctx, shard); err != nil {
				t.Fatalf("step %d: maintain: %v", step, err)
			}
		case op == 6: // downgrade since
			if m.upper > 0 {
				since := policy.Since() + uint64(rng.IntN(int(m.upper-policy.Since())+1))
				if err := policy.Downgrade(ctx, min(since, m.upper-1)); err != nil {
					t.Fatalf("step %d: downgrade: %v", step, err)
				}
			}
		case op == 7: // register or close a reader
			if len(extra) > 0 && rng.IntN(2) == 0 {
				if err := extra[0].Close(); err != nil {
					t.Fatal(err)
				}
				extra = extra[1:]
			} else {
				extra = append(extra, must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t))
			}
		case op == 8: // restart: a new process takes over from durable state
			for _, r := range extra {
				r.Close()
			}
			extra = nil
			policySince := policy.Since()
			policy.Close()
			c.Close()
			c = e.client()
			w = must(c.OpenWriter(ctx, shard))(t)
			policy = must(c.OpenReader(ctx, shard, persist.ReaderOptions{Critical: true}))(t)
			if policy.Since() < policySince {
				// The shard's since never regresses across a restart.
				t.Fatalf("step %d: since regressed to %d from %d", step, policy.Since(), policySince)
			}
		default:
		}
		checkModel(t, step, c, shard, m, rng)
	}
	s := must(c.State(ctx, shard))(t)
	t.Logf("seed %d: upper %d since %d, %d batches, seqno %s", seed, s.Upper, s.Since, len(s.Batches), s.SeqNo)
}

func checkModel(t *testing.T, step int, c *persist.Client, shard string, m *model, rng *rand.Rand) {
	t.Helper()
	ctx := ctxT(t)
	s := must(c.State(ctx, shard))(t)
	if err := s.Validate(); err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	if s.Upper != m.upper {
		t.Fatalf("step %d: upper %d, model %d", step, s.Upper, m.upper)
	}
	if m.upper == 0 {
		return
	}
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer r.Close()
	since := r.Since()
	// Every valid as_of is checked on small shards; a sample otherwise.
	for asOf := since; asOf < m.upper; asOf++ {
		if m.upper-since > 8 && rng.IntN(3) != 0 && asOf != since && asOf != m.upper-1 {
			continue
		}
		got := readSnapshot(t, ctx, r, asOf)
		if want := m.snapshot(asOf); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("step %d: snapshot at %d (since %d):\n got %v\nwant %v", step, asOf, since, got, want)
		}
		l := must(r.Listen(ctx, asOf))(t)
		var got2 []row.Update
		for l.Frontier() < m.upper {
			u, _, err := l.Next(ctx)
			if err != nil {
				t.Fatalf("step %d: listen: %v", step, err)
			}
			got2 = append(got2, u...)
		}
		if l.Frontier() != m.upper {
			t.Fatalf("step %d: listen frontier %d past upper %d", step, l.Frontier(), m.upper)
		}
		if want := m.listen(asOf, m.upper); !reflect.DeepEqual(got2, want) && !(len(got2) == 0 && len(want) == 0) {
			t.Fatalf("step %d: listen from %d:\n got %v\nwant %v", step, asOf, got2, want)
		}
	}
}
