package pgrepr_test

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/shardtail/shardtail/persist/codec"
	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/row"
)

// TestAppendVecCopyTextMatchesDatums: a vector's value in COPY text is
// the bytes AppendCopyTextField makes of its datum, for every type (the
// text and integer types take a path of their own), NULLs, values that
// need escapes, and delimiters that can and cannot appear in a number.
func TestAppendVecCopyTextMatchesDatums(t *testing.T) {
	schema := row.Schema{Columns: []row.Column{
		{Name: "i2", Type: row.TypeInt2, Nullable: true},
		{Name: "i4", Type: row.TypeInt4, Nullable: true},
		{Name: "i8", Type: row.TypeInt8, Nullable: true},
		{Name: "t", Type: row.TypeText, Nullable: true},
		{Name: "n", Type: row.TypeNumeric, Nullable: true},
		{Name: "f8", Type: row.TypeFloat8, Nullable: true},
		{Name: "b", Type: row.TypeBytea, Nullable: true},
	}}
	texts := []string{"", "plain", "tab\there", "back\\slash", "new\nline\r", "-12|a,1", "é\x01\x0b", "\\N"}
	ints := []int64{0, 1, -1, 7, -12, math.MaxInt16, math.MinInt16}
	var updates []row.Update
	for i := range 40 {
		r := row.Row{int16(ints[i%len(ints)]), int32(ints[(i+1)%len(ints)]) * 1000, ints[(i+2)%len(ints)] * 1_000_000_007,
			texts[i%len(texts)], row.Numeric(fmt.Sprintf("-%d.5", i)), float64(i) / 3, []byte{byte(i), '\t'}}
		if i%5 == 3 {
			for c := range r {
				r[c] = nil
			}
		}
		r[2] = int64(i) // distinct rows: the first column orders nothing
		updates = append(updates, row.Update{Row: r, T: 1, Diff: 1})
	}
	slices.SortFunc(updates, row.CompareUpdate)
	data, _, err := codec.EncodePart(schema, updates)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := codec.NewPartReader(schema, data)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := pr.NextColumns()
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []pgrepr.TextOptions{pgrepr.DefaultTextOptions(), {Delimiter: '|', Null: "nil"},
		{Delimiter: '1', Null: ""}, {Delimiter: '-', Null: `\N`}, {Delimiter: 'a', Null: "x"}} {
		for c := range cols.Vecs {
			v := &cols.Vecs[c]
			for j := range cols.Len {
				got := pgrepr.AppendVecCopyText([]byte("pre"), v, j, &opts)
				want := pgrepr.AppendCopyTextField([]byte("pre"), v.Type, v.Datum(j), opts)
				if !bytes.Equal(got, want) {
					t.Errorf("delimiter %q, column %s, row %d: got %q, want %q", opts.Delimiter, schema.Columns[c].Name, j, got, want)
				}
			}
		}
	}
}
