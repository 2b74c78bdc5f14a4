package redissink

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/internal/testsupport/redistest"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/row"
)

// BenchmarkSnapshotLanding lands a snapshot of 1,000,000 rows (id bigint
// KEY, name text, qty int4, price numeric) in batches the size the consumer
// cuts by default (Partial chunks of about 4 MiB, then the closing batch),
// into a real redis-server; it reports keys/s. The source side is not in
// it: this is the sink's own landing rate.
func BenchmarkSnapshotLanding(b *testing.B) {
	const rows, perChunk = 1_000_000, 40_000
	cols := []row.Column{
		{Name: "id", Type: row.TypeInt8}, {Name: "name", Type: row.TypeText},
		{Name: "qty", Type: row.TypeInt4}, {Name: "price", Type: row.TypeNumeric},
	}
	chunks := make([]consumer.Batch, 0, rows/perChunk)
	for start := 0; start < rows; start += perChunk {
		c := consumer.Batch{Lower: 5, Upper: 5, Partial: true, Snapshot: true, Columns: wire(cols)}
		for id := start; id < start+perChunk && id < rows; id++ {
			c.Updates = append(c.Updates, consumer.Update{Timestamp: 5, Diff: 1,
				Values: []any{int64(id), fmt.Sprintf("customer %d", id), int32(id % 100), row.Numeric("12.5")}})
		}
		chunks = append(chunks, c)
	}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		srv := redistest.StartWith(b, redistest.Options{AppendFsync: "everysec"})
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ReadTimeout: time.Minute})
		sink, err := New(ctx, Config{Client: rdb, Namespace: "bench:", Key: []string{"id"}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sink.Load(ctx); err != nil {
			b.Fatal(err)
		}
		redisCPU0, clientCPU0 := redisCPU(b, rdb), processCPU(b)
		b.StartTimer()
		start := time.Now()
		for _, c := range chunks {
			if err := sink.Write(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
		if err := sink.Write(ctx, consumer.Batch{Lower: 5, Upper: 6, Snapshot: true, Columns: wire(cols)}); err != nil {
			b.Fatal(err)
		}
		if err := sink.Commit(ctx, consumer.Position{}, consumer.Position{Frontier: 6}); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rows)/time.Since(start).Seconds(), "keys/s")
		b.StopTimer()
		// Which side bounds the rate: CPU per key of redis-server and
		// of this process (the sink, and the benchmark's GC of its
		// prebuilt chunks), against wall time per key.
		redisUs := (redisCPU(b, rdb) - redisCPU0).Seconds() * 1e6 / rows
		clientUs := (processCPU(b) - clientCPU0).Seconds() * 1e6 / rows
		b.ReportMetric(redisUs, "redis-cpu-us/key")
		b.ReportMetric(clientUs, "client-cpu-us/key")
		b.Logf("per key: %.2f µs wall, %.2f µs redis-server CPU, %.2f µs client CPU",
			time.Since(start).Seconds()*1e6/rows, redisUs, clientUs)
		b.Logf("landed %d keys in %v: %.0f keys/s (%d in Redis)", rows, time.Since(start).Round(time.Millisecond),
			float64(rows)/time.Since(start).Seconds(), rdb.DBSize(ctx).Val())
		for _, line := range strings.Split(rdb.Info(ctx, "commandstats").Val(), "\n") {
			if strings.HasPrefix(line, "cmdstat_") {
				b.Logf("redis-side: %s", strings.TrimSpace(line))
			}
		}
		if got := sink.Stats().Applied; got != rows {
			b.Fatalf("applied %d keys, want %d", got, rows)
		}
		rdb.Close()
	}
}

// BenchmarkSteadyLatency measures how long a committed change takes to
// reach Redis: a writer updates one row 200 times, 20 ms apart, through a
// real server; the sink (consumer.Run, default batching but a 10 ms batch
// delay) lands it; a poller reads the key every millisecond. Latency is
// from the UPDATE's acknowledgement to the first read of its value; it
// reports p50 and p99.
func BenchmarkSteadyLatency(b *testing.B) {
	const updates = 200
	for range b.N {
		srv := testserver.Start(b, testserver.Options{Tick: 10 * time.Millisecond})
		rs := redistest.StartWith(b, redistest.Options{AppendFsync: "everysec"})
		rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, srv.URL())
		if err != nil {
			b.Fatal(err)
		}
		for _, sql := range []string{"CREATE TABLE t (k text, n bigint)", "INSERT INTO t VALUES ('a', 0)"} {
			if _, err := conn.Exec(ctx, sql); err != nil {
				b.Fatal(err)
			}
		}
		sink, err := New(ctx, Config{Client: rdb, Namespace: ns, Key: []string{"k"}})
		if err != nil {
			b.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- consumer.Run(runCtx, consumer.Config{URL: srv.URL(), Sources: []consumer.Source{{Name: "t"}},
				Checkpoint: sink, MaxBatchDelay: 10 * time.Millisecond, FetchTimeout: 10 * time.Millisecond}, sink)
		}()
		// seen[n] is when the poller first read n.
		seen := make([]time.Time, updates+1)
		pollDone := make(chan struct{})
		go func() { // owned by this iteration: ends when it sees the last update
			defer close(pollDone)
			for {
				prefix := rdb.Get(ctx, ns+keyActive).Val()
				v := rdb.HGet(ctx, prefix+`["a"]`, "v").Val()
				now := time.Now()
				var n int
				if _, err := fmt.Sscanf(v, `{"k":"a","n":"%d"}`, &n); err == nil && n <= updates && seen[n].IsZero() {
					seen[n] = now
					if n == updates {
						return
					}
				}
				time.Sleep(time.Millisecond)
			}
		}()
		acked := make([]time.Time, updates+1)
		for n := 1; n <= updates; n++ {
			if _, err := conn.Exec(ctx, fmt.Sprintf("UPDATE t SET n = %d WHERE k = 'a'", n)); err != nil {
				b.Fatal(err)
			}
			acked[n] = time.Now()
			time.Sleep(20 * time.Millisecond)
		}
		<-pollDone
		cancel()
		<-done
		var lat []time.Duration
		for n := 1; n <= updates; n++ {
			if !seen[n].IsZero() { // an update overtaken by the next before a poll is not counted
				lat = append(lat, max(0, seen[n].Sub(acked[n])))
			}
		}
		slices.Sort(lat)
		p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
		b.Logf("%d of %d updates observed; ack to Redis p50 %v, p99 %v, max %v", len(lat), updates, p50, p99, lat[len(lat)-1])
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		conn.Close(ctx)
		rdb.Close()
	}
}

// BenchmarkEndToEndSnapshot lands a 1,000,000-row table end to end: a real
// server, consumer.Run with its default batching (4 MiB chunks), the Sink,
// a real redis-server; it reports keys/s from Run's start to the commit of
// the snapshot (the active generation's switch). BenchmarkSubscribeSnapshot
// is the same without Redis, its bound.
func BenchmarkEndToEndSnapshot(b *testing.B) {
	for range b.N {
		url := loadedServer(b)
		rs := redistest.StartWith(b, redistest.Options{AppendFsync: "everysec"})
		rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, MaxRetries: -1, ReadTimeout: time.Minute})
		ctx := context.Background()
		sink, err := New(ctx, Config{Client: rdb, Namespace: ns, Key: []string{"id"}})
		if err != nil {
			b.Fatal(err)
		}
		landSnapshot(b, url, sink, sink, func() bool { return sink.Stats().Generations > 0 })
		b.Logf("%d keys in Redis", rdb.DBSize(ctx).Val())
		rdb.Close()
	}
}

// BenchmarkSubscribeSnapshot is BenchmarkEndToEndSnapshot with a sink
// that drops every batch: the rate at which consumer.Run receives the
// snapshot from the server, which bounds the end-to-end rate.
func BenchmarkSubscribeSnapshot(b *testing.B) {
	for range b.N {
		url := loadedServer(b)
		var cp consumer.MemoryCheckpoint
		discard := consumer.SinkFunc(func(context.Context, consumer.Batch) error { return nil })
		landSnapshot(b, url, &cp, discard, func() bool {
			pos, err := cp.Load(context.Background())
			return err == nil && pos.Frontier != 0
		})
	}
}

// endToEndRows is the size of the end-to-end benchmarks' table.
const endToEndRows = 1_000_000

// loadedServer starts a server holding t (id bigint, name text, qty int)
// with endToEndRows rows and returns its URL.
func loadedServer(b *testing.B) string {
	b.Helper()
	srv := testserver.Start(b, testserver.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE t (id bigint, name text, qty int)"); err != nil {
		b.Fatal(err)
	}
	n, err := conn.CopyFrom(ctx, pgx.Identifier{"t"}, []string{"id", "name", "qty"},
		pgx.CopyFromFunc(func() func() ([]any, error) {
			i := 0
			return func() ([]any, error) {
				if i == endToEndRows {
					return nil, nil
				}
				i++
				return []any{int64(i), fmt.Sprintf("customer %d", i), int32(i % 100)}, nil
			}
		}()))
	if err != nil || n != endToEndRows {
		b.Fatalf("COPY: %d rows, %v", n, err)
	}
	return srv.URL()
}

// landSnapshot runs consumer.Run from url's t into sink until landed
// reports the snapshot committed, and reports keys/s and the CPU time per
// key of this process (server, consumer and sink).
func landSnapshot(b *testing.B, url string, cp consumer.Checkpoint, sink consumer.Sink, landed func() bool) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	cpu0, start := processCPU(b), time.Now()
	done := make(chan error, 1)
	go func() {
		done <- consumer.Run(ctx, consumer.Config{URL: url, Sources: []consumer.Source{{Name: "t"}}, Checkpoint: cp}, sink)
	}()
	for !landed() {
		select {
		case err := <-done:
			b.Fatalf("Run ended: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	elapsed, cpu := time.Since(start), processCPU(b)-cpu0
	b.StopTimer()
	cancel()
	<-done
	b.Logf("%d rows end to end in %v: %.0f keys/s, %.2f µs CPU per key in this process", endToEndRows,
		elapsed.Round(time.Millisecond), float64(endToEndRows)/elapsed.Seconds(), cpu.Seconds()*1e6/endToEndRows)
	b.ReportMetric(float64(endToEndRows)/elapsed.Seconds(), "keys/s")
	b.ReportMetric(cpu.Seconds()*1e6/endToEndRows, "cpu-us/key")
}

// redisCPU is the CPU time redis-server has used (INFO cpu: main thread
// and background threads, user and system).
func redisCPU(tb testing.TB, rdb *redis.Client) time.Duration {
	tb.Helper()
	var total float64
	for _, line := range strings.Split(rdb.Info(context.Background(), "cpu").Val(), "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (name == "used_cpu_user" || name == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatalf("INFO cpu %s: %v", line, err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
