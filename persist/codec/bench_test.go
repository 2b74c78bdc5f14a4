package codec

import (
	"io"
	"math/rand/v2"
	"testing"

	"github.com/shardtail/shardtail/row"
)

var benchSchema = row.Schema{Columns: []row.Column{
	{Name: "id", Type: row.TypeInt8},
	{Name: "payload", Type: row.TypeText, Nullable: true},
}}

// benchUpdates returns n consolidated updates of benchSchema: ascending
// ids, 64 random lowercase letters, times within a second.
func benchUpdates(n int) []row.Update {
	rng := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyz"
	us := make([]row.Update, n)
	var b [64]byte
	for i := range us {
		for j := range b {
			b[j] = letters[rng.IntN(len(letters))]
		}
		us[i] = row.Update{
			Row:  row.Row{int64(i) * 7919, string(b[:])},
			T:    1_700_000_000_000 + uint64(rng.IntN(1000)),
			Diff: 1,
		}
	}
	return us
}

const benchRows = 1_000_000

func BenchmarkEncodePart(b *testing.B) {
	us := benchUpdates(benchRows)
	var size int
	b.ReportAllocs()
	for b.Loop() {
		data, _, err := EncodePart(benchSchema, us)
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(size), "part-bytes")
	b.ReportMetric(float64(size)/benchRows, "bytes/row")
}

// encodedForBench encodes us as one part and starts b's accounting of
// decoding it: allocations, and the part's bytes per op.
func encodedForBench(b *testing.B, us []row.Update) []byte {
	b.Helper()
	data, _, err := EncodePart(benchSchema, us)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	return data
}

func BenchmarkDecodePart(b *testing.B) {
	data := encodedForBench(b, benchUpdates(benchRows))
	for b.Loop() {
		got, err := DecodePart(benchSchema, data)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != benchRows {
			b.Fatalf("got %d rows", len(got))
		}
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(len(data))/benchRows, "bytes/row")
}

// BenchmarkPartReader decodes the same part batch by batch, as the snapshot
// cursor does, without accumulating the result.
func BenchmarkPartReader(b *testing.B) {
	us := benchUpdates(benchRows)
	data, _, err := EncodePart(benchSchema, us)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r, err := NewPartReader(benchSchema, data)
		if err != nil {
			b.Fatal(err)
		}
		for {
			batch, err := r.Next()
			if err != nil {
				break
			}
			_ = batch
		}
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkEncodeSmallPart measures the fixed cost of a part: 100 rows,
// as a writer flushing a small append produces.
func BenchmarkEncodeSmallPart(b *testing.B) {
	us := benchUpdates(100)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := EncodePart(benchSchema, us); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeSmallPart(b *testing.B) {
	data, _, err := EncodePart(benchSchema, benchUpdates(100))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodePart(benchSchema, data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPartReaderColumns decodes the same part batch by batch as
// columns (NextColumns), as a snapshot passed through does (issue 19's big
// read): decompression and the checks, no datum per value.
func BenchmarkPartReaderColumns(b *testing.B) {
	// bench (b)'s rows (bench's payload): ascending ids, 64 pseudo-random
	// hex digits, one time.
	us := make([]row.Update, benchRows)
	const hexdigits = "0123456789abcdef"
	var p [64]byte
	for i := range us {
		x := uint64(i)*0x9E3779B97F4A7C15 + 1
		for j := range p {
			if j%16 == 0 && j > 0 {
				x = x*6364136223846793005 + 1442695040888963407
			}
			p[j] = hexdigits[(x>>(4*(j%16)))&15]
		}
		us[i] = row.Update{Row: row.Row{int64(i), string(p[:])}, T: 1, Diff: 1}
	}
	data := encodedForBench(b, us)
	for b.Loop() {
		r, err := NewPartReader(benchSchema, data)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			c, err := r.NextColumns()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n += c.Len
		}
		if n != benchRows {
			b.Fatalf("got %d rows", n)
		}
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
