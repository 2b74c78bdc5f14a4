package persist_test

import (
	"fmt"
	"testing"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// BenchmarkListenBatch measures a listen reading one batch of 16,384
// updates: a write's (one time, the shared tail's usual read), and a
// merged batch of 64 times read from its start whole or in chunks of a
// quarter of it (Config.ListenChunkBytes; a catch-up behind compaction,
// each chunk a read of the batch).
func BenchmarkListenBatch(b *testing.B) {
	const rows = 16 << 10
	for _, bc := range []struct {
		name    string
		times   int
		quarter bool
	}{{"Write", 1, false}, {"MergedWhole", 64, false}, {"MergedQuarters", 64, true}} {
		b.Run(bc.name, func(b *testing.B) {
			var batches [][]row.Update
			var total int64
			for tm := range bc.times {
				var ups []row.Update
				for i := range rows / bc.times {
					u := upd(int64(i*bc.times+tm), fmt.Sprint("value-", i), uint64(tm+1), 1)
					total += u.Size()
					ups = append(ups, u)
				}
				batches = append(batches, ups)
			}
			e := newEnv(b)
			e.cfg.PartTargetBytes = 128 << 10
			e.cfg.ListenChunkBytes = 1 << 30
			if bc.quarter {
				e.cfg.ListenChunkBytes = int(total/4) + 1
			}
			ctx := ctxT(b)
			c := e.client()
			shard := persist.NewShardID()
			must(c.CreateShard(ctx, shard, testSchema))(b)
			w := must(c.OpenWriter(ctx, shard))(b)
			if err := w.CompareAndAppend(ctx, nil, 0, 1); err != nil {
				b.Fatal(err)
			}
			for tm, ups := range batches {
				if err := w.CompareAndAppend(ctx, ups, uint64(tm+1), uint64(tm+2)); err != nil {
					b.Fatal(err)
				}
			}
			r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "bench"}))(b)
			for must(c.Maintain(ctx, shard))(b).Compactions > 0 {
			}
			merged := false
			for _, bt := range must(c.State(ctx, shard))(b).Batches {
				merged = merged || bt.Upper-bt.Lower >= uint64(bc.times/2)
			}
			if bc.times > 1 && !merged {
				b.Fatal("the writes were not merged")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				l := must(r.Listen(ctx, 0))(b)
				got := 0
				for l.Frontier() < uint64(bc.times+1) {
					ups, _, err := l.Next(ctx)
					if err != nil {
						b.Fatal(err)
					}
					got += len(ups)
				}
				if got != rows {
					b.Fatalf("read %d updates, want %d", got, rows)
				}
			}
		})
	}
}
