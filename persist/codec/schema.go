package codec

import (
	"fmt"
	"strconv"
	"unsafe"

	"github.com/shardtail/shardtail/row"
)

// FormatVersion is the part format this package writes and the only one it
// reads. It is stored under MetaFormatVersion in the Arrow schema metadata.
// Any change to the layout (columns, types, metadata, batch rules) bumps it.
const FormatVersion = "1"

// Metadata keys. Schema-level keys sit in the Arrow schema's custom
// metadata; MetaType sits on every field.
const (
	// MetaFormatVersion holds FormatVersion.
	MetaFormatVersion = "shardtail.format"
	// MetaRows holds the part's total row count in decimal; the reader
	// checks it against the sum of the record batch lengths.
	MetaRows = "shardtail.rows"
	// MetaType holds a field's shardtail column type token (see typeTokens):
	// "numeric", "jsonb", "text", ... It tells apart SQL types that share an
	// Arrow type (text, numeric and jsonb are all Utf8).
	MetaType = "shardtail.type"
)

// Names of the two system columns that follow the schema's columns.
const (
	colTime = "t"
	colDiff = "d"
)

// typeTokens are the wire names of column types. They are part of the
// format: never change one, only add.
var typeTokens = [...]string{
	row.TypeBool:        "bool",
	row.TypeInt2:        "int2",
	row.TypeInt4:        "int4",
	row.TypeInt8:        "int8",
	row.TypeFloat4:      "float4",
	row.TypeFloat8:      "float8",
	row.TypeNumeric:     "numeric",
	row.TypeText:        "text",
	row.TypeBytea:       "bytea",
	row.TypeTimestamp:   "timestamp",
	row.TypeTimestampTZ: "timestamptz",
	row.TypeDate:        "date",
	row.TypeJSONB:       "jsonb",
	row.TypeUUID:        "uuid",
}

// fixedWidth returns the byte width of a fixed-width column type's values,
// 0 for variable-width types and -1 for bool (bit-packed).
func fixedWidth(t row.Type) int {
	switch t {
	case row.TypeBool:
		return -1
	case row.TypeInt2:
		return 2
	case row.TypeInt4, row.TypeFloat4, row.TypeDate:
		return 4
	case row.TypeInt8, row.TypeFloat8, row.TypeTimestamp, row.TypeTimestampTZ:
		return 8
	case row.TypeUUID:
		return 16
	}
	return 0
}

// wireType returns the flatbuffer spelling of arrowType(t).
func wireType(t row.Type) typeInfo {
	switch t {
	case row.TypeBool:
		return typeInfo{id: fbTypeBool}
	case row.TypeInt2:
		return typeInfo{id: fbTypeInt, bitWidth: 16, signed: true}
	case row.TypeInt4:
		return typeInfo{id: fbTypeInt, bitWidth: 32, signed: true}
	case row.TypeInt8:
		return typeInfo{id: fbTypeInt, bitWidth: 64, signed: true}
	case row.TypeFloat4:
		return typeInfo{id: fbTypeFloatingPoint, precision: 1}
	case row.TypeFloat8:
		return typeInfo{id: fbTypeFloatingPoint, precision: 2}
	case row.TypeNumeric, row.TypeText, row.TypeJSONB:
		return typeInfo{id: fbTypeUtf8}
	case row.TypeBytea:
		return typeInfo{id: fbTypeBinary}
	case row.TypeTimestamp:
		return typeInfo{id: fbTypeTimestamp, unit: 2}
	case row.TypeTimestampTZ:
		return typeInfo{id: fbTypeTimestamp, unit: 2, timezone: "UTC"}
	case row.TypeDate:
		return typeInfo{id: fbTypeDate, unit: 0}
	case row.TypeUUID:
		return typeInfo{id: fbTypeFixedSizeBinary, byteWidth: 16}
	}
	panic(fmt.Sprintf("codec: no wire type for %v", t))
}

var (
	wireTime = typeInfo{id: fbTypeInt, bitWidth: 64}
	wireDiff = typeInfo{id: fbTypeInt, bitWidth: 64, signed: true}
)

func lookup(kvs []keyValue, key string) (string, bool) {
	for _, kv := range kvs {
		if kv.key == key {
			return kv.value, true
		}
	}
	return "", false
}

// checkSchema compares the schema read from a part's footer with the
// expected one and returns the part's declared row count.
func checkSchema(s row.Schema, fi fileInfo) (rows int64, err error) {
	v, ok := lookup(fi.meta, MetaFormatVersion)
	switch {
	case !ok:
		return 0, fmt.Errorf("%w: no %s metadata", ErrCorrupt, MetaFormatVersion)
	case v != FormatVersion:
		return 0, fmt.Errorf("%w: %.20q (want %q)", ErrUnsupportedVersion, v, FormatVersion)
	}
	if v, ok = lookup(fi.meta, MetaRows); !ok {
		return 0, fmt.Errorf("%w: no %s metadata", ErrCorrupt, MetaRows)
	}
	if rows, err = strconv.ParseInt(v, 10, 64); err != nil || rows < 0 {
		return 0, fmt.Errorf("%w: bad %s %.20q", ErrCorrupt, MetaRows, v)
	}
	if len(fi.meta) != 2 {
		return 0, fmt.Errorf("%w: %d schema metadata entries, want 2", ErrCorrupt, len(fi.meta))
	}
	if len(fi.fields) != len(s.Columns)+2 {
		return 0, fmt.Errorf("%w: part has %d columns, want %d", ErrSchemaMismatch, len(fi.fields)-2, len(s.Columns))
	}
	for i, c := range s.Columns {
		f := fi.fields[i]
		tok, _ := lookup(f.meta, MetaType)
		switch {
		case f.name != c.Name:
			return 0, fmt.Errorf("%w: column %d is %.64q, want %q", ErrSchemaMismatch, i, f.name, c.Name)
		case tok != typeTokens[c.Type] || len(f.meta) != 1:
			return 0, fmt.Errorf("%w: column %q has type %.20q, want %q", ErrSchemaMismatch, c.Name, tok, typeTokens[c.Type])
		case f.typ != wireType(c.Type):
			return 0, fmt.Errorf("%w: column %q has arrow type %+v, want %+v", ErrSchemaMismatch, c.Name, f.typ, wireType(c.Type))
		case f.nullable != c.Nullable:
			return 0, fmt.Errorf("%w: column %q nullable=%v, want %v", ErrSchemaMismatch, c.Name, f.nullable, c.Nullable)
		}
	}
	for i, want := range [2]fieldInfo{{name: colTime, typ: wireTime}, {name: colDiff, typ: wireDiff}} {
		f := fi.fields[len(s.Columns)+i]
		if f.name != want.name || f.typ != want.typ || f.nullable || len(f.meta) != 0 {
			return 0, fmt.Errorf("%w: system column %d is %.64q %+v", ErrSchemaMismatch, len(s.Columns)+i, f.name, f.typ)
		}
	}
	return rows, nil
}

// Sizes of the Go values a decoded batch allocates per row and per datum;
// both sides of the codec use them to bound a batch's memory.
const (
	updateSize = int64(unsafe.Sizeof(row.Update{}))
	datumSize  = int64(unsafe.Sizeof(row.Datum(nil)))
)
