package dataflow

import (
	"reflect"
	"testing"

	"github.com/shardtail/shardtail/row"
)

// TestApply: Apply maps and filters rows, keeping times and diffs, and
// leaves its input as it was.
func TestApply(t *testing.T) {
	in := []row.Update{{Row: row.Row{int64(1)}, T: 5, Diff: 1}, {Row: row.Row{int64(2)}, T: 6, Diff: -2}, {Row: row.Row{int64(4)}, T: 7, Diff: 3}}
	orig := append([]row.Update(nil), in...)
	got, err := Apply(evens{}, in)
	if err != nil {
		t.Fatal(err)
	}
	want := []row.Update{{Row: row.Row{int64(4)}, T: 6, Diff: -2}, {Row: row.Row{int64(8)}, T: 7, Diff: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Apply(evens): got %v, want %v", got, want)
	}
	if !reflect.DeepEqual(in, orig) {
		t.Errorf("Apply changed its input: %v, was %v", in, orig)
	}
	if got, _ := Apply(nil, in); !reflect.DeepEqual(got, orig) {
		t.Errorf("Apply(nil): got %v, want the input %v", got, orig)
	}
	if _, err := Apply(evensOr13Fails{}, []row.Update{{Row: row.Row{int64(13)}, Diff: 1}}); err != errBadRow {
		t.Errorf("Apply of a failing row: got %v, want %v", err, errBadRow)
	}
}
