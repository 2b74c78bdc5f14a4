package dataflow

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/subscribe"
)

var schema = row.Schema{Columns: []row.Column{{Name: "k", Type: row.TypeInt8}}}

// evens is an MFP that keeps even keys and doubles them.
type evens struct{}

func (evens) Apply(r row.Row) (row.Row, bool, error) {
	k := r[0].(int64)
	return row.Row{k * 2}, k%2 == 0, nil
}

func setup(t *testing.T) (context.Context, *persist.Client, string, *persist.Writer) {
	t.Helper()
	return setupWith(t, consmem.New(), persist.Config{PollInterval: 10 * time.Millisecond, ReaderHeartbeat: -1})
}

// setupWith is setup on the given consensus and persist config.
func setupWith(t *testing.T, cons persist.Consensus, cfg persist.Config) (context.Context, *persist.Client, string, *persist.Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	p, err := persist.NewClient(blobmem.New(), cons, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	shard := persist.NewShardID()
	if _, err := p.CreateShard(ctx, shard, schema); err != nil {
		t.Fatal(err)
	}
	w, err := p.OpenWriter(ctx, shard)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, p, shard, w
}

func ups(t uint64, ks ...int64) []row.Update {
	var out []row.Update
	for _, k := range ks {
		out = append(out, row.Update{Row: row.Row{k}, T: t, Diff: 1})
	}
	return out
}

// TestSubscribeMFPAndUpTo: the pipeline maps and filters the snapshot and
// the listen, and completes at UP TO.
func TestSubscribeMFPAndUpTo(t *testing.T) {
	ctx, p, shard, w := setup(t)
	if err := w.CompareAndAppend(ctx, ups(0, 1, 2, 3, 4), 0, 1); err != nil {
		t.Fatal(err)
	}
	upTo := uint64(3)
	s := StartSubscribe(SubscribeConfig{Persist: p, MFP: evens{}, Request: subscribe.Request{Shard: shard, AsOf: 0, UpTo: &upTo, Snapshot: true,
		Output: &formatter.Options{Relation: schema}}})
	defer s.Close()
	for i := uint64(1); i < 4; i++ {
		if err := w.CompareAndAppend(ctx, ups(i, int64(10+i)), i, i+1); err != nil {
			t.Fatal(err)
		}
	}
	got := drainRows(t, ctx, s)
	want := []string{"0 1 4", "0 1 8", "2 1 24"} // keys 2, 4 doubled; then 12 at t=2; 11 and 13 are odd; t=3 is UP TO
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// drainRows reads s to its end (UP TO) and returns its rows as formatRow
// prints them.
func drainRows(t *testing.T, ctx context.Context, s *Subscribe) []string {
	t.Helper()
	var got []string
	for {
		rows, err := s.Next(ctx, 0)
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			got = append(got, formatRow(r))
		}
	}
}

func formatRow(r formatter.Row) string {
	s := ""
	for i, d := range append(row.Row{int64(r.Time)}, r.Tail...) {
		if i > 0 {
			s += " "
		}
		s += itoa(d.(int64))
	}
	return s
}

func itoa(v int64) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for v > 0 {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
	}
	return string(b)
}

// TestSubscribeBudget: a client that does not read ends with the 53200
// BufferError once its backlog passes the budget; the pipeline stops.
func TestSubscribeBudget(t *testing.T) {
	ctx, p, shard, w := setup(t)
	if err := w.CompareAndAppend(ctx, nil, 0, 1); err != nil {
		t.Fatal(err)
	}
	s := StartSubscribe(SubscribeConfig{Persist: p, Request: subscribe.Request{Shard: shard, AsOf: 0, Snapshot: true, MaxBufferedBytes: 1000,
		Output: &formatter.Options{Relation: schema, Progress: true}}})
	defer s.Close()
	for i := uint64(1); i < 50; i++ {
		if err := w.CompareAndAppend(ctx, ups(i, int64(i)), i, i+1); err != nil {
			t.Fatal(err)
		}
	}
	for {
		_, err := s.Next(ctx, 1)
		var be *subscribe.BufferError
		if errors.As(err, &be) {
			if be.SQLState() != "53200" || be.Max != 1000 || be.Buffered <= 1000 {
				t.Fatalf("BufferError %+v", be)
			}
			if got := be.Detail(); got != subscribe.DetailFellBehind {
				t.Fatalf("detail %q, want %q: the private reader still holds the position", got, subscribe.DetailFellBehind)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // a slow reader: it falls behind
	}
}

// TestSubscribeAsOfAtLeast: a subscribe whose AS OF was compacted away
// before its reader registered starts at the reader's since when it may
// (no AS OF in the statement, or AT LEAST), and fails otherwise.
func TestSubscribeAsOfAtLeast(t *testing.T) {
	ctx, p, shard, w := setup(t)
	for i := uint64(0); i < 5; i++ {
		if err := w.CompareAndAppend(ctx, ups(i, int64(i)), i, i+1); err != nil {
			t.Fatal(err)
		}
	}
	policy, err := p.OpenReader(ctx, shard, persist.ReaderOptions{Critical: true})
	if err != nil {
		t.Fatal(err)
	}
	defer policy.Close()
	if err := policy.Downgrade(ctx, 3); err != nil {
		t.Fatal(err)
	}
	upTo := uint64(4)
	start := func(atLeast bool) *Subscribe {
		return StartSubscribe(SubscribeConfig{Persist: p, Request: subscribe.Request{Shard: shard, AsOf: 1, AsOfAtLeast: atLeast, UpTo: &upTo, Snapshot: true,
			Output: &formatter.Options{Relation: schema}}})
	}
	s := start(true)
	defer s.Close()
	got := drainRows(t, ctx, s)
	if want := []string{"3 1 0", "3 1 1", "3 1 2", "3 1 3"}; !slices.Equal(got, want) {
		t.Fatalf("AT LEAST: got %v, want the snapshot at since 3: %v", got, want)
	}
	exact := start(false)
	defer exact.Close()
	for {
		_, err := exact.Next(ctx, 0)
		if errors.Is(err, persist.ErrSinceAdvanced) {
			break
		}
		if err != nil {
			t.Fatalf("exact AS OF below since: %v, want ErrSinceAdvanced", err)
		}
	}
}
