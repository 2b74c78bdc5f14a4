package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shardtail/shardtail/persist"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/row"
)

// mustOpenCatalog opens the catalog in c, failing the test on an error.
func mustOpenCatalog(t *testing.T, c persist.Consensus) *Catalog {
	t.Helper()
	cat, err := Open(context.Background(), c)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return cat
}

// catalogJSON renders a state canonically (map keys sorted) for comparison.
func catalogJSON(t *testing.T, s *State) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantSameCatalog fails unless got holds the state want does.
func wantSameCatalog(t *testing.T, what string, got, want *State) {
	t.Helper()
	if g, w := catalogJSON(t, got), catalogJSON(t, want); g != w {
		t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// TestCatalogModel runs random changes against the catalog and checks,
// after each, that a cold reader and a warm follower read exactly the
// writer's state, and that the log stays short: diffs between rollups are
// bounded and the versions before a rollup are truncated.
func TestCatalogModel(t *testing.T) {
	ctx := context.Background()
	cons := consmem.New()
	w := mustOpenCatalog(t, cons)
	w.maxDiffs = 5
	follower := mustOpenCatalog(t, cons)
	rng := rand.New(rand.NewPCG(1, 2))
	names := func() string { return fmt.Sprintf("x%d", rng.IntN(20)) }
	for step := range 300 {
		var what string
		_, err := w.Update(ctx, func(s *State) error {
			switch op := rng.IntN(6); op {
			case 0, 1:
				what = "create or replace an item"
				it := &Item{ID: s.NextID, Name: names(), Kind: KindTable, Owner: "materialize", RetainMs: int64(rng.IntN(1000))}
				s.NextID++
				s.Items[it.Name] = it
			case 2:
				what = "drop an item"
				delete(s.Items, names())
			case 3:
				what = "set a role"
				r := &Role{Name: names(), Login: rng.IntN(2) == 0}
				s.Roles[r.Name] = r
			case 4:
				what = "drop a role"
				delete(s.Roles, names())
			case 5:
				what = "set a system variable"
				if rng.IntN(2) == 0 {
					s.System[names()] = fmt.Sprint(rng.IntN(10))
				} else {
					delete(s.System, names())
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("step %d (%s): %v", step, what, err)
		}
		want := w.State()
		wantSameCatalog(t, fmt.Sprintf("step %d (%s): cold reader", step, what), mustOpenCatalog(t, cons).State(), want)
		if step%3 == 0 {
			if err := follower.Refresh(ctx); err != nil {
				t.Fatalf("step %d: follower refresh: %v", step, err)
			}
			wantSameCatalog(t, fmt.Sprintf("step %d (%s): follower", step, what), follower.State(), want)
			if got, want := follower.Seq(), w.Seq(); got != want {
				t.Fatalf("step %d: follower at %s, writer at %s", step, got, want)
			}
		}
		vds, err := cons.Scan(ctx, Key, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(vds) > w.maxDiffs+1 {
			t.Fatalf("step %d: %d versions kept, want at most a rollup and %d diffs", step, len(vds), w.maxDiffs)
		}
	}
}

// TestCatalogFirstFormat opens a catalog written in the first format (the
// whole state in every version): it reads as it was, the next change is
// written as a diff, and every reader agrees afterwards.
func TestCatalogFirstFormat(t *testing.T) {
	ctx := context.Background()
	cons := consmem.New()
	old := &State{
		Items:  map[string]*Item{"t": {ID: 1, Name: "t", Kind: KindTable, Shard: "s1", RetainMs: 1000, Owner: "materialize"}},
		Roles:  map[string]*Role{"materialize": {Name: "materialize", Login: true, Superuser: true}},
		System: map[string]string{"max_result_size": "2GB"}, NextID: 2,
	}
	for seq := persist.SeqNo(1); seq <= 3; seq++ {
		data, err := json.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		var expected *persist.SeqNo
		if seq > 1 {
			prev := seq - 1
			expected = &prev
		}
		if ok, err := cons.CompareAndSet(ctx, Key, expected, persist.VersionedData{SeqNo: seq, Data: data}); !ok || err != nil {
			t.Fatalf("write first-format version %s: %v, %v", seq, ok, err)
		}
	}
	cat := mustOpenCatalog(t, cons)
	wantSameCatalog(t, "first format read", cat.State(), old)
	if got := cat.Seq(); got != 3 {
		t.Fatalf("Seq = %s, want v3", got)
	}
	next, err := cat.Update(ctx, func(s *State) error {
		s.Items["u"] = &Item{ID: s.NextID, Name: "u", Kind: KindTable, Shard: "s2", Owner: "materialize"}
		s.NextID++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	head, err := cons.Head(ctx, Key)
	if err != nil {
		t.Fatal(err)
	}
	e, err := decodeCatalogEntry(*head)
	if err != nil {
		t.Fatal(err)
	}
	if e.State != nil || e.Rollup != 3 || len(e.ItemsSet) != 1 || e.ItemsSet["u"] == nil {
		t.Errorf("the change after a first-format version: %s, want a diff setting u after rollup v3", head.Data)
	}
	wantSameCatalog(t, "cold reader after the change", mustOpenCatalog(t, cons).State(), next)
}

// TestCatalogColumnModifiers opens a catalog whose schemas were written
// before columns had type modifiers: its columns read as having none, an
// item without modifiers still encodes as it did then, and a column's
// modifier survives a cold read once written.
func TestCatalogColumnModifiers(t *testing.T) {
	ctx := context.Background()
	cons := consmem.New()
	// A rollup as a binary without row.Column.Mod wrote it.
	old := `{"format":2,"rollup":1,"state":{"items":{"t":{"id":1,"name":"t","kind":"table",` +
		`"schema":{"Columns":[{"Name":"v","Type":8,"Nullable":true},{"Name":"n","Type":7,"Nullable":false}]},` +
		`"shard":"s1","retain_ms":1000,"owner":"materialize"}},` +
		`"roles":{"materialize":{"name":"materialize","login":true,"superuser":true}},"system":{},"next_id":2}}`
	if ok, err := cons.CompareAndSet(ctx, Key, nil, persist.VersionedData{SeqNo: 1, Data: []byte(old)}); !ok || err != nil {
		t.Fatalf("write old version: %v, %v", ok, err)
	}
	cat := mustOpenCatalog(t, cons)
	want := row.Schema{Columns: []row.Column{{Name: "v", Type: row.TypeText, Nullable: true}, {Name: "n", Type: row.TypeNumeric}}}
	if got := cat.State().Items["t"].Schema; !got.Equal(want) {
		t.Fatalf("old schema read as %+v, want %+v", got, want)
	}
	b, err := json.Marshal(cat.State().Items["t"].Schema)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"Columns":[{"Name":"v","Type":8,"Nullable":true},{"Name":"n","Type":7,"Nullable":false}]}`; got != want {
		t.Errorf("a schema without modifiers encodes as %s, want the old form %s", got, want)
	}
	mods := row.Schema{Columns: []row.Column{
		{Name: "v", Type: row.TypeText, Nullable: true, Mod: row.TypeMod{Set: true, Length: 3}},
		{Name: "n", Type: row.TypeNumeric, Mod: row.TypeMod{Set: true, Precision: 5, Scale: 2}},
		{Name: "ts", Type: row.TypeTimestamp, Mod: row.TypeMod{Set: true, Precision: 0}},
	}}
	next, err := cat.Update(ctx, func(s *State) error {
		s.Items["u"] = &Item{ID: s.NextID, Name: "u", Kind: KindTable, Shard: "s2", Schema: mods, Owner: "materialize"}
		s.NextID++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cold := mustOpenCatalog(t, cons).State()
	wantSameCatalog(t, "cold reader after the change", cold, next)
	if got := cold.Items["u"].Schema; !got.Equal(mods) {
		t.Errorf("modifiers read back as %+v, want %+v", got, mods)
	}
}

// TestCatalogAuthSecretInDiff sets the AuthSecret on a catalog written
// before it existed, where the change is a diff, not a rollup: a cold
// reader (the next start) reads the same secret. The diffs dropped it, so
// a data directory of the previous release got a new secret at every
// start, and an unknown name's salt changed with it.
func TestCatalogAuthSecretInDiff(t *testing.T) {
	ctx := context.Background()
	cons := consmem.New()
	old := `{"format":2,"rollup":1,"state":{"items":{},` +
		`"roles":{"materialize":{"name":"materialize","login":true,"superuser":true}},"system":{},"next_id":2}}`
	if ok, err := cons.CompareAndSet(ctx, Key, nil, persist.VersionedData{SeqNo: 1, Data: []byte(old)}); !ok || err != nil {
		t.Fatalf("write old version: %v, %v", ok, err)
	}
	cat := mustOpenCatalog(t, cons)
	next, err := cat.Update(ctx, func(s *State) error {
		s.AuthSecret = []byte("0123456789abcdef0123456789abcdef")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	head, err := cons.Head(ctx, Key)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := decodeCatalogEntry(*head); err != nil || e.State != nil {
		t.Fatalf("the change: %s, %v; want a diff", head.Data, err)
	}
	wantSameCatalog(t, "cold reader after setting the secret", mustOpenCatalog(t, cons).State(), next)
	// A later diff keeps it.
	if next, err = cat.Update(ctx, func(s *State) error { s.NextID++; return nil }); err != nil {
		t.Fatal(err)
	}
	wantSameCatalog(t, "cold reader after another change", mustOpenCatalog(t, cons).State(), next)
}
