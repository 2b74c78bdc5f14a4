package pgsink_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/consumer/pgsink"
	"github.com/shardtail/shardtail/internal/testsupport/pgtest"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

var benchRows = flag.Int("sink-bench-rows", 200_000, "BenchmarkSnapshot: rows in the snapshot (the target is 1,000,000)")

// BenchmarkSnapshot lands a snapshot of -sink-bench-rows rows from
// shardtail into PostgreSQL through the sink, and in the same run copies
// the same rows into PostgreSQL with its own COPY FROM: the metric
// sink/copy is the sink's speed as a fraction of COPY's (the goal is at
// least 0.5).
func BenchmarkSnapshot(b *testing.B) {
	ctx := context.Background()
	srv := testserver.Start(b, testserver.Options{})
	src, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close(ctx)
	if _, err := src.Exec(ctx, "CREATE TABLE snap (id int8, name text, amount numeric, paid bool)"); err != nil {
		b.Fatal(err)
	}
	rows := make([][]any, *benchRows)
	for i := range rows {
		rows[i] = []any{int64(i), fmt.Sprintf("customer-%d", i), fmt.Sprintf("%d.%02d", i%10000, i%100), i%2 == 0}
	}
	for off := 0; off < len(rows); off += 50_000 {
		chunk := rows[off:min(off+50_000, len(rows))]
		if _, err := src.CopyFrom(ctx, pgx.Identifier{"snap"}, []string{"id", "name", "amount", "paid"}, pgx.CopyFromRows(chunk)); err != nil {
			b.Fatalf("load source: %v", err)
		}
	}
	var sinkTime, copyTime time.Duration
	for i := range b.N {
		target := pgtest.URL(b)
		dst, err := pgx.Connect(ctx, target)
		if err != nil {
			b.Fatal(err)
		}
		// PostgreSQL's own COPY FROM of the same rows, into the table
		// the sink would create.
		if _, err := dst.Exec(ctx, "CREATE TABLE copied (id int8, name text, amount numeric, paid bool, PRIMARY KEY (id))"); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := dst.CopyFrom(ctx, pgx.Identifier{"copied"}, []string{"id", "name", "amount", "paid"}, pgx.CopyFromRows(rows)); err != nil {
			b.Fatal(err)
		}
		copyTime += time.Since(start)
		dst.Close(ctx)

		table := pgsink.Table{Name: "snap", Key: []string{"id"}}
		sink, err := pgsink.New(ctx, pgsink.Config{URL: target, Name: fmt.Sprint("bench", i), Tables: []pgsink.Table{table}})
		if err != nil {
			b.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		landed := consumer.SinkFunc(func(ctx context.Context, bt consumer.Batch) error {
			err := sink.Write(ctx, bt)
			if err == nil && bt.Snapshot && !bt.Partial {
				defer cancel() // after Run commits it
			}
			return err
		})
		start = time.Now()
		go func() {
			done <- consumer.Run(rctx, consumer.Config{URL: srv.URL(), Sources: []consumer.Source{{Name: "snap", Envelope: table.Envelope()}}, Checkpoint: sink}, combined{landed, sink})
		}()
		<-done
		sinkTime += time.Since(start)
		sink.Close(ctx)
	}
	b.ReportMetric(float64(*benchRows)*float64(b.N)/sinkTime.Seconds(), "sink-rows/s")
	b.ReportMetric(float64(*benchRows)*float64(b.N)/copyTime.Seconds(), "copy-rows/s")
	b.ReportMetric(copyTime.Seconds()/sinkTime.Seconds(), "sink/copy")
}

// combined is a sink whose Write is one value and whose Abort is another's.
type combined struct {
	consumer.SinkFunc
	a consumer.Aborter
}

func (c combined) Abort(ctx context.Context) error { return c.a.Abort(ctx) }

var (
	benchRate     = flag.Int("sink-bench-rate", 10_000, "BenchmarkSteady: changes per second written to the source")
	benchDuration = flag.Duration("sink-bench-duration", 10*time.Second, "BenchmarkSteady: how long to write")
	benchDelay    = flag.Duration("sink-bench-delay", 20*time.Millisecond, "BenchmarkSteady: MaxBatchDelay")
)

// latencySink wraps a pgsink.Sink and records, at each commit, how long
// ago each of the batch's rows was written to the source (its second
// column is the write's wall clock in microseconds).
type latencySink struct {
	*pgsink.Sink
	pending []int64
	lat     []time.Duration
	last    time.Time // the last commit that landed a change
}

func (l *latencySink) Write(ctx context.Context, b consumer.Batch) error {
	for _, u := range b.Updates {
		if u.State == "upsert" && !b.Snapshot {
			l.pending = append(l.pending, u.Values[1].(int64))
		}
	}
	return l.Sink.Write(ctx, b)
}

func (l *latencySink) Commit(ctx context.Context, expected, next consumer.Position) error {
	if err := l.Sink.Commit(ctx, expected, next); err != nil {
		return err
	}
	now := time.Now()
	for _, us := range l.pending {
		l.lat = append(l.lat, now.Sub(time.UnixMicro(us)))
	}
	if len(l.pending) > 0 {
		l.last = now
	}
	l.pending = l.pending[:0]
	return nil
}

func (l *latencySink) Abort(ctx context.Context) error {
	l.pending = l.pending[:0]
	return l.Sink.Abort(ctx)
}

// BenchmarkSteady writes -sink-bench-rate changes per second into a
// shardtail table for -sink-bench-duration while the sink lands them in
// PostgreSQL. It reports the rate the writer achieved (changes/s), the rate
// the sink landed them at (landed-changes/s: changes committed to the
// target, over the time from the first write to the last such commit), the
// fraction landed, and the p50/p99 latency from the source write to the
// target commit (the goal: 10,000/s, p99 under 200 ms). The latency needs
// a quiet machine:
//
//	go test -run '^$' -bench Steady -benchtime 1x ./consumer/pgsink/ -sink-bench-rate 10000 -sink-bench-duration 30s
func BenchmarkSteady(b *testing.B) {
	ctx := context.Background()
	srv := testserver.Start(b, testserver.Options{Tick: 10 * time.Millisecond})
	src, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close(ctx)
	if _, err := src.Exec(ctx, "CREATE TABLE steady (id int8, written int8)"); err != nil {
		b.Fatal(err)
	}
	var all []time.Duration
	var written int
	var elapsed, landing time.Duration
	for i := range b.N {
		target := pgtest.URL(b)
		table := pgsink.Table{Name: "steady", Key: []string{"id"}}
		s, err := pgsink.New(ctx, pgsink.Config{URL: target, Name: fmt.Sprint("steady", i), Tables: []pgsink.Table{table}})
		if err != nil {
			b.Fatal(err)
		}
		ls := &latencySink{Sink: s}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- consumer.Run(rctx, consumer.Config{URL: srv.URL(), Sources: []consumer.Source{{Name: "steady", Envelope: table.Envelope()}},
				Checkpoint: ls, MaxBatchDelay: *benchDelay, FetchTimeout: 10 * time.Millisecond}, ls)
		}()
		start := time.Now()
		next := int64(i) << 40
		for time.Since(start) < *benchDuration {
			due := int(time.Since(start).Seconds()*float64(*benchRate)) - written
			if due <= 0 {
				time.Sleep(time.Millisecond)
				continue
			}
			rows := make([][]any, due)
			now := time.Now().UnixMicro()
			for j := range rows {
				rows[j] = []any{next, now}
				next++
			}
			if _, err := src.CopyFrom(ctx, pgx.Identifier{"steady"}, []string{"id", "written"}, pgx.CopyFromRows(rows)); err != nil {
				b.Fatal(err)
			}
			written += due
		}
		elapsed += time.Since(start)
		time.Sleep(time.Second) // let the last batches land
		cancel()
		<-done
		all = append(all, ls.lat...)
		if !ls.last.IsZero() {
			landing += ls.last.Sub(start)
		}
		s.Close(ctx)
	}
	slices.Sort(all)
	if len(all) == 0 {
		b.Fatal("nothing landed")
	}
	b.ReportMetric(float64(written)/elapsed.Seconds(), "changes/s")
	b.ReportMetric(float64(len(all))/landing.Seconds(), "landed-changes/s")
	b.ReportMetric(float64(all[len(all)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Milliseconds()), "p99-ms")
	b.Logf("wrote %d changes at %.0f/s, landed %d (%.0f/s); source write to target commit p50 %v, p99 %v, max %v",
		written, float64(written)/elapsed.Seconds(), len(all), float64(len(all))/landing.Seconds(),
		all[len(all)/2], all[len(all)*99/100], all[len(all)-1])
	b.ReportMetric(float64(len(all))/float64(written), "landed/written")
}
