package redissink

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/row"
)

// relationColumns maps the columns the driver reports to row columns, the
// types the key contract renders.
func relationColumns(cols []consumer.Column) ([]row.Column, error) {
	out := make([]row.Column, len(cols))
	for i, c := range cols {
		t, ok := pgrepr.TypeFromOID(c.TypeOID)
		if !ok {
			return nil, fmt.Errorf("%w: column %q is %s (OID %d)", ErrUnsupportedType, c.Name, c.TypeName, c.TypeOID)
		}
		out[i] = row.Column{Name: c.Name, Type: t, Nullable: true}
	}
	return out, nil
}

// secondsPerDay converts a date's midnight to days since the epoch.
const secondsPerDay = 24 * 60 * 60

// datum converts a value as the pgx driver decodes it (or already a
// row.Datum) to the row.Datum of type t that pgrepr.AppendJSONValue
// renders. The consumer's values are exact for every type: jsonb comes as
// the server's text (json.RawMessage), landed as it is. A jsonb value a
// caller decoded itself into Go maps is re-encoded, and loses what float64s
// and maps lose (digits past 17, key order before canonicalization).
func datum(t row.Type, v any) (row.Datum, error) {
	if v == nil || row.CheckDatum(t, v) {
		return v, nil
	}
	switch t {
	case row.TypeNumeric:
		if n, ok := v.(pgtype.Numeric); ok {
			dv, err := n.Value()
			if s, isString := dv.(string); err == nil && isString {
				return row.NormalizeNumeric(s)
			}
		}
	case row.TypeTimestamp, row.TypeTimestampTZ:
		var us int64
		switch x := v.(type) {
		case time.Time:
			us = x.UnixMicro()
		case pgtype.InfinityModifier:
			us = infinity[int64](x, pgrepr.TimestampInfinity, pgrepr.TimestampNegInfinity)
		default:
			return nil, badValue(t, v)
		}
		if t == row.TypeTimestamp {
			return row.Timestamp(us), nil
		}
		return row.TimestampTZ(us), nil
	case row.TypeDate:
		switch x := v.(type) {
		case time.Time:
			s := x.Unix()
			d := s / secondsPerDay
			if s%secondsPerDay < 0 {
				d-- // floor: dates before 1970 count down from the epoch
			}
			return row.Date(d), nil
		case pgtype.InfinityModifier:
			return row.Date(infinity[int32](x, pgrepr.DateInfinity, pgrepr.DateNegInfinity)), nil
		}
	case row.TypeJSONB:
		if raw, ok := v.(json.RawMessage); ok {
			// The consumer's jsonb: the server's canonical text, kept
			// byte for byte.
			return row.JSON(raw), nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w: jsonb %v: %v", ErrBadValue, v, err)
		}
		return pgrepr.ParseText(t, string(b))
	case row.TypeUUID:
		if u, ok := v.([16]byte); ok {
			return row.UUID(u), nil
		}
	}
	return nil, badValue(t, v)
}

func infinity[T int64 | int32](m pgtype.InfinityModifier, pos, neg T) T {
	if m == pgtype.Infinity {
		return pos
	}
	return neg
}

func badValue(t row.Type, v any) error {
	return fmt.Errorf("%w: %T for a %s column", ErrBadValue, v, t)
}
