package feed

import (
	"testing"
	"unsafe"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/row"
)

// TestJSONEncodedOncePerShape: rows the fast path shares between the
// subscribers of a shape (formatter.Shared) are JSON-encoded once; every
// subscriber's stream gets the same bytes.
func TestJSONEncodedOncePerShape(t *testing.T) {
	opts := &formatter.Options{Progress: true, Relation: row.Schema{Columns: []row.Column{{Name: "a", Type: row.TypeInt8}, {Name: "b", Type: row.TypeText}}}}
	rows := formatter.Shared(opts.Data(7, []row.Update{{Row: row.Row{int64(1), "x"}, Diff: 1}, {Row: row.Row{int64(2), nil}, Diff: -2}}))
	var buf1, buf2 []byte
	first := formatter.Messages(newJSONWire(opts.Columns(), "", '\n'), rows, &buf1)
	second := formatter.Messages(newJSONWire(opts.Columns(), "", '\n'), rows, &buf2) // another subscriber
	want := []string{`{"mz_timestamp":"7","mz_diff":1,"a":"1","b":"x"}` + "\n", `{"mz_timestamp":"7","mz_diff":-2,"a":"2","b":null}` + "\n"}
	for i := range want {
		if string(first[i]) != want[i] || string(second[i]) != want[i] {
			t.Errorf("row %d: %s and %s, want %s", i, first[i], second[i], want[i])
		}
		if unsafe.SliceData(first[i]) != unsafe.SliceData(second[i]) {
			t.Errorf("row %d encoded twice for two subscribers of one shape", i)
		}
	}
}

// TestSSERowsWrittenFromSharedBytes: two SSE subscribers of a shape get a
// shared snapshot piece as one run of the shape's cached bytes, objects
// already comma-separated: the rows event is not built per subscriber.
func TestSSERowsWrittenFromSharedBytes(t *testing.T) {
	opts := &formatter.Options{Progress: true, Relation: row.Schema{Columns: []row.Column{{Name: "a", Type: row.TypeInt8}}}}
	rows := formatter.Shared(opts.Data(7, []row.Update{{Row: row.Row{int64(1)}, Diff: 1}, {Row: row.Row{int64(2)}, Diff: 1}}))
	var buf1, buf2 []byte
	first := formatter.Runs(newJSONWire(opts.Columns(), "", sseFraming{}.sep()), rows, &buf1)
	second := formatter.Runs(newJSONWire(opts.Columns(), "", sseFraming{}.sep()), rows, &buf2)
	want := `{"mz_timestamp":"7","mz_diff":1,"a":"1"},{"mz_timestamp":"7","mz_diff":1,"a":"2"},`
	if len(first) != 1 || len(second) != 1 || string(first[0]) != want || string(second[0]) != want {
		t.Fatalf("got runs %q and %q, want one run %q", first, second, want)
	}
	if unsafe.SliceData(first[0]) != unsafe.SliceData(second[0]) {
		t.Error("a shared piece's rows event was built twice for two subscribers of one shape")
	}
}
