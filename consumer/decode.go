package consumer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// rowDecoder decodes the rows of `SUBSCRIBE … WITH (PROGRESS)` from the raw
// bytes of a FETCH's DataRows. It yields the same Go values as pgx's
// Rows.Values, but cheaper per row, and one type differently:
//
//   - jsonb and json are json.RawMessage holding the document's text as
//     the server sent it, byte for byte. pgx would parse it into Go maps,
//     whose re-encoding rounds numbers to float64 and reorders keys: a
//     sink could not land the source's value exactly.
//   - bool, int2, int4, int8, float4, float8 (in binary, the format pgx
//     asks for) and text are decoded here without pgx's per-value scan
//     plan, which allocates twice per value.
//   - mz_timestamp, a numeric, is decoded through pgx only when its bytes
//     differ from the previous row's: a snapshot is a million rows at one
//     timestamp, and a numeric decodes through big.Int.
//
// Values are carved from a shared slab, one allocation per many rows.
type rowDecoder struct {
	m   *pgtype.Map
	fds []pgconn.FieldDescription

	lastTS    []byte // raw mz_timestamp of the last row decoded
	lastTSVal uint64

	slab     []any // values of the next rows
	slabRows int   // rows the next slab holds
}

// The OIDs the decoder handles itself.
const (
	oidBool    = 16
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidText    = 25
	oidJSON    = 114
	oidFloat4  = 700
	oidFloat8  = 701
	oidVarchar = 1043
	oidJSONB   = 3802
)

// Slab sizes, in rows: a FETCH of a few rows (steady changes) takes a small
// slab, a snapshot's large FETCHes grow to the largest.
const (
	minSlabRows = 8
	maxSlabRows = 512
)

func newRowDecoder(m *pgtype.Map, fds []pgconn.FieldDescription) *rowDecoder {
	return &rowDecoder{m: m, fds: fds, slabRows: minSlabRows}
}

// decode reads one row: mz_timestamp, mz_progressed, mz_diff or mz_state,
// then the relation columns. raw is pgx's buffer, reused for the next row:
// nothing returned aliases it.
func (d *rowDecoder) decode(raw [][]byte) (Row, error) {
	if len(raw) < 3 || len(d.fds) != len(raw) {
		return Row{}, fmt.Errorf("decode row: %d columns, want mz_timestamp, mz_progressed and mz_diff or mz_state", len(raw))
	}
	var r Row
	ts, err := d.timestamp(raw[0])
	if err != nil {
		return Row{}, err
	}
	r.Timestamp = ts
	prog, err := d.value(1, raw[1])
	if err != nil {
		return Row{}, err
	}
	p, ok := prog.(bool)
	if !ok {
		return Row{}, fmt.Errorf("decode row: mz_progressed is %T, want bool (subscribe WITH (PROGRESS))", prog)
	}
	r.Progressed = p
	if p {
		return r, nil
	}
	if err := d.diffOrState(&r, raw[2]); err != nil {
		return Row{}, err
	}
	n := len(raw) - 3
	if len(d.slab) < n {
		d.slab = make([]any, n*d.slabRows)
		d.slabRows = min(2*d.slabRows, maxSlabRows)
	}
	r.Values = d.slab[:n:n]
	d.slab = d.slab[n:]
	for i, b := range raw[3:] {
		if r.Values[i], err = d.value(3+i, b); err != nil {
			return Row{}, err
		}
	}
	for _, b := range raw {
		r.Size += len(b) + 4
	}
	return r, nil
}

// diffOrState decodes the third column into r: mz_diff, or mz_state for
// an envelope. A binary mz_diff is read without boxing it (which would
// allocate).
func (d *rowDecoder) diffOrState(r *Row, b []byte) error {
	if fd := &d.fds[2]; fd.DataTypeOID == oidInt8 && fd.Format == pgtype.BinaryFormatCode && len(b) == 8 {
		r.Diff = int64(binary.BigEndian.Uint64(b))
		return nil
	}
	third, err := d.value(2, b)
	if err != nil {
		return err
	}
	switch v := third.(type) {
	case int64:
		r.Diff = v
	case string:
		r.State = v
	default:
		return fmt.Errorf("decode row: third column is %T, want mz_diff or mz_state", third)
	}
	return nil
}

// timestamp decodes mz_timestamp, reusing the previous row's value when the
// bytes are the same.
func (d *rowDecoder) timestamp(b []byte) (uint64, error) {
	if d.lastTS != nil && bytes.Equal(b, d.lastTS) {
		return d.lastTSVal, nil
	}
	v, err := d.value(0, b)
	if err != nil {
		return 0, err
	}
	ts, err := timestampValue(v)
	if err != nil {
		return 0, err
	}
	d.lastTS, d.lastTSVal = append(d.lastTS[:0], b...), ts
	return ts, nil
}

// value decodes column i's bytes b (nil is NULL).
func (d *rowDecoder) value(i int, b []byte) (any, error) {
	if b == nil {
		return nil, nil
	}
	fd := &d.fds[i]
	text := fd.Format == pgtype.TextFormatCode
	switch fd.DataTypeOID {
	case oidText, oidVarchar:
		return string(b), nil
	case oidJSONB:
		if !text {
			if len(b) == 0 || b[0] != 1 {
				return nil, fmt.Errorf("decode row: column %q: unsupported jsonb binary version", fd.Name)
			}
			b = b[1:]
		}
		return json.RawMessage(bytes.Clone(b)), nil
	case oidJSON:
		return json.RawMessage(bytes.Clone(b)), nil
	case oidBool:
		if len(b) == 1 && (!text || b[0] == 't' || b[0] == 'f') {
			if text {
				return b[0] == 't', nil
			}
			return b[0] == 1, nil // as pgx reads it
		}
	case oidInt2, oidInt4, oidInt8:
		if text {
			break // rare (pgx asks for binary): pgx's parsing
		}
		switch {
		case fd.DataTypeOID == oidInt2 && len(b) == 2:
			return int16(binary.BigEndian.Uint16(b)), nil
		case fd.DataTypeOID == oidInt4 && len(b) == 4:
			return int32(binary.BigEndian.Uint32(b)), nil
		case fd.DataTypeOID == oidInt8 && len(b) == 8:
			return int64(binary.BigEndian.Uint64(b)), nil
		}
	case oidFloat4, oidFloat8:
		if text {
			break // "NaN", "Infinity": pgx's parsing
		}
		switch {
		case fd.DataTypeOID == oidFloat4 && len(b) == 4:
			return math.Float32frombits(binary.BigEndian.Uint32(b)), nil
		case fd.DataTypeOID == oidFloat8 && len(b) == 8:
			return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
		}
	}
	// Any other type, and malformed input, which pgx reports.
	if t, ok := d.m.TypeForOID(fd.DataTypeOID); ok {
		v, err := t.Codec.DecodeValue(d.m, fd.DataTypeOID, fd.Format, b)
		if err != nil {
			return nil, fmt.Errorf("decode row: column %q: %w", fd.Name, err)
		}
		return v, nil
	}
	if text {
		return string(b), nil
	}
	return bytes.Clone(b), nil
}
