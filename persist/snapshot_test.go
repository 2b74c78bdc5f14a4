package persist_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// loadRows writes n rows of (int8, 64-byte text) at time 0 in appends of
// per rows each, and returns the reader-ready client and shard.
func loadRows(tb testing.TB, e *env, n, per int) (*persist.Client, string) {
	ctx := context.Background()
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(tb)
	w := must(c.OpenWriter(ctx, shard))(tb)
	pad := strings.Repeat("x", 54)
	var upper uint64
	for start := 0; start < n; start += per {
		ups := make([]row.Update, 0, per)
		for i := start; i < min(n, start+per); i++ {
			// Interleave keys across appends so that the merge really merges.
			k := int64(i%per)*int64((n+per-1)/per) + int64(start/per)
			ups = append(ups, row.Update{Row: row.Row{k, fmt.Sprintf("%010d", k) + pad}, T: upper, Diff: 1})
		}
		if err := w.CompareAndAppend(ctx, ups, upper, upper+1); err != nil {
			tb.Fatal(err)
		}
		upper++
	}
	return c, shard
}

// liveHeap collects garbage and returns the live heap: sampled every few
// chunks, its maximum is the peak the cursor really holds, not garbage
// awaiting collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestSnapshotStreams checks that the snapshot cursor yields its first chunk
// after fetching only a few parts, reads each part exactly once, and holds
// far less than the decoded snapshot at any time.
func TestSnapshotStreams(t *testing.T) {
	n := 200_000
	if testing.Short() {
		n = 50_000
	}
	e := newEnv(t)
	e.cfg.PartTargetBytes = 256 << 10
	e.cfg.SnapshotChunkRows = 1024
	c, shard := loadRows(t, e, n, n/4)
	ctx := ctxT(t)
	s := must(c.State(ctx, shard))(t)
	totalParts := 0
	for _, b := range s.Batches {
		totalParts += len(b.Parts)
	}
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer r.Close()

	before := partFetches(c)
	base := liveHeap()
	var peak uint64
	cur := must(r.Snapshot(ctx, s.Upper-1))(t)
	first := must(cur.Next(ctx))(t)
	atFirst := partFetches(c) - before
	rows := len(first)
	var decoded int64
	for _, u := range first {
		decoded += int64(rowSizeLive(u))
	}
	for {
		chunk, err := cur.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rows += len(chunk)
		for _, u := range chunk {
			decoded += int64(rowSizeLive(u))
		}
		if live := liveHeap(); live > base {
			peak = max(peak, live-base)
		}
	}
	fetched := partFetches(c) - before
	t.Logf("%d rows in %d parts over %d runs: first chunk after %d part fetches; %d fetches in all; peak heap growth %d KiB vs %d KiB decoded",
		rows, totalParts, len(s.Batches), atFirst, fetched, peak>>10, decoded>>10)
	if rows != n {
		t.Fatalf("snapshot has %d rows, want %d", rows, n)
	}
	if atFirst > int64(len(s.Batches)) || atFirst >= int64(totalParts) {
		t.Fatalf("first chunk needed %d of %d parts, want at most one per run (%d)", atFirst, totalParts, len(s.Batches))
	}
	if fetched != int64(totalParts) {
		t.Fatalf("fetched %d parts, want each of %d once", fetched, totalParts)
	}
	if peak > uint64(decoded)/2 {
		t.Fatalf("peak heap growth %d bytes is not far below the decoded snapshot (%d bytes)", peak, decoded)
	}
}

// rowSizeLive approximates the heap a decoded update occupies: the Update,
// its row slice, boxed datums and string bytes.
func rowSizeLive(u row.Update) int {
	n := 32 + 16*len(u.Row)
	for _, d := range u.Row {
		switch v := d.(type) {
		case string:
			n += 16 + len(v)
		default:
			n += 8
		}
	}
	return n
}

// BenchmarkSnapshot1M streams a 1,000,000-row snapshot of (int8, 64-byte
// text) from 8 runs and reports rows/s and the peak heap against the
// decoded size.
func BenchmarkSnapshot1M(b *testing.B) {
	const n = 1_000_000
	e := newEnv(b)
	e.cfg.PartTargetBytes = persist.DefaultPartTargetBytes
	e.cfg.SnapshotChunkRows = persist.DefaultSnapshotChunkRows
	c, shard := loadRows(b, e, n, n/8)
	ctx := context.Background()
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(b)
	defer r.Close()
	b.ResetTimer()
	var peak uint64
	var decoded int64
	for range b.N {
		base := liveHeap()
		decoded = 0
		chunks := 0
		cur := must(r.Snapshot(ctx, n/(n/8)-1))(b)
		rows := 0
		for {
			chunk, err := cur.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			rows += len(chunk)
			for _, u := range chunk {
				decoded += int64(rowSizeLive(u))
			}
			if chunks++; chunks%32 == 0 {
				b.StopTimer()
				if live := liveHeap(); live > base {
					peak = max(peak, live-base)
				}
				b.StartTimer()
			}
		}
		if rows != n {
			b.Fatalf("%d rows", rows)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-live-heap-MiB")
	b.ReportMetric(float64(decoded)/(1<<20), "decoded-MiB")
}

// partFetches is how many parts c has fetched from blob so far.
func partFetches(c *persist.Client) int64 {
	return int64(testutil.ToFloat64(persist.PartsFetched(c.Metrics())))
}

// TestCursorEach checks the drain helpers: Each hands over every chunk in
// order and All returns their concatenation; an error from f stops the
// read, comes back unchanged, and leaves the cursor closed.
func TestCursorEach(t *testing.T) {
	const n = 100
	e := newEnv(t)
	e.cfg.SnapshotChunkRows = 7
	c, shard := loadRows(t, e, n, 25)
	ctx := ctxT(t)
	asOf := must(c.State(ctx, shard))(t).Upper - 1
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer r.Close()

	var chunks [][]row.Update
	err := must(r.Snapshot(ctx, asOf))(t).Each(ctx, func(chunk []row.Update) error {
		chunks = append(chunks, chunk)
		return nil
	})
	if err != nil {
		t.Fatalf("Each: %v", err)
	}
	if got, want := len(chunks), (n+6)/7; got != want {
		t.Errorf("Each made %d calls, want %d (chunks of 7)", got, want)
	}
	all := must(must(r.Snapshot(ctx, asOf))(t).All(ctx))(t)
	var joined []row.Update
	for _, ch := range chunks {
		joined = append(joined, ch...)
	}
	if len(all) != n || len(joined) != n {
		t.Fatalf("All has %d updates, Each's chunks %d; want %d", len(all), len(joined), n)
	}
	for i := range all {
		if row.CompareUpdate(all[i], joined[i]) != 0 {
			t.Fatalf("update %d: All %v, Each %v", i, all[i], joined[i])
		}
	}

	stop := errors.New("stop")
	cur := must(r.Snapshot(ctx, asOf))(t)
	calls := 0
	err = cur.Each(ctx, func([]row.Update) error {
		calls++
		return stop
	})
	if err != stop || calls != 1 {
		t.Errorf("Each = %v after %d calls; want f's error after 1", err, calls)
	}
	if _, err := cur.Next(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("Next after Each stopped = %v; want io.EOF (closed)", err)
	}
}

// TestCursorChunkRamp checks that a snapshot starts with a small chunk and
// doubles up to SnapshotChunkRows: the first rows of a large snapshot wait
// for a hundred-odd rows' merge, not a full chunk's.
func TestCursorChunkRamp(t *testing.T) {
	const n = 1000
	e := newEnv(t)
	e.cfg.SnapshotChunkRows = 300
	c, shard := loadRows(t, e, n, 250)
	ctx := ctxT(t)
	asOf := must(c.State(ctx, shard))(t).Upper - 1
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer r.Close()

	var sizes []int
	err := must(r.Snapshot(ctx, asOf))(t).Each(ctx, func(chunk []row.Update) error {
		sizes = append(sizes, len(chunk))
		return nil
	})
	if err != nil {
		t.Fatalf("Each: %v", err)
	}
	if got, want := fmt.Sprint(sizes), "[128 256 300 300 16]"; got != want {
		t.Errorf("chunk sizes %s, want %s", got, want)
	}
}

// TestCursorPassesOneRunThrough checks NextChunk's columns: a snapshot of
// one run at one time (one append, over several parts) comes as columns,
// in chunks that ramp up as Next's do but never span a record batch,
// stamped AsOf, and holds the rows the merge would; a snapshot of several
// appends, or of rows at several times, comes as updates.
func TestCursorPassesOneRunThrough(t *testing.T) {
	const n = 3000
	e := newEnv(t)
	e.cfg.SnapshotChunkRows = 1000
	e.cfg.PartTargetBytes = 64 << 10 // several parts
	ctx := ctxT(t)
	c := e.client()
	shard := persist.NewShardID()
	must(c.CreateShard(ctx, shard, testSchema))(t)
	w := must(c.OpenWriter(ctx, shard))(t)
	var want []row.Update
	for i := range n {
		want = append(want, upd(int64(i), fmt.Sprintf("%064d", i), 3, int64(i%3+1)))
	}
	if err := w.CompareAndAppend(ctx, want, 0, 4); err != nil {
		t.Fatal(err)
	}
	if err := w.CompareAndAppend(ctx, nil, 4, 6); err != nil {
		t.Fatal(err)
	}
	if parts := len(must(c.State(ctx, shard))(t).Batches[0].Parts); parts < 2 {
		t.Fatalf("%d parts, want several", parts)
	}
	r := must(c.OpenReader(ctx, shard, persist.ReaderOptions{}))(t)
	defer r.Close()
	for i := range want {
		want[i].T = 5
	}

	// read drains a snapshot with NextChunk, and returns its updates and
	// how many chunks came as columns.
	read := func(asOf uint64) (all []row.Update, sizes []int, columns int) {
		cur := must(r.Snapshot(ctx, asOf))(t)
		for {
			ch, err := cur.NextChunk(ctx)
			if errors.Is(err, io.EOF) {
				return all, sizes, columns
			}
			if err != nil {
				t.Fatal(err)
			}
			if ch.Columns != nil {
				columns++
				if ch.Columns.T != asOf {
					t.Fatalf("columns at %d, want AsOf %d", ch.Columns.T, asOf)
				}
			}
			sizes = append(sizes, ch.Len())
			all = append(all, ch.Decoded()...)
		}
	}
	all, sizes, columns := read(5)
	if got := testutil.ToFloat64(persist.Snapshots(c.Metrics(), "columns")); got != 1 {
		t.Errorf("%v snapshots read as columns, want 1", got)
	}
	if columns != len(sizes) {
		t.Errorf("%d of %d chunks as columns, want all", columns, len(sizes))
	}
	if sizes[0] != 128 || sizes[1] > 256 || slices.Max(sizes) > 1000 {
		t.Errorf("chunk sizes %v: want 128 first, then at most 256, and at most SnapshotChunkRows", sizes)
	}
	if len(all) != n {
		t.Fatalf("%d updates, want %d", len(all), n)
	}
	for i := range all {
		if row.CompareUpdate(all[i], want[i]) != 0 || all[i].Diff != want[i].Diff {
			t.Fatalf("update %d: got %v, want %v", i, all[i], want[i])
		}
	}
	if got := readSnapshot(t, ctx, r, 5); len(got) != n {
		t.Errorf("Next: %d updates, want %d", len(got), n)
	}

	// Rows at two times: the merge.
	if err := w.CompareAndAppend(ctx, []row.Update{upd(0, fmt.Sprintf("%064d", 0), 6, -1)}, 6, 7); err != nil {
		t.Fatal(err)
	}
	all, _, columns = read(6)
	if got := testutil.ToFloat64(persist.Snapshots(c.Metrics(), "merge")); got != 1 {
		t.Errorf("%v snapshots merged, want 1", got)
	}
	if columns != 0 {
		t.Errorf("%d chunks as columns over two appends, want none", columns)
	}
	if len(all) != n-1 {
		t.Errorf("%d updates after a retraction, want %d", len(all), n-1)
	}
}
