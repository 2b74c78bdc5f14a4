package codec

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/shardtail/shardtail/row"
)

func checkSlab[T any](t *testing.T, vals []T) {
	t.Helper()
	s := newSlab[T](len(vals))
	boxed := make([]row.Datum, len(vals))
	for i, v := range vals {
		boxed[i] = s.box(i, v)
	}
	s = slab[T]{} // only the datums keep the slab alive now
	runtime.GC()
	for i, v := range vals {
		var plain row.Datum = v
		got := boxed[i]
		if _, ok := got.(T); !ok {
			t.Fatalf("%d: type assertion to %T failed on %#v", i, v, got)
		}
		if !reflect.DeepEqual(got, plain) || fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", plain) {
			t.Fatalf("%d: got %#v, want %#v", i, got, plain)
		}
		if reflect.TypeOf(plain).Comparable() && !sameDatum(got, plain) {
			t.Fatalf("%d: %#v != %#v", i, got, plain)
		}
	}
}

// TestSlabBoxing: datums pointing into a slab behave exactly like
// ordinarily boxed values, also after a GC.
func TestSlabBoxing(t *testing.T) {
	checkSlab(t, []int16{-1, 0, 1000})
	checkSlab(t, []int32{-1 << 30, 7})
	checkSlab(t, []int64{-1, 0, 255, 256, 1 << 62})
	checkSlab(t, []float32{0.5, -3})
	checkSlab(t, []float64{0.25, 1e300})
	checkSlab(t, []string{"", "a", "héllo"})
	checkSlab(t, []row.Numeric{"1.5", "NaN"})
	checkSlab(t, []row.JSON{`{}`})
	checkSlab(t, []row.Timestamp{-5, 1 << 60})
	checkSlab(t, []row.TimestampTZ{9})
	checkSlab(t, []row.Date{-3, 19000})
	checkSlab(t, []row.UUID{{1, 2, 3}, {15: 9}})
	checkSlab(t, [][]byte{{}, {1, 2}})
	// Decoded datums work with package row.
	a, b := newSlab[int64](2), newSlab[int64](1)
	x, y := a.box(0, 5), b.box(0, 5)
	if row.CompareDatum(x, y) != 0 || x != y || row.CompareDatum(a.box(1, 4), y) != -1 {
		t.Fatal("slab datums compare wrongly")
	}
}

// TestDecodeAllocs: decoding allocates per batch and column, not per
// value.
func TestDecodeAllocs(t *testing.T) {
	us := benchUpdates(5000)
	data := encode(t, benchSchema, us)
	allocs := testing.AllocsPerRun(5, func() {
		if _, err := DecodePart(benchSchema, data); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 100 {
		t.Fatalf("%v allocations to decode %d rows, want per-batch allocations only", allocs, len(us))
	}
}

// TestEncodeTextAllocatedOnce: a record batch's text column is allocated
// once at its size, not grown by append (which allocated about 5x the
// column over its growth steps), and every variable-width type is sized.
func TestEncodeTextAllocatedOnce(t *testing.T) {
	s := row.Schema{Columns: []row.Column{
		{Name: "t", Type: row.TypeText}, {Name: "n", Type: row.TypeNumeric},
		{Name: "j", Type: row.TypeJSONB}, {Name: "b", Type: row.TypeBytea},
	}}
	us := make([]row.Update, 1000)
	for i := range us {
		v := strings.Repeat("x", 1000+i)
		us[i] = row.Update{Row: row.Row{v, row.Numeric("12.5"), row.JSON(`{"a":1}`), []byte(v)}, T: 1, Diff: 1}
	}
	var e *batchEncoder
	allocs := testing.AllocsPerRun(5, func() {
		e = newBatchEncoder(s)
		e.encode(us)
	})
	// Per column: validity, offsets and data; the times', the diffs' and
	// the encoder's own slices, as they grow: about 25, against over 100
	// when the columns grew by append.
	if allocs > 40 {
		t.Fatalf("%v allocations to encode %d rows of 4 variable-width columns, want each buffer allocated once", allocs, len(us))
	}
	for ci := range s.Columns {
		if data := e.bufs[ci][2]; len(data) != cap(data) {
			t.Errorf("column %d: data %d bytes in an array of %d: not sized before it was filled", ci, len(data), cap(data))
		}
	}
}
