package tail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/subscribe"
)

// BenchmarkSnapshotCopy1M is issue 19's big read on the fast path, without
// the network: one subscriber reads a 1,000,000-row snapshot of (bigint,
// 64-byte text) through a shared tail, and every row is encoded as COPY
// text the way a COPY (SUBSCRIBE ... WITH (PROGRESS)) TO STDOUT session
// writes it (formatter.Runs). ns/op and B/op are per whole snapshot: the
// server's CPU and allocations of one read, less the socket writes.
//
//	go test -run '^$' -bench SnapshotCopy1M -benchtime 5x -benchmem ./tail/
func BenchmarkSnapshotCopy1M(b *testing.B) {
	const n = 1_000_000
	ctx := context.Background()
	m, shard := bigShard(b, n)
	opts := &formatter.Options{Relation: schema, Progress: true}
	b.ReportAllocs()
	var bytes int
	cpu0 := processCPU(b)
	for b.Loop() {
		s, err := m.Subscribe(ctx, subscribe.Request{Shard: shard, AsOf: 1, Snapshot: true, Output: opts})
		if err != nil {
			b.Fatal(err)
		}
		enc := formatter.NewCopyEncoder(opts, formatter.CopyText)
		var buf []byte
		rows := 0
		bytes = 0
		for rows < n+2 { // the data rows and the progress rows around them
			out, err := s.Next(ctx, 0)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			rows += len(out)
			for _, r := range formatter.Runs(enc, out, &buf) {
				bytes += len(r)
			}
		}
		s.Close()
		if rows != n+2 {
			b.Fatalf("got %d rows, want %d", rows, n+2)
		}
	}
	b.SetBytes(int64(bytes))
	// The process's CPU time (every goroutine: read-ahead, the collector)
	// per read, which a loaded machine does not inflate as it does ns/op.
	b.ReportMetric((processCPU(b)-cpu0)/float64(b.N), "cpu-s/op")
}

// BenchmarkSnapshotFetch10 is issue 19's FETCH 10 on a new cursor, without
// the network: a new subscriber of the 1,000,000-row snapshot takes its
// first 10 rows and leaves. Each subscriber has a new AS OF (the shard's
// upper advances between them), so that no share of an earlier one serves
// it: every op opens a snapshot cursor and reads its first piece.
//
//	go test -run '^$' -bench SnapshotFetch10 -benchtime 200x -benchmem ./tail/
func BenchmarkSnapshotFetch10(b *testing.B) {
	ctx := context.Background()
	m, shard := bigShard(b, 1_000_000)
	opts := &formatter.Options{Relation: schema, Progress: true}
	w, err := m.persist.OpenWriter(ctx, shard)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	upper := uint64(2)
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		if err := w.CompareAndAppend(ctx, nil, upper, upper+1); err != nil {
			b.Fatal(err)
		}
		upper++
		s, err := m.Subscribe(ctx, subscribe.Request{Shard: shard, AsOf: upper - 1, Snapshot: true, Output: opts})
		if err != nil {
			b.Fatal(err)
		}
		var rows int
		for rows < 10 {
			out, err := s.Next(ctx, 10-rows)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range out {
				if !r.Progressed {
					rows++
				}
			}
		}
		s.Close()
	}
	b.ReportMetric((processCPU(b)-cpu0)/float64(b.N), "cpu-s/op")
}

// bigShard writes a shard of n rows of (bigint, 64-byte text) at time 1,
// upper 2, in one batch, and returns a tail manager over it.
func bigShard(b *testing.B, n int) (*Manager, string) {
	b.Helper()
	ctx := context.Background()
	p, err := persist.NewClient(blobmem.New(), consmem.New(), persist.Config{CompactionMinInputs: -1, ReaderHeartbeat: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	shard := persist.NewShardID()
	if _, err := p.CreateShard(ctx, shard, schema); err != nil {
		b.Fatal(err)
	}
	w, err := p.OpenWriter(ctx, shard)
	if err != nil {
		b.Fatal(err)
	}
	ups := make([]row.Update, n)
	for i := range ups {
		ups[i] = row.Update{Row: row.Row{int64(i), fmt.Sprintf("%064x", uint64(i)*0x9E3779B97F4A7C15)}, T: 1, Diff: 1}
	}
	if err := w.CompareAndAppend(ctx, ups, 0, 2); err != nil {
		b.Fatal(err)
	}
	m := NewManager(p, Config{})
	b.Cleanup(m.Close)
	return m, shard
}

// processCPU returns the process's user and system CPU seconds so far.
func processCPU(b *testing.B) float64 {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	sec := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return sec(ru.Utime) + sec(ru.Stime)
}
