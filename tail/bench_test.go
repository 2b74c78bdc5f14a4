package tail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/persist"
	blobfile "github.com/shardtail/shardtail/persist/blob/file"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/persist/consensus/sqlite"
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
	m, shard := bigShard(b, n, blobmem.New(), consmem.New())
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
// first 10 rows and leaves. A share that did not read its whole snapshot
// goes with its last subscriber, so every op opens a snapshot cursor and
// reads its first piece (checked). The shard is on the server's storage, a
// file blob (parts are mapped, not copied) and SQLite consensus, whose
// fixed costs a FETCH 10 is made of.
//
//	go test -run '^$' -bench SnapshotFetch10 -benchtime 1000x -benchmem ./tail/
func BenchmarkSnapshotFetch10(b *testing.B) {
	ctx := context.Background()
	blob, err := blobfile.Open(ctx, filepath.Join(b.TempDir(), "blob"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { blob.Close() })
	cons, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(b.TempDir(), "consensus.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cons.Close() })
	m, shard := bigShard(b, 1_000_000, blob, cons)
	opts := &formatter.Options{Relation: schema, Progress: true}
	b.ReportAllocs()
	cursors := testutil.ToFloat64(m.metrics.shares)
	cpu0 := processCPU(b)
	for b.Loop() {
		s, err := m.Subscribe(ctx, subscribe.Request{Shard: shard, AsOf: 1, Snapshot: true, Output: opts})
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
	if got := testutil.ToFloat64(m.metrics.shares) - cursors; got != float64(b.N) {
		b.Fatalf("%v snapshot cursors opened for %d subscribers, want one each", got, b.N)
	}
}

// bigShard writes a shard of n rows of (bigint, 64-byte text) at time 1,
// upper 2, in one batch, on blob and cons, and returns a tail manager over
// it. The caller closes blob and cons, after the benchmark's cleanups.
func bigShard(b *testing.B, n int, blob persist.Blob, cons persist.Consensus) (*Manager, string) {
	b.Helper()
	ctx := context.Background()
	p, err := persist.NewClient(blob, cons, persist.Config{CompactionMinInputs: -1, ReaderHeartbeat: -1})
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
