package persist_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardtail/shardtail/persist"
	blobfile "github.com/shardtail/shardtail/persist/blob/file"
	"github.com/shardtail/shardtail/persist/consensus/sqlite"
	"github.com/shardtail/shardtail/persist/row"
)

const crashChildEnv = "SHARDTAIL_PERSIST_CRASH_CHILD"

// openDurable opens the embedded-default location in dir: file blobs and
// SQLite consensus, as `shardtail serve` does.
func openDurable(t testing.TB, ctx context.Context, dir string, cfg persist.Config) (*persist.Client, func()) {
	t.Helper()
	b, err := blobfile.Open(ctx, filepath.Join(dir, "blob"))
	if err != nil {
		t.Fatal(err)
	}
	cons, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "consensus.db")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := persist.NewClient(b, cons, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, func() { c.Close(); cons.Close(); b.Close() }
}

// TestCrashChild is the writer process of TestCrashSafety; it does nothing
// unless started by it.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		return
	}
	ctx := context.Background()
	c, _ := openDurable(t, ctx, dir, persist.Config{RollupEvery: 4, CompactionMinInputs: 3, PartTargetBytes: 512})
	shard := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dir, "shard")))(t)))
	w := must(c.OpenWriter(ctx, shard))(t)
	policy := must(c.OpenReader(ctx, shard, persist.ReaderOptions{Critical: true}))(t)
	s := must(c.State(ctx, shard))(t)
	upper := s.Upper
	for i := 0; ; i++ {
		var ups []row.Update
		for j := range 20 {
			ups = append(ups, row.Update{Row: row.Row{int64(upper), fmt.Sprintf("row-%d-%d", upper, j)}, T: upper, Diff: 1})
		}
		if err := w.CompareAndAppend(ctx, ups, upper, upper+1); err != nil {
			fmt.Printf("error %v\n", err)
			os.Exit(3)
		}
		upper++
		fmt.Printf("acked %d\n", upper)
		if i%5 == 0 {
			_ = policy.Downgrade(ctx, upper-3)
			if _, err := c.Maintain(ctx, shard); err != nil {
				fmt.Printf("error %v\n", err)
				os.Exit(3)
			}
		}
	}
}

// TestCrashSafety kills a writer process with SIGKILL at random points
// during appends, compaction and GC, many times, and checks after each kill
// that every acknowledged append is readable exactly once, the state is
// consistent, and no referenced blob is missing.
func TestCrashSafety(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		return
	}
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	dir := t.TempDir()
	ctx := ctxT(t)
	shard := persist.NewShardID()
	{
		c, closeFn := openDurable(t, ctx, dir, persist.Config{})
		must(c.CreateShard(ctx, shard, testSchema))(t)
		closeFn()
	}
	if err := os.WriteFile(filepath.Join(dir, "shard"), []byte(shard), 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	var acked uint64
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := time.Duration(50+rng.IntN(400)) * time.Millisecond
		timer := time.AfterFunc(killAfter, func() { cmd.Process.Signal(syscall.SIGKILL) })
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if n, ok := strings.CutPrefix(line, "acked "); ok {
				acked = max(acked, must(strconv.ParseUint(n, 10, 64))(t))
			} else if strings.HasPrefix(line, "error") {
				t.Fatalf("round %d: child: %s", round, line)
			}
		}
		timer.Stop()
		_ = cmd.Wait()

		c, closeFn := openDurable(t, ctx, dir, persist.Config{CompactionMinInputs: -1})
		s := must(c.State(ctx, shard))(t)
		if err := s.Validate(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if s.Upper < acked {
			t.Fatalf("round %d: upper %d lost acknowledged appends up to %d", round, s.Upper, acked)
		}
		for _, b := range s.Batches {
			for _, p := range b.Parts {
				if _, err := c.Blob().Get(ctx, p.Key); err != nil {
					t.Fatalf("round %d: referenced part %s: %v", round, p.Key, err)
				}
			}
		}
		r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
		if s.Upper > 0 {
			got := readSnapshot(t, ctx, r, s.Upper-1)
			seen := map[int64]int{}
			for _, u := range got {
				if u.Diff != 1 {
					t.Fatalf("round %d: row %v has diff %d", round, u.Row, u.Diff)
				}
				seen[u.Row[0].(int64)]++
			}
			for up := range s.Upper {
				if seen[int64(up)] != 20 {
					t.Fatalf("round %d: append at %d has %d rows, want 20", round, up, seen[int64(up)])
				}
			}
		}
		r.Close()
		first := must(c.Consensus().Scan(ctx, shard, 0, 1))(t)
		closeFn()
		t.Logf("round %d: killed after %v, acked %d, upper %d, %d batches, seqno %s, earliest %s", round, killAfter, acked, s.Upper, len(s.Batches), s.SeqNo, first[0].SeqNo)
	}
}
