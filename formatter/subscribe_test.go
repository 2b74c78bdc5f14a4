package formatter

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/shardtail/shardtail/row"
)

var t3 = row.Schema{Columns: []row.Column{
	{Name: "a", Type: row.TypeInt4, Nullable: true},
	{Name: "b", Type: row.TypeText, Nullable: true},
	{Name: "c", Type: row.TypeInt8},
}}

func u(a int32, b string, c int64, t uint64, d int64) row.Update {
	return row.Update{Row: row.Row{a, b, c}, T: t, Diff: d}
}

// render prints rows the way the conformance scripts do.
func render(rows []Row) string {
	var sb strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&sb, "%d", r.Time)
		if r.Progressed {
			sb.WriteString(" progress\n")
			continue
		}
		for _, d := range r.Tail {
			if d == nil {
				sb.WriteString(" NULL")
			} else {
				fmt.Fprintf(&sb, " %v", d)
			}
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

func TestColumns(t *testing.T) {
	names := func(o Options) string {
		var out []string
		for _, c := range o.Columns() {
			out = append(out, c.Name)
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Relation: t3}, "mz_timestamp mz_diff a b c"},
		{Options{Relation: t3, Progress: true}, "mz_timestamp mz_progressed mz_diff a b c"},
		{Options{Relation: t3, Envelope: EnvelopeUpsert, Keys: []int{2}}, "mz_timestamp mz_state c a b"},
		// The spec's example: t2(a,b,c) ENVELOPE DEBEZIUM (KEY (c, b)).
		{Options{Relation: t3, Envelope: EnvelopeDebezium, Keys: []int{2, 1}}, "mz_timestamp mz_state c b before_a after_a"},
	} {
		if got := names(tc.opts); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	cols := (&Options{Relation: t3, Progress: true}).Columns()
	if cols[0].Nullable || cols[1].Nullable || !cols[4].Nullable {
		t.Errorf("nullability with PROGRESS: %+v", cols)
	}
}

func TestBatcher(t *testing.T) {
	upTo := uint64(9)
	for _, tc := range []struct {
		name string
		opts Options
		upTo *uint64
		want string
	}{
		{"Plain", Options{Relation: t3}, nil, `
5 2 1 x 10
5 1 2 y 20
6 -1 1 x 10
7 1 3 z 30
9 1 4 w 40
`},
		{"Progress", Options{Relation: t3, Progress: true}, nil, `
5 progress
5 2 1 x 10
5 1 2 y 20
6 progress
6 -1 1 x 10
7 progress
7 1 3 z 30
8 progress
9 1 4 w 40
10 progress
`},
		{"UpTo", Options{Relation: t3, Progress: true}, &upTo, `
5 progress
5 2 1 x 10
5 1 2 y 20
6 progress
6 -1 1 x 10
7 progress
7 1 3 z 30
8 progress
`},
		{"OrderByDiff", Options{Relation: t3, Order: []OrderItem{{Col: 0}}}, nil, `
5 1 2 y 20
5 2 1 x 10
6 -1 1 x 10
7 1 3 z 30
9 1 4 w 40
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBatcher(&tc.opts, 5, tc.upTo)
			var rows []Row
			rows = append(rows, b.Start()...)
			snap, err := b.Snapshot([]row.Update{u(1, "x", 10, 5, 2), u(2, "y", 20, 5, 1)})
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, snap...)
			rows = append(rows, b.SnapshotDone()...)
			rows = append(rows, b.Batch([]row.Update{u(1, "x", 10, 6, -1)}, 7)...)
			rows = append(rows, b.Batch([]row.Update{u(3, "z", 30, 7, 1)}, 8)...)
			rows = append(rows, b.Batch([]row.Update{u(4, "w", 40, 9, 1)}, 10)...)
			if got := render(rows); got != strings.TrimPrefix(tc.want, "\n") {
				t.Fatalf("got:\n%swant:%s", got, tc.want)
			}
			if tc.upTo != nil && !b.Done() {
				t.Fatal("not done after UP TO")
			}
		})
	}
	t.Run("AsOfMax", func(t *testing.T) {
		// The largest mz_timestamp is a valid AS OF: its snapshot is
		// stamped with it and no progress follows (nothing is later).
		b := NewBatcher(&Options{Relation: t3, Progress: true}, math.MaxUint64, nil)
		snap, err := b.Snapshot([]row.Update{u(1, "x", 1, math.MaxUint64, 1)})
		if err != nil {
			t.Fatal(err)
		}
		rows := append(append(b.Start(), snap...), b.SnapshotDone()...)
		want := "18446744073709551615 progress\n18446744073709551615 1 1 x 1\n"
		if got := render(rows); got != want || b.Frontier() != math.MaxUint64 || b.Done() {
			t.Fatalf("got:\n%s(frontier %d, done %v), want:\n%s(frontier max, not done)", got, b.Frontier(), b.Done(), want)
		}
	})
	t.Run("AsOfEqualsUpTo", func(t *testing.T) {
		five := uint64(5)
		b := NewBatcher(&Options{Relation: t3, Progress: true}, 5, &five)
		snap, err := b.Snapshot([]row.Update{u(1, "x", 1, 5, 1)})
		if rows := append(b.Start(), snap...); err != nil || len(rows) != 0 || !b.Done() {
			t.Fatalf("AS OF = UP TO: rows %v, done %v", rows, b.Done())
		}
	})
}

func TestEnvelopes(t *testing.T) {
	updates := []row.Update{
		u(1, "new", 1, 5, 1),  // key 1: insert
		u(2, "old", 2, 5, -1), // key 2: delete
		u(3, "old", 3, 5, -1), // key 3: update
		u(3, "new", 3, 5, 1),
		u(4, "a", 4, 5, 1), // key 4: two inserts
		u(4, "b", 4, 5, 1),
		u(5, "x", 5, 5, 2), // key 5: +2
	}
	up := Options{Relation: t3, Envelope: EnvelopeUpsert, Keys: []int{0}}
	if got, want := render(up.Data(5, updates)), `5 upsert 1 new 1
5 delete 2 NULL NULL
5 upsert 3 new 3
5 key_violation 4 NULL NULL
5 key_violation 5 NULL NULL
`; got != want {
		t.Errorf("upsert:\n%swant:\n%s", got, want)
	}
	dbz := Options{Relation: t3, Envelope: EnvelopeDebezium, Keys: []int{0}}
	if got, want := render(dbz.Data(5, updates)), `5 insert 1 NULL NULL new 1
5 delete 2 old 2 NULL NULL
5 upsert 3 old 3 new 3
5 key_violation 4 NULL NULL NULL NULL
5 key_violation 5 NULL NULL NULL NULL
`; got != want {
		t.Errorf("debezium:\n%swant:\n%s", got, want)
	}
	if !reflect.DeepEqual(up.Data(5, nil), []Row(nil)) {
		t.Error("no updates should give no rows")
	}
}

// TestBatchRowsMatchesGroups: a batcher for which Whole holds gets from
// BatchRows what Groups would have returned it (the list a shared tail
// hands every subscriber at that point), with and without PROGRESS, for a
// batch of several times, one whose last time ends at its frontier, and
// one of progress only; Whole refuses a batcher past the batch's start,
// at UP TO, or already at the frontier.
func TestBatchRowsMatchesGroups(t *testing.T) {
	for _, progress := range []bool{true, false} {
		opts := &Options{Relation: t3, Progress: progress}
		for _, tc := range []struct {
			name     string
			updates  []row.Update
			frontier uint64
		}{
			{"times", []row.Update{u(1, "x", 10, 6, 1), u(2, "y", 20, 6, 1), u(1, "x", 10, 8, -1)}, 12},
			{"LastTimeEndsIt", []row.Update{u(3, "z", 30, 7, 1)}, 8},
			{"ProgressOnly", nil, 9},
		} {
			groups := opts.Format(tc.updates)
			want := NewBatcher(opts, 5, nil).Groups(groups, tc.frontier)
			b := NewBatcher(opts, 5, nil)
			if !b.Whole(groups, tc.frontier) {
				t.Fatalf("progress %v, %s: Whole refused a fresh batcher", progress, tc.name)
			}
			if got := opts.BatchRows(groups, tc.frontier); render(got) != render(want) || len(got) != cap(got) {
				t.Errorf("progress %v, %s: BatchRows\n%s(cap %d)\nwant Groups's\n%s", progress, tc.name, render(got), cap(got), render(want))
			}
			if got := b.Frontier(); got != tc.frontier {
				t.Errorf("progress %v, %s: Whole left the frontier at %d, want %d", progress, tc.name, got, tc.frontier)
			}
			if b.Whole(groups, tc.frontier) {
				t.Errorf("progress %v, %s: Whole took the same batch twice", progress, tc.name)
			}
		}
		upTo := uint64(8)
		if NewBatcher(opts, 5, &upTo).Whole(opts.Format([]row.Update{u(1, "x", 10, 6, 1)}), 9) {
			t.Errorf("progress %v: Whole took a batch past UP TO", progress)
		}
	}
}

// TestBatcherProgress: Progress reports what Groups(nil, frontier) does
// (a progress row when the frontier moves, none once UP TO is reached,
// none without PROGRESS), with the shared row given, not a copy.
func TestBatcherProgress(t *testing.T) {
	upTo := uint64(7)
	for _, progress := range []bool{true, false} {
		opts := &Options{Relation: t3, Progress: progress}
		want, got := NewBatcher(opts, 2, &upTo), NewBatcher(opts, 2, &upTo)
		for _, f := range []uint64{3, 3, 5, 4, 6, 8, 9} {
			shared := Shared([]Row{opts.ProgressRow(f)})
			w, g := want.Groups(nil, f), got.Progress(f, shared)
			if progressRows(w) != progressRows(g) || want.Frontier() != got.Frontier() || want.Done() != got.Done() {
				t.Errorf("progress %v, frontier %d: got %v (frontier %d, done %v), want %v (frontier %d, done %v)",
					progress, f, progressRows(g), got.Frontier(), got.Done(), progressRows(w), want.Frontier(), want.Done())
			}
			if len(g) > 0 && &g[0] != &shared[0] {
				t.Errorf("progress %v, frontier %d: a copy of the shared row", progress, f)
			}
		}
	}
}

// TestBatcherLive: below the time the subscribe went live, a batch closes
// with no progress row of its own, whichever way it is delivered (Batch,
// Progress, Whole); the rows' per-timestamp progress rows still follow
// them, and the frontier moves. From the live time on, every batch's
// frontier is reported again.
func TestBatcherLive(t *testing.T) {
	opts := &Options{Relation: t3, Progress: true}
	b := NewBatcher(opts, 5, nil)
	b.SetLive(20)
	rows := append(b.Start(), b.SnapshotDone()...)
	rows = append(rows, b.Batch([]row.Update{u(1, "x", 10, 7, 1)}, 9)...)
	rows = append(rows, b.Batch(nil, 12)...)
	rows = append(rows, b.Progress(14, Shared([]Row{opts.ProgressRow(14)}))...)
	groups := opts.Format([]row.Update{u(2, "y", 20, 15, 1)})
	if b.Whole(groups, 17) {
		t.Fatal("Whole below the live time")
	}
	rows = append(rows, b.Groups(groups, 17)...)
	if b.Frontier() != 17 {
		t.Fatalf("frontier %d after the batches below the live time, want 17", b.Frontier())
	}
	rows = append(rows, b.Batch([]row.Update{u(3, "z", 30, 18, 1)}, 21)...)
	rows = append(rows, b.Progress(22, Shared([]Row{opts.ProgressRow(22)}))...)
	want := `5 progress
6 progress
7 1 1 x 10
8 progress
15 1 2 y 20
16 progress
18 1 3 z 30
19 progress
21 progress
22 progress
`
	if got := render(rows); got != want {
		t.Fatalf("got:\n%swant:\n%s", got, want)
	}
}

// progressRows renders rows that are progress rows, or says which is not.
func progressRows(rows []Row) string {
	var out []string
	for i, r := range rows {
		if !r.Progressed || len(r.Tail) > 0 {
			return fmt.Sprintf("row %d is not a progress row", i)
		}
		out = append(out, fmt.Sprintf("%d progress", r.Time))
	}
	return fmt.Sprint(out)
}

// TestRowSize: a snapshot piece costs a Row per row, kept as long as the
// piece: at most 48 bytes (it was 56 on 64-bit platforms with idx an
// int before Tail).
func TestRowSize(t *testing.T) {
	if got := unsafe.Sizeof(Row{}); got > 48 {
		t.Errorf("a Row is %d bytes, want at most 48", got)
	}
}
