package codec

import (
	"errors"
	"io"
	"testing"

	"github.com/shardtail/shardtail/row"
)

// readColumns reads every batch of a part with NextColumns and returns
// the updates DecodeColumns makes of them, checking that each value read
// with row.Vec.Datum is the same as the decoded one.
func readColumns(t *testing.T, c Config, s row.Schema, data []byte) ([]row.Update, error) {
	t.Helper()
	r, err := c.NewPartReader(s, data)
	if err != nil {
		return nil, err
	}
	var out []row.Update
	for {
		cols, err := r.NextColumns()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		us := DecodeColumns(cols)
		for j, u := range us {
			if u.T != cols.T {
				t.Fatalf("update %d at %d, columns at %d", j, u.T, cols.T)
			}
			for i := range cols.Vecs {
				if got := cols.Vecs[i].Datum(cols.Off + j); !sameDatum(got, u.Row[i]) {
					t.Fatalf("row %d column %d: Vec.Datum %#v, decoded %#v", j, i, got, u.Row[i])
				}
			}
		}
		out = append(out, us...)
	}
}

// TestNextColumns: a part read as columns gives back the updates written,
// for every type, with and without NULLs, in one batch or many, with a
// first column that orders the rows on its own (integers, whose order
// checkOrder trusts) or not.
func TestNextColumns(t *testing.T) {
	for _, typ := range allTypes {
		for _, nullable := range []bool{false, true} {
			name := typeTokens[typ]
			if nullable {
				name += "Null"
			}
			t.Run(name, func(t *testing.T) {
				s := row.Schema{Columns: []row.Column{{Name: "v", Type: typ, Nullable: nullable}, {Name: "k", Type: row.TypeInt4}}}
				vals := edgeValues(typ)
				if nullable {
					vals = append(vals, nil)
				}
				var us []row.Update
				for i, v := range vals {
					us = append(us, row.Update{Row: row.Row{v, int32(i)}, T: 5, Diff: int64(i) - 2 + int64(b2i(i == 2))})
				}
				us = row.Consolidate(us)
				for _, c := range []Config{{}, {BatchRows: 2}} {
					data, _, err := c.EncodePart(s, us)
					if err != nil {
						t.Fatal(err)
					}
					got, err := readColumns(t, c, s, data)
					if err != nil {
						t.Fatalf("BatchRows %d: %v", c.BatchRows, err)
					}
					if err := diffUpdates(us, got); err != nil {
						t.Fatalf("BatchRows %d: %v", c.BatchRows, err)
					}
				}
			})
		}
	}
}

// TestNextColumnsAllTypesOwnMemory: columns of every type survive the
// part's bytes being overwritten (a cursor keeps them after it gives the
// part back), whether a buffer was stored compressed (many rows) or not
// (few).
func TestNextColumnsAllTypesOwnMemory(t *testing.T) {
	s := allTypesSchema(true)
	for _, n := range []int{3, 3000} {
		var us []row.Update
		for i := range n {
			r := make(row.Row, len(s.Columns))
			if i > 0 {
				for ci, c := range s.Columns {
					vals := edgeValues(c.Type)
					r[ci] = vals[(i+ci)%len(vals)]
				}
				r[1] = int16(i) // distinct rows
			}
			us = append(us, row.Update{Row: r, T: 9, Diff: int64(i + 1)})
		}
		us = row.Consolidate(us)
		data := encode(t, s, us)
		r, err := NewPartReader(s, data)
		if err != nil {
			t.Fatal(err)
		}
		var batches []*row.Columns
		for {
			cols, err := r.NextColumns()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			batches = append(batches, cols)
		}
		clear(data)
		var got []row.Update
		for _, cols := range batches {
			got = append(got, DecodeColumns(cols)...)
		}
		if err := diffUpdates(us, got); err != nil {
			t.Fatalf("%d rows: %v", n, err)
		}
	}
}

// TestNextColumnsRejectsBadBatches: what Next refuses, NextColumns
// refuses too, and a batch at more than one time, which it cannot carry.
func TestNextColumnsRejectsBadBatches(t *testing.T) {
	s := row.Schema{Columns: []row.Column{{Name: "k", Type: row.TypeInt8}}}
	txt := row.Schema{Columns: []row.Column{{Name: "s", Type: row.TypeText}}}
	for _, tc := range []struct {
		name    string
		s       row.Schema
		batches [][]row.Update
	}{
		{"TwoTimes", s, [][]row.Update{{{Row: row.Row{int64(5)}, T: 1, Diff: 1}, {Row: row.Row{int64(6)}, T: 2, Diff: 1}}}},
		{"AcrossBatches", s, [][]row.Update{
			{{Row: row.Row{int64(5)}, T: 1, Diff: 1}, {Row: row.Row{int64(6)}, T: 1, Diff: 1}},
			{{Row: row.Row{int64(6)}, T: 1, Diff: 1}, {Row: row.Row{int64(7)}, T: 1, Diff: 1}},
		}},
		{"Within", s, [][]row.Update{{{Row: row.Row{int64(6)}, T: 1, Diff: 1}, {Row: row.Row{int64(5)}, T: 1, Diff: 1}}}},
		{"WithinText", txt, [][]row.Update{{{Row: row.Row{"b"}, T: 1, Diff: 1}, {Row: row.Row{"a"}, T: 1, Diff: 1}}}},
		{"ZeroDiff", s, [][]row.Update{{{Row: row.Row{int64(6)}, T: 1, Diff: 0}}}},
		{"InvalidUTF8", txt, [][]row.Update{{{Row: row.Row{"\xc3\x28"}, T: 1, Diff: 1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := encodeBatchesUnchecked(t, tc.s, tc.batches)
			if _, err := readColumns(t, Config{}, tc.s, data); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
}
