package pgrepr

import (
	"math"
	"strconv"

	"github.com/shardtail/shardtail/row"
)

// AppendVecField is AppendField for row j of v: the same bytes as for
// v.Datum(j), without allocating that datum.
func AppendVecField(buf []byte, v *row.Vec, j int, f Format) []byte {
	return appendVec(buf, v, j, vecOp{format: f})
}

// AppendVecCopyText is AppendCopyTextField for row j of v: the same bytes
// as for v.Datum(j), without allocating that datum.
func AppendVecCopyText(buf []byte, v *row.Vec, j int, opts *TextOptions) []byte {
	if v.Null(j) {
		return append(buf, opts.Null...)
	}
	// The commonest types without a datum at all: what AppendText appends
	// for them, escaped as appendCopyTextField escapes it (text always,
	// integers only for a delimiter that could appear in them). A large
	// snapshot's COPY spends most of its encoding here.
	switch v.Type {
	case row.TypeText:
		start := len(buf)
		buf = append(buf, v.Bytes(j)...)
		return escapeCopyText(buf, start, opts.Delimiter)
	case row.TypeInt8, row.TypeInt4, row.TypeInt2:
		start := len(buf)
		buf = strconv.AppendInt(buf, vecInt(v, j), 10)
		if plainByte(opts.Delimiter) {
			buf = escapeCopyText(buf, start, opts.Delimiter)
		}
		return buf
	}
	return appendVec(buf, v, j, vecOp{text: opts})
}

// vecInt returns row j of an int2, int4 or int8 vector.
func vecInt(v *row.Vec, j int) int64 {
	switch v.Type {
	case row.TypeInt2:
		return int64(int16(v.Uint16(j)))
	case row.TypeInt4:
		return int64(int32(v.Uint32(j)))
	}
	return int64(v.Uint64(j))
}

// vecOp is the encoder appendVec hands a vector's value to: a COPY text
// field when text is set, else a length-prefixed field in format.
type vecOp struct {
	format Format
	text   *TextOptions
}

// appendVec reads row j of v as a datum and encodes it with op's encoder:
// the vectors' values go through the very code that encodes datums. The
// datum lives on this function's stack (the encoders do not let their
// datum escape, see badDatum), so reading it costs no allocation; this is
// why the type switch is here rather than a call of row.Vec.Datum, whose
// result must be on the heap.
func appendVec(buf []byte, v *row.Vec, j int, op vecOp) []byte {
	var d row.Datum
	if !v.Null(j) {
		switch v.Type {
		case row.TypeBool:
			d = v.Bool(j)
		case row.TypeInt2:
			d = int16(v.Uint16(j))
		case row.TypeInt4:
			d = int32(v.Uint32(j))
		case row.TypeInt8:
			d = int64(v.Uint64(j))
		case row.TypeFloat4:
			d = math.Float32frombits(v.Uint32(j))
		case row.TypeFloat8:
			d = math.Float64frombits(v.Uint64(j))
		case row.TypeNumeric:
			d = row.Numeric(v.String(j))
		case row.TypeText:
			d = v.String(j)
		case row.TypeBytea:
			d = v.Bytes(j)
		case row.TypeTimestamp:
			d = row.Timestamp(v.Uint64(j))
		case row.TypeTimestampTZ:
			d = row.TimestampTZ(v.Uint64(j))
		case row.TypeDate:
			d = row.Date(v.Uint32(j))
		case row.TypeJSONB:
			d = row.JSON(v.String(j))
		case row.TypeUUID:
			d = v.UUID(j)
		default:
			panic("pgrepr: vector of invalid type " + v.Type.String())
		}
	}
	if op.text != nil {
		return AppendCopyTextField(buf, v.Type, d, *op.text)
	}
	return AppendField(buf, v.Type, d, op.format)
}
