package pgrepr

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/shardtail/shardtail/row"
)

// Format is a Postgres format code: how a value travels in Bind parameters,
// DataRow columns and COPY.
type Format int16

// The two format codes.
const (
	FormatText   Format = 0
	FormatBinary Format = 1
)

// jsonbVersion is the version byte that starts jsonb's binary format.
const jsonbVersion = 1

// AppendBinary appends the binary format of d, a non-NULL datum of type t,
// to buf: what Postgres' send function for the type produces. Integers and
// floats are big-endian; numeric is Postgres' base-10000 form; timestamps
// are int64 microseconds and dates int32 days since 2000-01-01; jsonb is a
// version byte (1) and the text; text, bytea and uuid are their bytes. The
// caller writes the length prefix (see AppendField) and handles NULL. It
// panics if d's Go type is not t's.
//
// AppendBinary allocates nothing beyond growing buf.
func AppendBinary(buf []byte, t row.Type, d row.Datum) []byte {
	switch t {
	case row.TypeBool:
		if v, ok := d.(bool); ok {
			if v {
				return append(buf, 1)
			}
			return append(buf, 0)
		}
	case row.TypeInt2:
		if v, ok := d.(int16); ok {
			return binary.BigEndian.AppendUint16(buf, uint16(v))
		}
	case row.TypeInt4:
		if v, ok := d.(int32); ok {
			return binary.BigEndian.AppendUint32(buf, uint32(v))
		}
	case row.TypeInt8:
		if v, ok := d.(int64); ok {
			return binary.BigEndian.AppendUint64(buf, uint64(v))
		}
	case row.TypeFloat4:
		if v, ok := d.(float32); ok {
			return binary.BigEndian.AppendUint32(buf, math.Float32bits(v))
		}
	case row.TypeFloat8:
		if v, ok := d.(float64); ok {
			return binary.BigEndian.AppendUint64(buf, math.Float64bits(v))
		}
	case row.TypeNumeric:
		if v, ok := d.(row.Numeric); ok {
			return appendNumericBinary(buf, string(v))
		}
	case row.TypeText:
		if v, ok := d.(string); ok {
			return append(buf, v...)
		}
	case row.TypeBytea:
		if v, ok := d.([]byte); ok {
			return append(buf, v...)
		}
	case row.TypeTimestamp:
		if v, ok := d.(row.Timestamp); ok {
			return binary.BigEndian.AppendUint64(buf, uint64(timestampToPG(int64(v))))
		}
	case row.TypeTimestampTZ:
		if v, ok := d.(row.TimestampTZ); ok {
			return binary.BigEndian.AppendUint64(buf, uint64(timestampToPG(int64(v))))
		}
	case row.TypeDate:
		if v, ok := d.(row.Date); ok {
			return binary.BigEndian.AppendUint32(buf, uint32(dateToPG(int32(v))))
		}
	case row.TypeJSONB:
		if v, ok := d.(row.JSON); ok {
			buf = append(buf, jsonbVersion)
			return append(buf, v...)
		}
	case row.TypeUUID:
		if v, ok := d.(row.UUID); ok {
			return append(buf, v[:]...)
		}
	}
	panic(badDatum(t, d))
}

// ParseBinary decodes b, the binary format of a value of type t, as
// Postgres' receive function for the type does, including its checks
// (valid numeric digits and scale, timestamp and date range, UTF-8 text,
// valid jsonb). The datum never aliases b, so b may be a reused message
// buffer.
func ParseBinary(t row.Type, b []byte) (row.Datum, error) {
	fixed := func(n int) error {
		if len(b) != n {
			return errBinaryLength(t.String(), n, len(b))
		}
		return nil
	}
	switch t {
	case row.TypeBool:
		if err := fixed(1); err != nil {
			return nil, err
		}
		return b[0] != 0, nil
	case row.TypeInt2:
		if err := fixed(2); err != nil {
			return nil, err
		}
		return int16(binary.BigEndian.Uint16(b)), nil
	case row.TypeInt4:
		if err := fixed(4); err != nil {
			return nil, err
		}
		return int32(binary.BigEndian.Uint32(b)), nil
	case row.TypeInt8:
		if err := fixed(8); err != nil {
			return nil, err
		}
		return int64(binary.BigEndian.Uint64(b)), nil
	case row.TypeFloat4:
		if err := fixed(4); err != nil {
			return nil, err
		}
		return math.Float32frombits(binary.BigEndian.Uint32(b)), nil
	case row.TypeFloat8:
		if err := fixed(8); err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
	case row.TypeNumeric:
		v, err := numericFromBinary(b)
		if err != nil {
			return nil, err
		}
		return v, nil
	case row.TypeText:
		s := string(b)
		if err := checkText(s); err != nil {
			return nil, err
		}
		return s, nil
	case row.TypeBytea:
		return append([]byte{}, b...), nil
	case row.TypeTimestamp, row.TypeTimestampTZ:
		if err := fixed(8); err != nil {
			return nil, err
		}
		v, err := timestampFromPG(int64(binary.BigEndian.Uint64(b)))
		if err != nil {
			return nil, err
		}
		if t == row.TypeTimestamp {
			return row.Timestamp(v), nil
		}
		return row.TimestampTZ(v), nil
	case row.TypeDate:
		if err := fixed(4); err != nil {
			return nil, err
		}
		v, err := dateFromPG(int32(binary.BigEndian.Uint32(b)))
		if err != nil {
			return nil, err
		}
		return row.Date(v), nil
	case row.TypeJSONB:
		if len(b) < 1 {
			return nil, errBinary("insufficient data left in message")
		}
		if b[0] != jsonbVersion {
			return nil, newError(ErrBinary, "XX000", "unsupported jsonb version number "+strconv.Itoa(int(b[0])))
		}
		v, err := parseJSON(string(b[1:]))
		if err != nil {
			return nil, err
		}
		return v, nil
	case row.TypeUUID:
		if err := fixed(16); err != nil {
			return nil, err
		}
		return row.UUID(b), nil
	}
	return nil, errUnsupportedType(t)
}

// AppendField appends one length-prefixed field as DataRow and binary COPY
// carry it: int32 length -1 for NULL, else the length and the value in
// format f. It reserves the length word and patches it afterwards, so the
// value is encoded straight into buf.
func AppendField(buf []byte, t row.Type, d row.Datum, f Format) []byte {
	if d == nil {
		return append(buf, 0xff, 0xff, 0xff, 0xff)
	}
	at := len(buf)
	buf = append(buf, 0, 0, 0, 0)
	if f == FormatBinary {
		buf = AppendBinary(buf, t, d)
	} else {
		buf = AppendText(buf, t, d)
	}
	binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
	return buf
}
