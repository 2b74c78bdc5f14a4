package persist_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardtail/shardtail/persist"
	blobfile "github.com/shardtail/shardtail/persist/blob/file"
	"github.com/shardtail/shardtail/persist/consensus/sqlite"
	"github.com/shardtail/shardtail/row"
)

const (
	crashChildEnv = "SHARDTAIL_PERSIST_CRASH_CHILD"
	// crashStallEnv, when set to n, stalls the child after its n-th part
	// upload, for the parent to kill it there: between upload and commit.
	crashStallEnv = "SHARDTAIL_PERSIST_CRASH_STALL"
)

// openDurable opens the embedded-default location in dir: file blobs and
// SQLite consensus, as `shardtail serve` does.
func openDurable(t testing.TB, ctx context.Context, dir string, cfg persist.Config) (*persist.Client, func()) {
	t.Helper()
	return openDurableWrapped(t, ctx, dir, cfg, func(b persist.Blob) persist.Blob { return b })
}

// openDurableWrapped is openDurable with the blob store wrapped by wrap.
func openDurableWrapped(t testing.TB, ctx context.Context, dir string, cfg persist.Config, wrap func(persist.Blob) persist.Blob) (*persist.Client, func()) {
	t.Helper()
	fb, err := blobfile.Open(ctx, filepath.Join(dir, "blob"))
	if err != nil {
		t.Fatal(err)
	}
	b := wrap(fb)
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
	wrap := func(b persist.Blob) persist.Blob { return b }
	if n, err := strconv.ParseInt(os.Getenv(crashStallEnv), 10, 64); err == nil {
		wrap = func(b persist.Blob) persist.Blob {
			s := &partStaller{Blob: b}
			s.left.Store(n)
			return s
		}
	}
	c, _ := openDurableWrapped(t, ctx, dir, persist.Config{RollupEvery: 4, CompactionMinInputs: 3, PartTargetBytes: 512}, wrap)
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
		if i%5 == 0 && upper > 3 {
			// upper-3 would wrap around below 3, moving since past the
			// data the parent reads back.
			_ = policy.Downgrade(ctx, upper-3)
			if _, err := c.Maintain(ctx, shard); err != nil {
				fmt.Printf("error %v\n", err)
				os.Exit(3)
			}
		}
	}
}

// partStaller holds the child between uploading a part and committing it:
// after left part uploads, every Set of a part prints "stalled" and blocks
// until the parent's SIGKILL. The parts become orphans for certain.
type partStaller struct {
	persist.Blob
	left atomic.Int64
}

func (b *partStaller) Set(ctx context.Context, key string, value []byte) error {
	if err := b.Blob.Set(ctx, key, value); err != nil {
		return err
	}
	if strings.HasPrefix(path.Base(key), "p") && b.left.Add(-1) <= 0 {
		fmt.Println("stalled")
		time.Sleep(time.Hour) // not select{}: the runtime would call that a deadlock
	}
	return nil
}

// TestCrashSafety kills a writer process with SIGKILL at random points
// during appends, compaction and GC, many times (every other time right
// after a part upload, before its commit), and checks after each kill that
// every acknowledged append is readable exactly once, the state is
// consistent, and no referenced blob is missing. Then it sweeps (with a
// short grace: nothing is in flight) and checks that the orphaned parts the
// kills left are gone and only the parts live versions reference remain;
// the next round's checks show the sweep deleted nothing referenced.
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
		stall := round%2 == 1
		killAfter := time.Duration(50+rng.IntN(400)) * time.Millisecond
		if stall {
			cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", crashStallEnv, 1+rng.IntN(40)))
			killAfter = time.Minute // a safety net: the kill comes at "stalled"
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		timer := time.AfterFunc(killAfter, func() { cmd.Process.Signal(syscall.SIGKILL) })
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if n, ok := strings.CutPrefix(line, "acked "); ok {
				acked = max(acked, must(strconv.ParseUint(n, 10, 64))(t))
			} else if line == "stalled" {
				cmd.Process.Signal(syscall.SIGKILL)
			} else if strings.HasPrefix(line, "error") {
				t.Fatalf("round %d: child: %s", round, line)
			}
		}
		timer.Stop()
		_ = cmd.Wait()

		c, closeFn := openDurable(t, ctx, dir, persist.Config{CompactionMinInputs: -1, OrphanGrace: time.Millisecond, SweepInterval: -1})
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
		before := partKeys(t, c.Blob(), shard)
		swept := must(c.Sweep(ctx, shard))(t)
		live := must(persist.LiveKeys(ctx, c, shard))(t)
		after := partKeys(t, c.Blob(), shard)
		for key := range before {
			if !after[key] && live[key] {
				t.Fatalf("round %d: the sweep deleted part %s, which a live version references", round, key)
			}
		}
		for key := range live {
			delete(after, key)
		}
		if len(after) != 0 {
			t.Fatalf("round %d: after the sweep %d parts remain that no live version references", round, len(after))
		}
		if stall && swept == 0 {
			t.Fatalf("round %d: killed between a part upload and its commit, yet the sweep found no orphan", round)
		}
		closeFn()
		how := fmt.Sprintf("after %v", killAfter)
		if stall {
			how = "between upload and commit"
		}
		t.Logf("round %d: killed %s, acked %d, upper %d, %d batches, seqno %s, earliest %s; %d part files, %d orphans swept, %d parts in the head state",
			round, how, acked, s.Upper, len(s.Batches), s.SeqNo, first[0].SeqNo, len(before), swept, headParts(s))
	}
}

// partKeys returns the shard's part keys in b (not its rollups).
func partKeys(t *testing.T, b persist.Blob, shard string) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for key := range blobKeys(t, b, shard+"/") {
		if strings.HasPrefix(path.Base(key), "p") {
			keys[key] = true
		}
	}
	return keys
}

// headParts is the number of parts s references.
func headParts(s *persist.State) int {
	n := 0
	for _, b := range s.Batches {
		n += len(b.Parts)
	}
	return n
}
