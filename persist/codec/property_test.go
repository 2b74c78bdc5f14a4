package codec

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shardtail/shardtail/row"
)

// randDatum returns a random value of type t, biased towards edge values
// and small domains so that rows collide and consolidate.
func randDatum(rng *rand.Rand, t row.Type) row.Datum {
	if rng.IntN(6) == 0 {
		vals := edgeValues(t)
		return vals[rng.IntN(len(vals))]
	}
	switch t {
	case row.TypeBool:
		return rng.IntN(2) == 0
	case row.TypeInt2:
		return int16(rng.Uint32())
	case row.TypeInt4:
		return int32(rng.IntN(20) - 10)
	case row.TypeInt8:
		return int64(rng.Uint64())
	case row.TypeFloat4:
		return float32(rng.NormFloat64())
	case row.TypeFloat8:
		return math.Float64frombits(rng.Uint64()) // any bits, NaN payloads included
	case row.TypeNumeric:
		n, err := row.NormalizeNumeric(fmt.Sprintf("%d.%03de%d", rng.IntN(2000)-1000, rng.IntN(1000), rng.IntN(10)-5))
		if err != nil {
			panic(err)
		}
		return n
	case row.TypeText:
		return randText(rng)
	case row.TypeBytea:
		b := make([]byte, rng.IntN(20))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	case row.TypeTimestamp:
		return row.Timestamp(rng.Int64() - math.MaxInt64/2)
	case row.TypeTimestampTZ:
		return row.TimestampTZ(rng.Int64N(1 << 50))
	case row.TypeDate:
		return row.Date(rng.Int32() - math.MaxInt32/2)
	case row.TypeJSONB:
		b, err := json.Marshal(map[string]any{"k": rng.IntN(10), "s": randText(rng)})
		if err != nil {
			panic(err)
		}
		return row.JSON(b)
	case row.TypeUUID:
		var u row.UUID
		for i := range u {
			u[i] = byte(rng.Uint32())
		}
		return u
	}
	panic(t)
}

func randText(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(12) {
		switch rng.IntN(4) {
		case 0:
			b.WriteRune(rune(0x80 + rng.IntN(0x700)))
		case 1:
			b.WriteRune(rune(0x10000 + rng.IntN(0x1000)))
		default:
			b.WriteByte(byte('a' + rng.IntN(26)))
		}
	}
	return b.String()
}

func randSchema(rng *rand.Rand) row.Schema {
	var s row.Schema
	for i := range rng.IntN(6) {
		s.Columns = append(s.Columns, row.Column{
			Name:     fmt.Sprintf("c%d", i),
			Type:     allTypes[rng.IntN(len(allTypes))],
			Nullable: rng.IntN(2) == 0,
		})
	}
	return s
}

func randUpdates(rng *rand.Rand, s row.Schema, n int) []row.Update {
	us := make([]row.Update, n)
	for i := range us {
		r := make(row.Row, len(s.Columns))
		for j, c := range s.Columns {
			if c.Nullable && rng.IntN(4) == 0 {
				continue
			}
			r[j] = randDatum(rng, c.Type)
		}
		us[i] = row.Update{Row: r, T: uint64(rng.IntN(5)), Diff: int64(rng.IntN(7) - 3)}
	}
	return row.Consolidate(us)
}

// TestPropertyRoundtrip: for random schemas, rows and configs, decoding
// an encoded part gives back exactly the updates, both ways.
func TestPropertyRoundtrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	iters := 300
	if testing.Short() {
		iters = 50
	}
	for i := range iters {
		s := randSchema(rng)
		us := randUpdates(rng, s, rng.IntN(400))
		c := Config{BatchRows: 1 + rng.IntN(64)}
		if rng.IntN(2) == 0 {
			c.BatchBytes = 128<<10 + rng.IntN(64<<10) // rows reach ~100 KiB
			c.MaxBatchDecodedBytes = int64(c.BatchBytes)
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			roundtrip(t, c, s, us)
		})
	}
}

func TestCanonicalNumericMatchesNormalize(t *testing.T) {
	cases := []string{
		"", "-", "0", "-0", "00", "01", "1", "-1", "10", "1.", "1.0", "1.5", "1.50", ".5", "0.5", "-0.5",
		"-0.0", "0.05", "NaN", "nan", "-NaN", "Infinity", "1e3", "+1", " 1", "1 ", "1.2.3", "٣", "0x10",
		"12345678901234567890.00000000000000000001",
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const alphabet = "0123456789.-+eEN a"
	for range 20000 {
		var b strings.Builder
		for range 1 + rng.IntN(8) {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		cases = append(cases, b.String())
	}
	for _, s := range cases {
		n, err := row.NormalizeNumeric(s)
		want := err == nil && string(n) == s
		if got := canonicalNumeric(s); got != want {
			t.Errorf("canonicalNumeric(%q) = %v, NormalizeNumeric gives %q, %v", s, got, n, err)
		}
	}
}
