package row

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/cockroachdb/apd/v3"
)

// Datum is one value of a row; see the package documentation for the Go type
// of each SQL type. nil is SQL NULL.
type Datum = any

// Numeric is a decimal number in canonical text form (see NormalizeNumeric).
// Canonical form makes equal numbers equal strings, which is what
// consolidation needs.
type Numeric string

// Timestamp is a timestamp without time zone, in microseconds since
// 1970-01-01 00:00:00.
type Timestamp int64

// TimestampTZ is an instant, in microseconds since the Unix epoch.
type TimestampTZ int64

// Date is a calendar date, in days since 1970-01-01.
type Date int32

// JSON is a jsonb value in canonical text form.
type JSON string

// UUID is a 16-byte UUID.
type UUID [16]byte

// String formats u in the canonical 8-4-4-4-12 hex form.
func (u UUID) String() string {
	const hex = "0123456789abcdef"
	var b [36]byte
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = hex[c>>4], hex[c&0xf]
		j += 2
	}
	return string(b[:])
}

// NormalizeNumeric parses a decimal and returns its canonical form: trailing
// fractional zeros removed, no exponent, "0" for any zero. NaN is "NaN".
func NormalizeNumeric(s string) (Numeric, error) {
	d, _, err := apd.NewFromString(strings.TrimSpace(s))
	if err != nil {
		return "", fmt.Errorf("invalid input syntax for type numeric: %q", s)
	}
	if d.Form == apd.Infinite {
		return "", fmt.Errorf("invalid input syntax for type numeric: %q", s)
	}
	return NumericFromDecimal(d), nil
}

// NumericFromDecimal returns the canonical form of d.
func NumericFromDecimal(d *apd.Decimal) Numeric {
	if d.Form == apd.NaN || d.Form == apd.NaNSignaling {
		return "NaN"
	}
	var r apd.Decimal
	r.Reduce(d)
	if r.IsZero() {
		return "0"
	}
	r.Negative = d.Negative
	return Numeric(r.Text('f'))
}

// Decimal parses n into an apd.Decimal for arithmetic and SQL comparison.
func (n Numeric) Decimal() *apd.Decimal {
	d, _, err := apd.NewFromString(string(n))
	if err != nil {
		return apd.New(0, 0)
	}
	return d
}

// Row is the datums of one record, in schema column order.
type Row []Datum

// Update is a change to a collection: Row's multiplicity changes by Diff at
// time T (epoch milliseconds).
type Update struct {
	Row  Row
	T    uint64
	Diff int64
}

// CompareDatum orders two datums of the same column type. NULL sorts first.
// It panics on datums of different non-nil Go types, which means a schema
// violation upstream.
func CompareDatum(a, b Datum) int {
	if a == nil || b == nil {
		switch {
		case a == nil && b == nil:
			return 0
		case a == nil:
			return -1
		default:
			return 1
		}
	}
	switch x := a.(type) {
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		default:
			return 1
		}
	case int16:
		return cmpOrdered(x, b.(int16))
	case int32:
		return cmpOrdered(x, b.(int32))
	case int64:
		return cmpOrdered(x, b.(int64))
	case float32:
		return cmpFloat(float64(x), float64(b.(float32)))
	case float64:
		return cmpFloat(x, b.(float64))
	case Numeric:
		return strings.Compare(string(x), string(b.(Numeric)))
	case string:
		return strings.Compare(x, b.(string))
	case []byte:
		return bytes.Compare(x, b.([]byte))
	case Timestamp:
		return cmpOrdered(x, b.(Timestamp))
	case TimestampTZ:
		return cmpOrdered(x, b.(TimestampTZ))
	case Date:
		return cmpOrdered(x, b.(Date))
	case JSON:
		return strings.Compare(string(x), string(b.(JSON)))
	case UUID:
		y := b.(UUID)
		return bytes.Compare(x[:], y[:])
	}
	panic(fmt.Sprintf("row: compare of unsupported datum %T", a))
}

func cmpOrdered[T int16 | int32 | int64 | Timestamp | TimestampTZ | Date](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpFloat orders floats as Postgres does: NaN equals NaN and sorts above
// every other value, so that the order is total.
func cmpFloat(a, b float64) int {
	an, bn := a != a, b != b
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Compare orders two rows of the same schema column by column.
func Compare(a, b Row) int {
	for i := range min(len(a), len(b)) {
		if c := CompareDatum(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

// Equal reports whether two rows are equal under Compare.
func Equal(a, b Row) bool { return len(a) == len(b) && Compare(a, b) == 0 }

// CheckDatum reports whether d is a valid Go value for column type t
// (nil is always valid here; nullability is the schema's business).
func CheckDatum(t Type, d Datum) bool {
	if d == nil {
		return true
	}
	switch t {
	case TypeBool:
		_, ok := d.(bool)
		return ok
	case TypeInt2:
		_, ok := d.(int16)
		return ok
	case TypeInt4:
		_, ok := d.(int32)
		return ok
	case TypeInt8:
		_, ok := d.(int64)
		return ok
	case TypeFloat4:
		_, ok := d.(float32)
		return ok
	case TypeFloat8:
		_, ok := d.(float64)
		return ok
	case TypeNumeric:
		_, ok := d.(Numeric)
		return ok
	case TypeText:
		_, ok := d.(string)
		return ok
	case TypeBytea:
		_, ok := d.([]byte)
		return ok
	case TypeTimestamp:
		_, ok := d.(Timestamp)
		return ok
	case TypeTimestampTZ:
		_, ok := d.(TimestampTZ)
		return ok
	case TypeDate:
		_, ok := d.(Date)
		return ok
	case TypeJSONB:
		_, ok := d.(JSON)
		return ok
	case TypeUUID:
		_, ok := d.(UUID)
		return ok
	}
	return false
}

// CheckRow reports the first datum of r that does not fit s.
func CheckRow(s Schema, r Row) error {
	if len(r) != len(s.Columns) {
		return fmt.Errorf("row has %d columns, schema has %d", len(r), len(s.Columns))
	}
	for i, c := range s.Columns {
		if r[i] == nil && !c.Nullable {
			return fmt.Errorf("column %q: null value in non-nullable column", c.Name)
		}
		if !CheckDatum(c.Type, r[i]) {
			return fmt.Errorf("column %q: %T is not a %s", c.Name, r[i], c.Type)
		}
	}
	return nil
}
