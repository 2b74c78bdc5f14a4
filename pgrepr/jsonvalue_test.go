package pgrepr

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/shardtail/shardtail/row"
)

// TestAppendJSONValueGolden pins the JSON contract of every column type:
// the HTTP feed's rows and the sinks' keys and values are built from it,
// and a reader in another language depends on it not changing. Change an
// expectation here only with a release note.
func TestAppendJSONValueGolden(t *testing.T) {
	uuid := row.UUID{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}
	for _, tc := range []struct {
		typ  row.Type
		d    row.Datum
		want string
	}{
		{row.TypeText, nil, `null`},
		{row.TypeInt8, nil, `null`},
		{row.TypeBool, true, `true`},
		{row.TypeBool, false, `false`},
		{row.TypeInt2, int16(-32768), `-32768`},
		{row.TypeInt4, int32(2147483647), `2147483647`},
		{row.TypeInt8, int64(9007199254740993), `"9007199254740993"`},
		{row.TypeInt8, int64(-1), `"-1"`},
		{row.TypeFloat4, float32(1.5), `1.5`},
		{row.TypeFloat4, float32(1e-7), `1e-07`},
		{row.TypeFloat8, 0.1, `0.1`},
		{row.TypeFloat8, 1e300, `1e+300`},
		{row.TypeFloat8, math.Copysign(0, -1), `-0`},
		{row.TypeFloat8, math.NaN(), `null`},
		{row.TypeFloat8, math.Inf(1), `null`},
		{row.TypeFloat4, float32(math.Inf(-1)), `null`},
		{row.TypeNumeric, row.Numeric("12345678901234567890.000001"), `"12345678901234567890.000001"`},
		{row.TypeNumeric, row.Numeric("NaN"), `"NaN"`},
		{row.TypeText, "", `""`},
		{row.TypeText, "Grüße, 東京 \"q\" \\ \n\t\x01", `"Grüße, 東京 \"q\" \\ \n\t\u0001"`},
		{row.TypeBytea, []byte{0x0a, 0xff}, `"\\x0aff"`},
		{row.TypeBytea, []byte{}, `"\\x"`},
		{row.TypeTimestamp, row.Timestamp(1784368800000000), `"2026-07-18 10:00:00"`},
		{row.TypeTimestamp, row.Timestamp(1784368800000123), `"2026-07-18 10:00:00.000123"`},
		{row.TypeTimestampTZ, row.TimestampTZ(1784368800500000), `"2026-07-18 10:00:00.5+00"`},
		{row.TypeTimestamp, row.Timestamp(math.MaxInt64), `"infinity"`},
		{row.TypeDate, row.Date(20652), `"2026-07-18"`},
		{row.TypeJSONB, row.JSON(`{"a": [1, null, "x"]}`), `{"a": [1, null, "x"]}`},
		{row.TypeUUID, uuid, `"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`},
	} {
		got := string(AppendJSONValue([]byte("prefix:"), tc.typ, tc.d))
		if got != "prefix:"+tc.want {
			t.Errorf("AppendJSONValue(%s, %#v) = %s, want %s", tc.typ, tc.d, got[len("prefix:"):], tc.want)
		}
		if !json.Valid([]byte(tc.want)) {
			t.Errorf("golden %s is not valid JSON", tc.want)
		}
	}
}

// TestAppendJSONValueValid encodes every value of the PostgreSQL golden
// files (every type, edge cases included): the output is valid JSON, and a
// JSON string holds exactly the value's text output.
func TestAppendJSONValueValid(t *testing.T) {
	n := 0
	for _, v := range readGoldenValues(t) {
		if v.isErr {
			continue
		}
		d, err := ParseText(v.typ, v.input)
		if err != nil {
			continue // a documented gap of ParseText, tested by TestGoldenValues
		}
		n++
		out := AppendJSONValue(nil, v.typ, d)
		if !json.Valid(out) {
			t.Fatalf("line %d: %s %q: invalid JSON %s", v.line, v.typName, v.input, out)
		}
		var s string
		if v.typ != row.TypeJSONB && out[0] == '"' && json.Unmarshal(out, &s) == nil {
			if want := string(AppendText(nil, v.typ, d)); s != want {
				t.Errorf("line %d: %s %q: JSON string %q, want the text output %q", v.line, v.typName, v.input, s, want)
			}
		}
	}
	if n < 100 {
		t.Fatalf("only %d golden values encoded; the golden files did not load", n)
	}
}
