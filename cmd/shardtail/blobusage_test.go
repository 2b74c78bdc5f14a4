package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/blob"
	"github.com/shardtail/shardtail/persist/consensus"
	"github.com/shardtail/shardtail/stmtlog"
)

// shardBlobs is one shard's blobs in a stopped server's data dir, by what
// references them: its current state, an older state version that is still
// live (GC has not truncated it yet), or nothing (garbage).
type shardBlobs struct {
	shard string
	// parts and rollups are the files on disk; curParts and curRollups
	// those the current state references.
	parts, rollups, curParts, curRollups int
	// garbage is what a sweep with no grace deletes: referenced by no live
	// state version.
	garbage int
}

// older is the blobs only older live state versions reference.
func (u shardBlobs) older() int {
	return u.parts + u.rollups - u.curParts - u.curRollups - u.garbage
}

// blobUsage classifies the blobs of every shard in a stopped server's data
// dir (shardBlobs). It works on a copy, since finding the garbage means
// sweeping it. The statement log's shard is left out, as countBlobs leaves
// it out.
func blobUsage(t *testing.T, dataDir string) []shardBlobs {
	t.Helper()
	ctx := context.Background()
	cp := t.TempDir()
	if err := os.CopyFS(cp, os.DirFS(dataDir)); err != nil {
		t.Fatalf("copy %s: %v", dataDir, err)
	}
	b, err := blob.Open(ctx, "file://"+filepath.Join(cp, "blob"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cons, err := consensus.Open(ctx, "sqlite://"+filepath.Join(cp, "consensus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := persist.NewClient(b, cons, persist.Config{CompactionMinInputs: -1, SweepInterval: -1, OrphanGrace: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	byShard := map[string]*shardBlobs{}
	if err := b.List(ctx, "", func(m persist.BlobMeta) error {
		shard, rest, _ := strings.Cut(m.Key, "/")
		if shard == stmtlog.ShardID {
			return nil
		}
		u := byShard[shard]
		if u == nil {
			u = &shardBlobs{shard: shard}
			byShard[shard] = u
		}
		if strings.HasPrefix(rest, "p") {
			u.parts++
		} else {
			u.rollups++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var out []shardBlobs
	for _, u := range byShard {
		st, err := pc.State(ctx, u.shard)
		switch {
		case errors.Is(err, persist.ErrShardNotFound):
			// No versions: every blob is garbage, and no sweep can tell.
			u.garbage = u.parts + u.rollups
		case err != nil:
			t.Fatalf("state of %s: %v", u.shard, err)
		default:
			for _, bt := range st.Batches {
				u.curParts += len(bt.Parts)
			}
			u.curRollups = len(st.Rollups)
			if u.garbage, err = pc.Sweep(ctx, u.shard); err != nil {
				t.Fatalf("sweep %s: %v", u.shard, err)
			}
		}
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b shardBlobs) int {
		return cmp.Or(cmp.Compare(b.older()+b.garbage, a.older()+a.garbage), strings.Compare(a.shard, b.shard))
	})
	return out
}

// live is the blobs beyond those only older live state versions
// reference: the current state's, and garbage.
func (u shardBlobs) live() int {
	return u.curParts + u.curRollups + u.garbage
}

// logBlobUsage logs blobUsage's totals for dataDir and the shards with the
// most blobs beyond their current state, and returns the totals.
func logBlobUsage(t *testing.T, name, dataDir string) shardBlobs {
	t.Helper()
	usage := blobUsage(t, dataDir)
	var tot shardBlobs
	for _, u := range usage {
		tot.parts += u.parts
		tot.rollups += u.rollups
		tot.curParts += u.curParts
		tot.curRollups += u.curRollups
		tot.garbage += u.garbage
	}
	t.Logf("%s: %d shards, %d parts (%d in current states), %d rollups (%d in current states); %d blobs only older live versions reference, %d garbage",
		name, len(usage), tot.parts, tot.curParts, tot.rollups, tot.curRollups, tot.older(), tot.garbage)
	var lines []string
	for _, u := range usage[:min(len(usage), 8)] {
		if u.older()+u.garbage > 0 {
			lines = append(lines, fmt.Sprintf("  %s: parts %d/%d current, rollups %d/%d current, older versions %d, garbage %d",
				u.shard, u.curParts, u.parts, u.curRollups, u.rollups, u.older(), u.garbage))
		}
	}
	if len(lines) > 0 {
		t.Logf("%s, shards with the most blobs beyond their current state:\n%s", name, strings.Join(lines, "\n"))
	}
	return tot
}
