package codec

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardtail/shardtail/row"
)

// arrowDatum converts value j of a column read by arrow-go to a datum of
// column type t.
func arrowDatum(t *testing.T, typ row.Type, col arrow.Array, j int) row.Datum {
	t.Helper()
	if col.IsNull(j) {
		return nil
	}
	switch a := col.(type) {
	case *array.Boolean:
		return a.Value(j)
	case *array.Int16:
		return a.Value(j)
	case *array.Int32:
		return a.Value(j)
	case *array.Int64:
		return a.Value(j)
	case *array.Float32:
		return a.Value(j)
	case *array.Float64:
		return a.Value(j)
	case *array.String:
		switch typ {
		case row.TypeNumeric:
			return row.Numeric(a.Value(j))
		case row.TypeJSONB:
			return row.JSON(a.Value(j))
		}
		return a.Value(j)
	case *array.Binary:
		return bytes.Clone(a.Value(j))
	case *array.Timestamp:
		if typ == row.TypeTimestampTZ {
			return row.TimestampTZ(a.Value(j))
		}
		return row.Timestamp(a.Value(j))
	case *array.Date32:
		return row.Date(a.Value(j))
	case *array.FixedSizeBinary:
		return row.UUID(a.Value(j))
	}
	t.Fatalf("unexpected arrow array %T", col)
	return nil
}

// TestArrowReaderAgrees reads parts with arrow-go's own IPC file reader
// and checks it sees the same schema and values as DecodePart: parts are
// standard Arrow files and our reader interprets them as Arrow does.
func TestArrowReaderAgrees(t *testing.T) {
	s := allTypesSchema(true)
	var us []row.Update
	for i := range 200 {
		r := make(row.Row, len(allTypes))
		for j, typ := range allTypes {
			vals := edgeValues(typ)
			if (i+2*j)%6 != 0 {
				r[j] = vals[(i*3+j)%len(vals)]
			}
		}
		us = append(us, row.Update{Row: r, T: uint64(i * 10), Diff: int64(i%5 - 2)})
	}
	us = row.Consolidate(us)
	data, _, err := Config{BatchRows: 33}.EncodePart(s, us)
	if err != nil {
		t.Fatal(err)
	}
	want := mustDecode(t, s, data)

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fr, err := ipc.NewFileReader(bytes.NewReader(data), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	if !fr.Schema().Equal(arrowSchema(s, len(us))) {
		t.Fatalf("arrow schema\n%v\nwant\n%v", fr.Schema(), arrowSchema(s, len(us)))
	}
	var got []row.Update
	for i := range fr.NumRecords() {
		rec, err := fr.RecordBatchAt(i)
		if err != nil {
			t.Fatal(err)
		}
		nc := len(s.Columns)
		for j := range int(rec.NumRows()) {
			r := make(row.Row, nc)
			for ci, c := range s.Columns {
				r[ci] = arrowDatum(t, c.Type, rec.Column(ci), j)
			}
			got = append(got, row.Update{
				Row:  r,
				T:    rec.Column(nc).(*array.Uint64).Value(j),
				Diff: rec.Column(nc + 1).(*array.Int64).Value(j),
			})
		}
		rec.Release()
	}
	if err := diffUpdates(want, got); err != nil {
		t.Fatal(err)
	}
}

// The Arrow schema parts are written with, as arrow-go spells it: what
// arrow-go must read from a part.

var (
	timestampType   = &arrow.TimestampType{Unit: arrow.Microsecond}
	timestampTZType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	uuidType        = &arrow.FixedSizeBinaryType{ByteWidth: 16}
)

// arrowType returns the Arrow type that stores column type t.
func arrowType(t row.Type) arrow.DataType {
	switch t {
	case row.TypeBool:
		return arrow.FixedWidthTypes.Boolean
	case row.TypeInt2:
		return arrow.PrimitiveTypes.Int16
	case row.TypeInt4:
		return arrow.PrimitiveTypes.Int32
	case row.TypeInt8:
		return arrow.PrimitiveTypes.Int64
	case row.TypeFloat4:
		return arrow.PrimitiveTypes.Float32
	case row.TypeFloat8:
		return arrow.PrimitiveTypes.Float64
	case row.TypeNumeric, row.TypeText, row.TypeJSONB:
		return arrow.BinaryTypes.String
	case row.TypeBytea:
		return arrow.BinaryTypes.Binary
	case row.TypeTimestamp:
		return timestampType
	case row.TypeTimestampTZ:
		return timestampTZType
	case row.TypeDate:
		return arrow.FixedWidthTypes.Date32
	case row.TypeUUID:
		return uuidType
	}
	panic(fmt.Sprintf("codec: no arrow type for %v", t))
}

// arrowSchema returns the Arrow schema of parts of s holding rows rows.
func arrowSchema(s row.Schema, rows int) *arrow.Schema {
	fields := make([]arrow.Field, 0, len(s.Columns)+2)
	for _, c := range s.Columns {
		fields = append(fields, arrow.Field{
			Name:     c.Name,
			Type:     arrowType(c.Type),
			Nullable: c.Nullable,
			Metadata: arrow.NewMetadata([]string{MetaType}, []string{typeTokens[c.Type]}),
		})
	}
	fields = append(fields,
		arrow.Field{Name: colTime, Type: arrow.PrimitiveTypes.Uint64},
		arrow.Field{Name: colDiff, Type: arrow.PrimitiveTypes.Int64},
	)
	md := arrow.NewMetadata(
		[]string{MetaFormatVersion, MetaRows},
		[]string{FormatVersion, strconv.Itoa(rows)},
	)
	return arrow.NewSchema(fields, &md)
}
