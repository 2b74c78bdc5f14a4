package persist_test

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/shardtail/shardtail/internal/testsupport/pgtest"
	"github.com/shardtail/shardtail/internal/testsupport/s3test"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/blob"
	"github.com/shardtail/shardtail/persist/consensus"
	"github.com/shardtail/shardtail/row"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestRealBackends runs a shard through the real backends a user deploys:
// file blobs with SQLite (the embedded default) and S3 over HTTP with
// PostgreSQL (the shared deployment). Two clients stand in for two
// processes; the second's listener must see the first's appends, woken by
// the PostgreSQL doorbell or by polling.
func TestRealBackends(t *testing.T) {
	for _, tc := range []struct {
		name            string
		blob, consensus func(t *testing.T) string
	}{
		{"FileSQLite",
			func(t *testing.T) string { return "file://" + filepath.Join(t.TempDir(), "blob") },
			func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "consensus.db") }},
		{"S3Postgres", func(t *testing.T) string { return s3test.URL(t) }, func(t *testing.T) string { return pgtest.URL(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			b := must(blob.Open(ctx, tc.blob(t)))(t)
			t.Cleanup(func() { b.Close() })
			c := must(consensus.Open(ctx, tc.consensus(t)))(t)
			t.Cleanup(func() { c.Close() })
			e := &env{t: t, blob: b, consensus: c, cfg: persist.Config{PollInterval: 200 * time.Millisecond, RollupEvery: 4, CompactionMinInputs: 2}}
			p1, p2 := e.client(), e.client()
			shard := persist.NewShardID()
			must(p1.CreateShard(ctx, shard, testSchema))(t)
			w := must(p1.OpenWriter(ctx, shard))(t)
			r := must(p2.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
			defer r.Close()
			l := must(r.Listen(ctx, 0))(t)
			if err := w.CompareAndAppend(ctx, nil, 0, 1); err != nil {
				t.Fatal(err)
			}
			var lat []time.Duration
			for i := range 10 {
				ups := []row.Update{upd(int64(i), "v", uint64(i+1), 1)}
				start := time.Now()
				if err := w.CompareAndAppend(ctx, ups, uint64(i+1), uint64(i+2)); err != nil {
					t.Fatal(err)
				}
				got, _ := nextData(t, ctx, l)
				lat = append(lat, time.Since(start))
				if !reflect.DeepEqual(got, ups) {
					t.Fatalf("append %d: listen got %v, want %v", i, got, ups)
				}
			}
			got := readSnapshot(t, ctx, r, 10)
			if len(got) != 10 {
				t.Fatalf("snapshot has %d rows, want 10", len(got))
			}
			rep := must(p1.Maintain(ctx, shard))(t)
			t.Logf("%s: cross-client append-to-listen latency %v (first) %v (last); maintenance %+v", tc.name, lat[0], lat[len(lat)-1], rep)
		})
	}
}

// nextData returns the next non-empty listen batch.
func nextData(t *testing.T, ctx context.Context, l *persist.Listen) ([]row.Update, uint64) {
	t.Helper()
	for {
		u, f, err := l.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(u) > 0 {
			return u, f
		}
	}
}
