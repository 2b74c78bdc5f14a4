package formatter

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shardtail/shardtail/row"
)

// BenchmarkSnapshotCopyText measures the formatter's share of a COPY text
// snapshot read, per chunk of 8192 rows of (id bigint, payload text ~64 B)
// (issue 19's big read): output rows from the chunk (Data), marked Shared,
// and encoded once as CopyData messages, as the fast path does for every
// snapshot piece.
func BenchmarkSnapshotCopyText(b *testing.B) {
	const n = 8192
	opts := &Options{Relation: row.Schema{Columns: []row.Column{
		{Name: "id", Type: row.TypeInt8},
		{Name: "payload", Type: row.TypeText},
	}}}
	updates := make([]row.Update, n)
	for i := range updates {
		payload := fmt.Sprintf("payload-%d-%s", i, strings.Repeat("x", 64))[:64]
		updates[i] = row.Update{Row: row.Row{int64(i), payload}, T: 1, Diff: 1}
	}
	enc := NewCopyEncoder(opts, CopyText)
	var buf []byte
	bytes := 0
	b.ReportAllocs()
	for b.Loop() {
		rows := Shared(opts.Data(1, updates))
		bytes = 0
		for _, m := range Messages(enc, rows, &buf) {
			bytes += len(m)
		}
	}
	b.SetBytes(int64(bytes))
}
