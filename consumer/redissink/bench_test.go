package redissink

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/internal/testsupport/redistest"
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
		srv := redistest.Start(b)
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ReadTimeout: time.Minute})
		sink, err := New(ctx, Config{Client: rdb, Namespace: "bench:", Key: []string{"id"}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sink.Load(ctx); err != nil {
			b.Fatal(err)
		}
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
