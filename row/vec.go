package row

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// Vec is one column of a batch of rows in Arrow's memory layout, read in
// place: the form persist's parts decode to before their values become
// datums. A snapshot that needs no consolidation is encoded for the wire
// straight from its vectors (pgrepr.AppendVecField), without a datum per
// value. A Vec's memory is immutable once built: strings read from it
// alias it.
type Vec struct {
	Type Type
	// Valid is the validity bitmap (bit j clear: row j is NULL), or nil
	// when the column holds no NULL.
	Valid []byte
	// Values holds, for a fixed-width type, the values little-endian
	// (VecWidth bytes each; bool: a bitmap); for text, numeric, jsonb and
	// bytea, n+1 little-endian int32 offsets into Data: value j is
	// Data[off(j):off(j+1)].
	Values []byte
	// Data holds the bytes of a variable-width column's values.
	Data []byte
}

// VecWidth returns the byte width of a fixed-width type's values in a Vec,
// 0 for variable-width types (text, numeric, jsonb, bytea) and -1 for bool
// (a bitmap).
func VecWidth(t Type) int {
	switch t {
	case TypeBool:
		return -1
	case TypeInt2:
		return 2
	case TypeInt4, TypeFloat4, TypeDate:
		return 4
	case TypeInt8, TypeFloat8, TypeTimestamp, TypeTimestampTZ:
		return 8
	case TypeUUID:
		return 16
	}
	return 0
}

// Null reports whether row j is NULL.
func (v *Vec) Null(j int) bool { return v.Valid != nil && v.Valid[j>>3]&(1<<(j&7)) == 0 }

// Bool returns row j of a bool column.
func (v *Vec) Bool(j int) bool { return v.Values[j>>3]&(1<<(j&7)) != 0 }

// Uint16 returns the 2 bytes of row j (int2).
func (v *Vec) Uint16(j int) uint16 { return binary.LittleEndian.Uint16(v.Values[2*j:]) }

// Uint32 returns the 4 bytes of row j (int4, float4, date).
func (v *Vec) Uint32(j int) uint32 { return binary.LittleEndian.Uint32(v.Values[4*j:]) }

// Uint64 returns the 8 bytes of row j (int8, float8, timestamp, timestamptz).
func (v *Vec) Uint64(j int) uint64 { return binary.LittleEndian.Uint64(v.Values[8*j:]) }

// UUID returns row j of a uuid column.
func (v *Vec) UUID(j int) UUID { return UUID(v.Values[16*j : 16*j+16]) }

// Bytes returns the bytes of row j of a variable-width column, aliasing
// the vector (callers must not modify them).
func (v *Vec) Bytes(j int) []byte {
	a := int(int32(binary.LittleEndian.Uint32(v.Values[4*j:])))
	b := int(int32(binary.LittleEndian.Uint32(v.Values[4*j+4:])))
	return v.Data[a:b:b]
}

// String returns row j of a text, numeric or jsonb column as a string
// that aliases the vector: no copy, as the vector is immutable.
func (v *Vec) String(j int) string {
	b := v.Bytes(j)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Datum returns row j as a datum (nil for NULL). It allocates for most
// types; bulk decoding (persist's codec) and the wire encoders
// (pgrepr.AppendVecField) read the typed accessors instead.
func (v *Vec) Datum(j int) Datum {
	if v.Null(j) {
		return nil
	}
	switch v.Type {
	case TypeBool:
		return v.Bool(j)
	case TypeInt2:
		return int16(v.Uint16(j))
	case TypeInt4:
		return int32(v.Uint32(j))
	case TypeInt8:
		return int64(v.Uint64(j))
	case TypeFloat4:
		return math.Float32frombits(v.Uint32(j))
	case TypeFloat8:
		return math.Float64frombits(v.Uint64(j))
	case TypeNumeric:
		return Numeric(v.String(j))
	case TypeText:
		return v.String(j)
	case TypeBytea:
		return v.Bytes(j)
	case TypeTimestamp:
		return Timestamp(v.Uint64(j))
	case TypeTimestampTZ:
		return TimestampTZ(v.Uint64(j))
	case TypeDate:
		return Date(v.Uint32(j))
	case TypeJSONB:
		return JSON(v.String(j))
	case TypeUUID:
		return v.UUID(j)
	}
	panic("row: vector of invalid type " + v.Type.String())
}

// Columns is a run of updates held in columns: rows Off to Off+Len-1 of
// Vecs (one per relation column), all at time T, with Diffs holding every
// row's diff as a little-endian int64. A snapshot chunk that persist
// passes through from a part without consolidating it is one.
type Columns struct {
	Vecs  []Vec
	Diffs []byte
	T     uint64
	Off   int
	Len   int
}

// Diff returns the diff of row j (of the vectors: Off <= j < Off+Len).
func (c *Columns) Diff(j int) int64 { return int64(binary.LittleEndian.Uint64(c.Diffs[8*j:])) }

// Row returns row j (of the vectors) as datums, allocating.
func (c *Columns) Row(j int) Row {
	r := make(Row, len(c.Vecs))
	for i := range c.Vecs {
		r[i] = c.Vecs[i].Datum(j)
	}
	return r
}

// Slice returns rows Off+i to Off+j-1 of c, sharing its vectors.
func (c *Columns) Slice(i, j int) *Columns {
	s := *c
	s.Off, s.Len = c.Off+i, j-i
	return &s
}

// Size estimates the bytes the rows occupy in memory, as Update.Size
// counts them once decoded: budgets count a chunk the same in either
// form.
func (c *Columns) Size() int64 {
	n := int64(c.Len) * updateOverhead
	for i := range c.Vecs {
		n += c.Vecs[i].size(c.Off, c.Off+c.Len)
	}
	return n
}

// RowSize estimates the bytes row j's datums occupy once decoded, as
// Row.Size counts them.
func (c *Columns) RowSize(j int) int64 {
	var n int64
	for i := range c.Vecs {
		n += c.Vecs[i].size(j, j+1)
	}
	return n
}

// size estimates the bytes of rows i to j-1 of v as datums (datumSize).
func (v *Vec) size(i, j int) int64 {
	n := 16 * int64(j-i)
	if w := VecWidth(v.Type); w == 0 && j > i {
		a := int32(binary.LittleEndian.Uint32(v.Values[4*i:]))
		b := int32(binary.LittleEndian.Uint32(v.Values[4*j:]))
		n += int64(b - a)
		if v.Type == TypeBytea {
			for k := i; k < j; k++ {
				if !v.Null(k) {
					n += 8 // a slice header, not a string's
				}
			}
		}
	}
	return n
}
