package persist_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/row"
)

var testSchema = row.Schema{Columns: []row.Column{
	{Name: "k", Type: row.TypeInt8},
	{Name: "v", Type: row.TypeText, Nullable: true},
}}

// env is one location (blob + consensus) shared by the clients of a test,
// as several processes would share S3 and PostgreSQL.
type env struct {
	t         testing.TB
	blob      persist.Blob
	consensus persist.Consensus
	cfg       persist.Config
}

func newEnv(t testing.TB) *env {
	return &env{t: t, blob: blobmem.New(), consensus: consmem.New(), cfg: persist.Config{
		PollInterval:        10 * time.Millisecond,
		ReaderHeartbeat:     -1,
		CompactionMinInputs: -1,
		RollupEvery:         8,
		SnapshotChunkRows:   16,
		PartTargetBytes:     256,
	}}
}

// client starts a client (a "process") closed at the end of the test.
func (e *env) client() *persist.Client {
	e.t.Helper()
	c, err := persist.NewClient(e.blob, e.consensus, e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// must returns v, failing the test when err is not nil:
// w := must(c.OpenWriter(ctx, shard))(t).
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func upd(k int64, v string, t uint64, d int64) row.Update {
	return row.Update{Row: row.Row{k, v}, T: t, Diff: d}
}

// readSnapshot drains a snapshot at asOf, checking chunk invariants.
func readSnapshot(t testing.TB, ctx context.Context, r *persist.Reader, asOf uint64) []row.Update {
	t.Helper()
	cur := must(r.Snapshot(ctx, asOf))(t)
	var all []row.Update
	err := cur.Each(ctx, func(chunk []row.Update) error {
		if len(chunk) == 0 {
			return errors.New("empty chunk")
		}
		if len(all) > 0 && row.Compare(all[len(all)-1].Row, chunk[0].Row) >= 0 {
			return fmt.Errorf("row %v straddles chunks or is out of order", chunk[0].Row)
		}
		all = append(all, chunk...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !row.IsConsolidated(all) {
		t.Fatalf("snapshot not consolidated: %v", all)
	}
	for _, u := range all {
		if u.T != asOf {
			t.Fatalf("snapshot update at %d, want as_of %d", u.T, asOf)
		}
	}
	return all
}
