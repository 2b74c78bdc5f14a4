// Package contracttest holds the golden rows of the key contract
// (consumer.KeyJSON and consumer.ValueJSON): one relation with a column of
// every type, and rows covering NULLs, non-finite floats, extremes,
// non-ASCII and escaped text. consumer's golden test renders them into
// consumer/testdata/contract.golden; the Redis sink's test lands them in a
// real Redis and checks that what it stored is byte for byte what the
// functions render, so the sink and a Go host that lands the feed itself
// cannot drift apart.
package contracttest

import (
	"math"

	"github.com/shardtail/shardtail/row"
)

// Columns is the golden relation: a compound key (customer, placed) that
// is not the leading columns, then one column of every other type.
var Columns = []row.Column{
	{Name: "id", Type: row.TypeInt8},
	{Name: "customer", Type: row.TypeText},
	{Name: "placed", Type: row.TypeTimestamp},
	{Name: "ok", Type: row.TypeBool, Nullable: true},
	{Name: "qty", Type: row.TypeInt2, Nullable: true},
	{Name: "n", Type: row.TypeInt4, Nullable: true},
	{Name: "r", Type: row.TypeFloat4, Nullable: true},
	{Name: "d", Type: row.TypeFloat8, Nullable: true},
	{Name: "total", Type: row.TypeNumeric, Nullable: true},
	{Name: "raw", Type: row.TypeBytea, Nullable: true},
	{Name: "at", Type: row.TypeTimestampTZ, Nullable: true},
	{Name: "day", Type: row.TypeDate, Nullable: true},
	{Name: "doc", Type: row.TypeJSONB, Nullable: true},
	{Name: "uid", Type: row.TypeUUID, Nullable: true},
	{Name: "Größe \"x\"", Type: row.TypeText, Nullable: true},
}

// Key is the golden KEY, in KEY order: (customer, placed).
var Key = []string{"customer", "placed"}

// Row is one named golden row.
type Row struct {
	Name string
	Row  row.Row
}

// Rows returns the golden rows (a fresh slice each call: callers may keep
// or change it).
func Rows() []Row {
	uid := row.UUID{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}
	placed := row.Timestamp(1784368800000000) // 2026-07-18 10:00:00
	return []Row{
		{"typical", row.Row{int64(1), "acme", placed, true, int16(3), int32(42), float32(1.5), 0.1,
			row.Numeric("12.5"), []byte{0x0a, 0xff}, row.TimestampTZ(1784368800500000), row.Date(20652),
			row.JSON(`{"a": [1, null, "x"]}`), uid, "plain"}},
		{"nulls", row.Row{int64(2), "acme", placed + 1, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}},
		{"non_finite", row.Row{int64(3), "acme", placed + 2, false, int16(-32768), int32(-2147483648),
			float32(math.Inf(-1)), math.NaN(), row.Numeric("NaN"), []byte{}, row.TimestampTZ(math.MaxInt64),
			row.Date(0), row.JSON(`null`), row.UUID{}, ""}},
		{"extremes", row.Row{int64(math.MaxInt64), "acme", row.Timestamp(math.MinInt64), nil, int16(32767),
			int32(2147483647), float32(1e-7), 1e300, row.Numeric("-12345678901234567890.000001"), nil,
			row.TimestampTZ(0), row.Date(-1), row.JSON(`[]`), nil, "tab\there"}},
		{"non_ascii_key", row.Row{int64(-9007199254740993), "Grüße, 東京 \"q\" \\ \n\t\x01 😀", placed, nil, nil,
			nil, nil, math.Copysign(0, -1), row.Numeric("0"), nil, nil, nil, nil, nil, "Ünïcode ✓"}},
	}
}
