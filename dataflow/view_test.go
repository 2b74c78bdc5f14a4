package dataflow

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// writerStorage is a Storage over one shard's writer.
type writerStorage struct{ w *persist.Writer }

func (s writerStorage) Append(ctx context.Context, _ string, updates []row.Update) (uint64, error) {
	return 0, errors.New("writerStorage: Append not used by views")
}

func (s writerStorage) AppendAt(ctx context.Context, _ string, updates []row.Update, lower, upper uint64) error {
	return s.w.CompareAndAppend(ctx, updates, lower, upper)
}

var errBadRow = errors.New("bad row")

// evensOr13Fails is evens, failing on the key 13.
type evensOr13Fails struct{}

func (evensOr13Fails) Apply(r row.Row) (row.Row, bool, error) {
	if r[0].(int64) == 13 {
		return nil, false, errBadRow
	}
	return evens{}.Apply(r)
}

// startView starts a view of shard through m into a new shard, and
// returns the view's shard and handle.
func startView(t *testing.T, ctx context.Context, p *persist.Client, input string, m MFP) (string, *Handle) {
	t.Helper()
	out := persist.NewShardID()
	if _, err := p.CreateShard(ctx, out, schema); err != nil {
		t.Fatal(err)
	}
	w, err := p.OpenWriter(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	v := NewView(ViewConfig{Persist: p, Storage: writerStorage{w}, Name: "v", Input: input, Shard: out,
		MFP: func() MFP { return m }})
	h := Start(ctx, slog.Default(), "v", v)
	t.Cleanup(h.Stop)
	return out, h
}

// viewAt waits for the view's upper to pass asOf and returns its keys at
// asOf, consolidated.
func viewAt(t *testing.T, ctx context.Context, p *persist.Client, shard string, asOf uint64) []int64 {
	t.Helper()
	if _, err := p.WaitForUpper(ctx, shard, asOf); err != nil {
		t.Fatal(err)
	}
	r, err := p.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := snapshot(ctx, r, asOf, nil)
	if err != nil {
		t.Fatal(err)
	}
	var keys []int64
	for _, u := range row.Consolidate(got) {
		for range u.Diff {
			keys = append(keys, u.Row[0].(int64))
		}
	}
	return keys
}

// TestViewFollowsInput: a view starts at the input's latest time, with the
// input's contents there mapped, then follows its batches.
func TestViewFollowsInput(t *testing.T) {
	ctx, p, shard, w := setup(t)
	if err := w.CompareAndAppend(ctx, ups(0, 1, 2, 3, 4), 0, 1); err != nil {
		t.Fatal(err)
	}
	view, _ := startView(t, ctx, p, shard, evens{})
	if got, want := viewAt(t, ctx, p, view, 0), []int64{4, 8}; !reflect.DeepEqual(got, want) {
		t.Fatalf("view at 0: got %v, want %v", got, want)
	}
	for i := uint64(1); i < 4; i++ {
		if err := w.CompareAndAppend(ctx, ups(i, int64(10+i)), i, i+1); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := viewAt(t, ctx, p, view, 3), []int64{4, 8, 24}; !reflect.DeepEqual(got, want) {
		t.Fatalf("view at 3: got %v, want %v", got, want)
	}
}

// TestViewStallsUntilRetracted: a row the view cannot evaluate stalls it
// with the error; retracting the row resumes it, correct from there.
func TestViewStallsUntilRetracted(t *testing.T) {
	ctx, p, shard, w := setup(t)
	if err := w.CompareAndAppend(ctx, ups(0, 2), 0, 1); err != nil {
		t.Fatal(err)
	}
	view, h := startView(t, ctx, p, shard, evensOr13Fails{})
	viewAt(t, ctx, p, view, 0)
	if err := w.CompareAndAppend(ctx, ups(1, 13, 4), 1, 2); err != nil {
		t.Fatal(err)
	}
	// The input moves on; the view does not, and says why.
	if err := w.CompareAndAppend(ctx, ups(2, 6), 2, 3); err != nil {
		t.Fatal(err)
	}
	for !errors.Is(h.Stalled(), errBadRow) {
		select {
		case <-ctx.Done():
			t.Fatalf("view never reported the bad row: Stalled() = %v", h.Stalled())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if st, err := p.State(ctx, view); err != nil || st.Upper != 1 {
		t.Fatalf("stalled view's upper: %v, %v; want 1", st, err)
	}
	retract := []row.Update{{Row: row.Row{int64(13)}, T: 3, Diff: -1}}
	if err := w.CompareAndAppend(ctx, retract, 3, 4); err != nil {
		t.Fatal(err)
	}
	if got, want := viewAt(t, ctx, p, view, 3), []int64{4, 8, 12}; !reflect.DeepEqual(got, want) {
		t.Fatalf("view at 3: got %v, want %v", got, want)
	}
	if err := h.Stalled(); err != nil {
		t.Fatalf("resumed view still reports %v", err)
	}
}
