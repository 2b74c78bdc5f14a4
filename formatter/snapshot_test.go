package formatter

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/shardtail/shardtail/row"
)

// snapshotRows feeds a snapshot to a fresh batcher in chunks of size n (as
// a persist cursor does: row order, each row in one chunk) and returns its
// data rows and the rows each Snapshot call returned.
func snapshotRows(t *testing.T, opts *Options, updates []row.Update, n int) (rows []Row, perChunk [][]Row) {
	t.Helper()
	b := NewBatcher(opts, 5, nil)
	for i := 0; i < len(updates); i += n {
		got, err := b.Snapshot(updates[i:min(i+n, len(updates))])
		if err != nil {
			t.Fatal(err)
		}
		perChunk = append(perChunk, got)
		rows = append(rows, got...)
	}
	for _, r := range b.SnapshotDone() {
		if !r.Progressed {
			rows = append(rows, r)
		}
	}
	if b.Buffered() != 0 {
		t.Fatalf("Buffered() = %d after SnapshotDone, want 0", b.Buffered())
	}
	return rows, perChunk
}

// sortedSnapshot returns updates at time 5 sorted by row, as a snapshot
// cursor yields them.
func sortedSnapshot(us []row.Update) []row.Update {
	us = row.Consolidate(us)
	slices.SortFunc(us, func(a, b row.Update) int { return row.Compare(a.Row, b.Row) })
	return us
}

// TestSnapshotOrderSeesWholeTimestamp: WITHIN TIMESTAMP ORDER BY a DESC
// over a snapshot of three chunks is one sorted run, not three.
func TestSnapshotOrderSeesWholeTimestamp(t *testing.T) {
	var us []row.Update
	for i := range 20000 {
		us = append(us, u(int32(i), "x", int64(i), 5, 1))
	}
	us = sortedSnapshot(us)
	opts := &Options{Relation: t3, Order: []OrderItem{{Col: 1, Desc: true, NullsFirst: true}}}
	rows, perChunk := snapshotRows(t, opts, us, 8192)
	if len(rows) != 20000 {
		t.Fatalf("got %d rows, want 20000", len(rows))
	}
	for i, r := range rows {
		if got, want := r.Tail[1].(int32), int32(19999-i); got != want {
			t.Fatalf("row %d: a = %d, want %d (not one sorted run)", i, got, want)
		}
	}
	for i, c := range perChunk {
		if len(c) != 0 {
			t.Fatalf("chunk %d emitted %d rows before the snapshot was whole", i, len(c))
		}
	}
}

// TestSnapshotEnvelopeSeesWholeTimestamp: 9,000 inserts of one key over
// two chunks make one key_violation, with the key leading the row or not.
func TestSnapshotEnvelopeSeesWholeTimestamp(t *testing.T) {
	var us []row.Update
	for i := range 9000 {
		us = append(us, u(7, fmt.Sprintf("v%05d", i), int64(i), 5, 1))
	}
	us = sortedSnapshot(us)
	for _, tc := range []struct {
		name string
		keys []int
	}{{"KeyLeads", []int{0}}, {"KeyInside", []int{2}}} {
		t.Run(tc.name, func(t *testing.T) {
			// KeyInside: key c differs per row, so each row is its own
			// upsert; KeyLeads: one key a = 7.
			opts := &Options{Relation: t3, Envelope: EnvelopeUpsert, Keys: tc.keys}
			rows, _ := snapshotRows(t, opts, us, 8192)
			if tc.name == "KeyInside" {
				if len(rows) != 9000 {
					t.Fatalf("got %d rows, want 9000", len(rows))
				}
				return
			}
			if got, want := render(rows), "5 key_violation 7 NULL NULL\n"; got != want {
				t.Fatalf("got:\n%swant:\n%s", got, want)
			}
		})
	}
}

// TestSnapshotStreamsInRowOrder: shapes whose order the row order already
// serves emit each chunk's final rows at once.
func TestSnapshotStreamsInRowOrder(t *testing.T) {
	notNull := row.Schema{Columns: []row.Column{{Name: "a", Type: row.TypeInt4}, {Name: "b", Type: row.TypeText, Nullable: true}, {Name: "c", Type: row.TypeInt8}}}
	for _, tc := range []struct {
		name    string
		opts    Options
		streams bool
	}{
		{"Plain", Options{Relation: t3}, true},
		{"OrderByLeadingAsc", Options{Relation: notNull, Order: []OrderItem{{Col: 1}, {Col: 2, NullsFirst: true}}}, true},
		{"OrderByLeadingNullsFirst", Options{Relation: t3, Order: []OrderItem{{Col: 1, NullsFirst: true}}}, true},
		// t3.a is nullable and ASC puts NULLs last; the row order first.
		{"OrderByLeadingNullsLast", Options{Relation: t3, Order: []OrderItem{{Col: 1}}}, false},
		{"OrderByDesc", Options{Relation: notNull, Order: []OrderItem{{Col: 1, Desc: true}}}, false},
		{"OrderBySecond", Options{Relation: notNull, Order: []OrderItem{{Col: 2}}}, false},
		{"OrderByDiff", Options{Relation: notNull, Order: []OrderItem{{Col: 0}}}, false},
		{"UpsertKeyLeads", Options{Relation: t3, Envelope: EnvelopeUpsert, Keys: []int{0}}, true},
		{"UpsertKeysLead", Options{Relation: t3, Envelope: EnvelopeDebezium, Keys: []int{0, 1}}, true},
		{"UpsertKeysLeadOutOfOrder", Options{Relation: t3, Envelope: EnvelopeUpsert, Keys: []int{1, 0}}, false},
		{"UpsertKeyInside", Options{Relation: t3, Envelope: EnvelopeUpsert, Keys: []int{2}}, false},
		{"UpsertOrderByValue", Options{Relation: notNull, Envelope: EnvelopeUpsert, Keys: []int{0}, Order: []OrderItem{{Col: 2}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var us []row.Update
			for i := range 100 {
				us = append(us, u(int32(i/3), fmt.Sprint(i%3), int64(i), 5, 1))
			}
			_, perChunk := snapshotRows(t, &tc.opts, sortedSnapshot(us), 10)
			if got := len(perChunk[0]) > 0; got != tc.streams {
				t.Fatalf("first chunk emitted %d rows; streams = %v, want %v", len(perChunk[0]), got, tc.streams)
			}
		})
	}
}

// TestSnapshotChunksModel: for random shapes and snapshots cut into random
// chunks, the batcher's output is Data of the whole snapshot.
func TestSnapshotChunksModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randDatum := func(col int) row.Datum {
		if col < 2 && rng.IntN(8) == 0 {
			return nil // a and b are nullable
		}
		switch col {
		case 0:
			return int32(rng.IntN(4))
		case 1:
			return fmt.Sprint(rng.IntN(4))
		}
		return int64(rng.IntN(4))
	}
	for iter := range 500 {
		var us []row.Update
		for range rng.IntN(60) {
			diffs := []int64{1, 1, 1, -1, 2}
			us = append(us, row.Update{Row: row.Row{randDatum(0), randDatum(1), randDatum(2)}, T: 5, Diff: diffs[rng.IntN(len(diffs))]})
		}
		us = sortedSnapshot(us)
		opts := Options{Relation: t3}
		switch rng.IntN(3) {
		case 1:
			opts.Envelope = EnvelopeUpsert
		case 2:
			opts.Envelope = EnvelopeDebezium
		}
		if opts.Envelope != EnvelopeNone {
			opts.Keys = [][]int{{0}, {0, 1}, {1}, {2}, {1, 0}}[rng.IntN(5)]
		}
		width := len(opts.Columns()) - 1
		for range rng.IntN(3) {
			opts.Order = append(opts.Order, OrderItem{Col: rng.IntN(width), Desc: rng.IntN(3) == 0, NullsFirst: rng.IntN(2) == 0})
		}
		want := render(opts.Data(5, us))
		got, _ := snapshotRows(t, &opts, us, 1+rng.IntN(8))
		if render(got) != want {
			t.Fatalf("iteration %d, options %+v:\ngot:\n%swant:\n%s", iter, opts, render(got), want)
		}
	}
}

// TestSnapshotBufferLimit: what a shape holds back counts against
// SetMaxBuffered; plain output holds nothing back.
func TestSnapshotBufferLimit(t *testing.T) {
	var us []row.Update
	for i := range 1000 {
		us = append(us, u(int32(i), "x", int64(i), 5, 1))
	}
	us = sortedSnapshot(us)
	for _, tc := range []struct {
		name string
		opts Options
		fail bool
	}{
		{"Plain", Options{Relation: t3}, false},
		{"OrderDesc", Options{Relation: t3, Order: []OrderItem{{Col: 1, Desc: true}}}, true},
		{"UpsertKeyLeads", Options{Relation: t3, Envelope: EnvelopeUpsert, Keys: []int{0}}, false},
		{"UpsertKeyInside", Options{Relation: t3, Envelope: EnvelopeUpsert, Keys: []int{1}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBatcher(&tc.opts, 5, nil)
			b.SetMaxBuffered(10 * us[0].Size())
			var err error
			for i := 0; i < len(us) && err == nil; i += 8 {
				_, err = b.Snapshot(us[i:min(i+8, len(us))])
			}
			var rs *ResultSizeError
			if got := errors.As(err, &rs); got != tc.fail {
				t.Fatalf("got error %v, want failure %v", err, tc.fail)
			}
			if tc.fail && (rs.Max != 10*us[0].Size() || rs.SQLState() != "53200") {
				t.Fatalf("got %+v (%s)", rs, rs.SQLState())
			}
		})
	}
}
