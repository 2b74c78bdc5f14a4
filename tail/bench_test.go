package tail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

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
// writes it (formatter.StreamRuns). ns/op and B/op are per whole snapshot: the
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
		var buf formatter.RunBuffer
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
			for _, r := range formatter.StreamRuns(enc, out, &buf) {
				bytes += len(r)
			}
		}
		buf.Release()
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

// BenchmarkFanOut is issue 19's live fan-out without the network: subs
// subscribers (COPY text with PROGRESS, encoded as a session does) on one
// shared tail while a writer appends batches of 10 rows as fast as
// storage takes them; an op is one batch reaching every subscriber. It
// reports the process's CPU per delivered row and the Next calls per
// subscriber per batch (each Next is one socket write in a session): a
// subscriber that falls behind takes its backlog in one Next.
//
// Each subscriber's session is a goroutine blocking in Next, or, parked,
// served as pgwire serves parked connections: GOMAXPROCS goroutines take
// woken subscribers in turn, ask Ready, call Next while it reports true,
// and leave the subscriber to its wake when it reports false. Paced, the
// writer appends a batch of one row every 10 ms (100 rows/s, as bench
// (c)'s writer for 10,000 subscribers) instead of as fast as it can.
//
//	go test -run '^$' -bench FanOut -benchtime 300x ./tail/
func BenchmarkFanOut(b *testing.B) {
	for _, parked := range []bool{false, true} {
		for _, subs := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("parked=%v/subs=%d", parked, subs), func(b *testing.B) { benchFanOut(b, subs, 10, parked, 0) })
		}
	}
	b.Run("parked=true/subs=10000/paced", func(b *testing.B) { benchFanOut(b, 10000, 1, true, 10*time.Millisecond) })
}

// fanOutSub is a subscriber of BenchmarkFanOut and its session's state.
type fanOutSub struct {
	s     *Subscriber
	enc   *formatter.CopyEncoder
	buf   []byte
	wake  func() // parked: queues the subscriber for the workers
	n     int64  // Next calls
	data  int64  // data rows delivered
	final uint64
}

// next takes the subscriber's next rows and encodes them; done once it
// delivered the progress to final.
func (f *fanOutSub) next(ctx context.Context) (done bool, err error) {
	out, err := f.s.Next(ctx, 0)
	if err != nil {
		return false, err
	}
	f.n++
	for _, r := range out {
		if !r.Progressed {
			f.data++
		}
	}
	formatter.Runs(f.enc, out, &f.buf)
	last := out[len(out)-1]
	return last.Progressed && last.Time >= f.final, nil
}

func benchFanOut(b *testing.B, subs, perBatch int, parked bool, pace time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := persist.NewClient(blobmem.New(), consmem.New(), persist.Config{CompactionMinInputs: -1, ReaderHeartbeat: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	shard := persist.NewShardID()
	if _, err := p.CreateShard(ctx, shard, schema); err != nil {
		b.Fatal(err)
	}
	w, err := p.OpenWriter(ctx, shard)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.CompareAndAppend(ctx, nil, 0, 1); err != nil {
		b.Fatal(err)
	}
	m := NewManager(p, Config{})
	defer m.Close()
	opts := &formatter.Options{Relation: schema, Progress: true}
	final := uint64(1 + b.N) // one time per batch
	var wg sync.WaitGroup
	all := make([]*fanOutSub, subs)
	woken := make(chan *fanOutSub, subs) // each at most once: a wake per park
	for i := range all {
		s, err := m.Subscribe(ctx, subscribe.Request{Shard: shard, AsOf: 0, Output: opts})
		if err != nil {
			b.Fatal(err)
		}
		f := &fanOutSub{s: s, enc: formatter.NewCopyEncoder(opts, formatter.CopyText), final: final}
		f.wake = func() { woken <- f }
		all[i] = f
		wg.Add(1)
		if parked {
			woken <- f
			continue
		}
		go func() {
			defer wg.Done()
			for {
				done, err := f.next(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if done {
					return
				}
			}
		}()
	}
	if parked {
		var workers sync.WaitGroup
		defer workers.Wait()
		defer close(woken)
		for range runtime.GOMAXPROCS(0) {
			workers.Go(func() {
				for f := range woken {
					for f.s.Ready(f.wake) {
						done, err := f.next(ctx)
						if err != nil {
							b.Error(err)
						}
						if done || err != nil {
							wg.Done()
							break
						}
					}
				}
			})
		}
	}
	cpu0 := processCPU(b)
	b.ResetTimer()
	next := time.Now()
	for i := range b.N {
		if pace > 0 {
			next = next.Add(pace)
			time.Sleep(time.Until(next))
		}
		ups := make([]row.Update, perBatch)
		for j := range ups {
			ups[j] = row.Update{Row: row.Row{int64(i*perBatch + j), fmt.Sprintf("%064x", i*perBatch+j)}, T: uint64(1 + i), Diff: 1}
		}
		if err := w.CompareAndAppend(ctx, ups, uint64(1+i), uint64(2+i)); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	b.StopTimer()
	cpu := processCPU(b) - cpu0
	var nexts, rows int64
	for _, f := range all {
		nexts += f.n
		rows += f.data
		f.s.Close()
	}
	if want := int64(subs * b.N * perBatch); rows != want {
		b.Fatalf("delivered %d rows, want %d", rows, want)
	}
	b.ReportMetric(cpu*1e6/float64(rows), "cpu-µs/row")
	b.ReportMetric(float64(nexts)/float64(subs*b.N), "nexts/batch")
}
