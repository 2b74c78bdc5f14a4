package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"

	"github.com/shardtail/shardtail/row"
)

// allTypes lists every column type.
var allTypes = []row.Type{
	row.TypeBool, row.TypeInt2, row.TypeInt4, row.TypeInt8, row.TypeFloat4,
	row.TypeFloat8, row.TypeNumeric, row.TypeText, row.TypeBytea,
	row.TypeTimestamp, row.TypeTimestampTZ, row.TypeDate, row.TypeJSONB,
	row.TypeUUID,
}

// allTypesSchema has one column of every type, nullable or not.
func allTypesSchema(nullable bool) row.Schema {
	var s row.Schema
	for _, t := range allTypes {
		s.Columns = append(s.Columns, row.Column{Name: "c_" + typeTokens[t], Type: t, Nullable: nullable})
	}
	return s
}

func mustDecode(t testing.TB, s row.Schema, data []byte) []row.Update {
	t.Helper()
	us, err := DecodePart(s, data)
	if err != nil {
		t.Fatalf("DecodePart: %v", err)
	}
	return us
}

func mustReader(t testing.TB, s row.Schema, data []byte) *PartReader {
	t.Helper()
	r, err := NewPartReader(s, data)
	if err != nil {
		t.Fatalf("NewPartReader: %v", err)
	}
	return r
}

func mustReadAll(t testing.TB, c Config, s row.Schema, data []byte) [][]row.Update {
	t.Helper()
	batches, err := readAll(c, s, data)
	if err != nil {
		t.Fatalf("PartReader: %v", err)
	}
	return batches
}

func encode(t testing.TB, s row.Schema, us []row.Update) []byte {
	t.Helper()
	data, _, err := EncodePart(s, us)
	if err != nil {
		t.Fatalf("EncodePart: %v", err)
	}
	return data
}

// sameDatum reports whether a and b are the same value of the same Go
// type, comparing floats by their bits (NaN payloads, -0) and []byte by
// content.
func sameDatum(a, b row.Datum) bool {
	switch x := a.(type) {
	case float32:
		y, ok := b.(float32)
		return ok && math.Float32bits(x) == math.Float32bits(y)
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	}
	return a == b
}

// diffUpdates describes the first difference between want and got.
func diffUpdates(want, got []row.Update) error {
	if len(want) != len(got) {
		return fmt.Errorf("got %d updates, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.T != g.T || w.Diff != g.Diff || len(w.Row) != len(g.Row) {
			return fmt.Errorf("update %d: got %v, want %v", i, g, w)
		}
		for j := range w.Row {
			if !sameDatum(w.Row[j], g.Row[j]) {
				return fmt.Errorf("update %d column %d: got %#v (%T), want %#v (%T)", i, j, g.Row[j], g.Row[j], w.Row[j], w.Row[j])
			}
		}
	}
	return nil
}

// readAll decodes data with a PartReader and returns the batches.
func readAll(c Config, s row.Schema, data []byte) ([][]row.Update, error) {
	r, err := c.NewPartReader(s, data)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var batches [][]row.Update
	for {
		b, err := r.Next()
		if errors.Is(err, io.EOF) {
			return batches, nil
		}
		if err != nil {
			return nil, err
		}
		batches = append(batches, b)
	}
}

// roundtrip encodes us with c, decodes it both ways, and checks both give
// back us exactly. It returns the number of batches.
func roundtrip(t *testing.T, c Config, s row.Schema, us []row.Update) int {
	t.Helper()
	data, st, err := c.EncodePart(s, us)
	if err != nil {
		t.Fatalf("EncodePart: %v", err)
	}
	if st.Rows != int64(len(us)) || st.Bytes != int64(len(data)) {
		t.Fatalf("stats %+v for %d updates in %d bytes", st, len(us), len(data))
	}
	got, err := c.DecodePart(s, data)
	if err != nil {
		t.Fatalf("DecodePart: %v", err)
	}
	if err := diffUpdates(us, got); err != nil {
		t.Fatalf("DecodePart: %v", err)
	}
	batches, err := readAll(c, s, data)
	if err != nil {
		t.Fatalf("PartReader: %v", err)
	}
	var flat []row.Update
	for _, b := range batches {
		if len(b) == 0 || len(b) > c.withDefaults().BatchRows {
			t.Fatalf("batch of %d rows, BatchRows %d", len(b), c.withDefaults().BatchRows)
		}
		flat = append(flat, b...)
	}
	if err := diffUpdates(us, flat); err != nil {
		t.Fatalf("PartReader: %v", err)
	}
	return len(batches)
}
