package pgrepr

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/shardtail/shardtail/row"
)

var (
	benchText64 = strings.Repeat("abcdefgh", 8)
	benchTypes  = []row.Type{row.TypeNumeric, row.TypeInt8, row.TypeInt8, row.TypeText, row.TypeTimestampTZ, row.TypeFloat8, row.TypeBool}
	benchRow    = row.Row{row.Numeric("1700000000123"), int64(1), int64(424242), benchText64, row.TimestampTZ(1700000000123456), 3.14159, true}
)

func benchAppend(b *testing.B, f func([]byte, row.Type, row.Datum) []byte, t row.Type, d row.Datum) {
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = f(buf[:0], t, d)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkAppendText(b *testing.B) {
	b.Run("Int8", func(b *testing.B) { benchAppend(b, AppendText, row.TypeInt8, int64(-1234567890123)) })
	b.Run("Text64", func(b *testing.B) { benchAppend(b, AppendText, row.TypeText, benchText64) })
	b.Run("Float8", func(b *testing.B) { benchAppend(b, AppendText, row.TypeFloat8, 1234.5678) })
	b.Run("Numeric", func(b *testing.B) { benchAppend(b, AppendText, row.TypeNumeric, row.Numeric("-1234567.891")) })
	b.Run("TimestampTZ", func(b *testing.B) {
		benchAppend(b, AppendText, row.TypeTimestampTZ, row.TimestampTZ(1700000000123456))
	})
	b.Run("UUID", func(b *testing.B) { benchAppend(b, AppendText, row.TypeUUID, row.UUID{1, 2, 3}) })
}

func BenchmarkAppendBinary(b *testing.B) {
	b.Run("Int8", func(b *testing.B) { benchAppend(b, AppendBinary, row.TypeInt8, int64(-1234567890123)) })
	b.Run("Text64", func(b *testing.B) { benchAppend(b, AppendBinary, row.TypeText, benchText64) })
	b.Run("Numeric", func(b *testing.B) { benchAppend(b, AppendBinary, row.TypeNumeric, row.Numeric("-1234567.891")) })
	b.Run("TimestampTZ", func(b *testing.B) {
		benchAppend(b, AppendBinary, row.TypeTimestampTZ, row.TimestampTZ(1700000000123456))
	})
}

func BenchmarkMzTimestamp(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.Run("Text", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendNumericUint64Text(buf[:0], 1700000000123)
		}
	})
	b.Run("Binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendNumericUint64Binary(buf[:0], 1700000000123)
		}
	})
}

func BenchmarkAppendCopyTextRow(b *testing.B) {
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendCopyTextRow(buf[:0], benchTypes, benchRow)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkAppendCopyCSVRow(b *testing.B) {
	buf := make([]byte, 0, 1024)
	o := DefaultCSVOptions()
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendCopyCSVRow(buf[:0], benchTypes, benchRow, o)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkAppendCopyBinaryRow(b *testing.B) {
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendCopyBinaryRow(buf[:0], benchTypes, benchRow)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkParseText(b *testing.B) {
	for _, c := range []struct {
		name string
		t    row.Type
		s    string
	}{
		{"Int8", row.TypeInt8, "-1234567890123"},
		{"Float8", row.TypeFloat8, "1234.5678"},
		{"Numeric", row.TypeNumeric, "-1234567.891"},
		{"TimestampTZ", row.TypeTimestampTZ, "2024-01-02 03:04:05.123456+02"},
		{"JSONB", row.TypeJSONB, `{"b": [1, 2, 3], "a": {"x": "y"}}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseText(c.t, c.s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCopyReaderText(b *testing.B) {
	var data []byte
	for i := 0; i < 1000; i++ {
		data = AppendCopyTextRow(data, benchTypes, benchRow)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		cr, _ := NewCopyTextReader(bytes.NewReader(data), DefaultTextOptions())
		var r row.Row
		var err error
		for {
			if r, err = cr.ReadRow(benchTypes, r); err != nil {
				break
			}
		}
		if err != io.EOF {
			b.Fatal(err)
		}
	}
}
