package adapter_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/persist/blob/file"
	"github.com/shardtail/shardtail/persist/consensus/sqlite"
)

// Scale: COPY t FROM STDIN of many rows (int8, 64-byte text) and SELECT *
// streaming them back, on the embedded default storage (file blobs +
// SQLite) so that the stored data is not in the process's memory.

// scaleTextLen is the length of each row's text column.
const scaleTextLen = 64

// scaleText is row id's text: 64 bytes ending in the zero-padded id, so a
// reader can check that it belongs to its row.
func scaleText(dst []byte, id int64) []byte {
	dst = append(dst, "payload-payload-payload-payload-payload-pay"...)
	return fmt.Appendf(dst, "%021d", id)
}

// copyRowsReader generates the COPY text of rows 0..n-1 as it is read, so
// the client never holds the load.
type copyRowsReader struct {
	next, n int64
	buf     []byte
}

func (r *copyRowsReader) Read(p []byte) (int, error) {
	for len(r.buf) < len(p) && r.next < r.n {
		r.buf = strconv.AppendInt(r.buf, r.next, 10)
		r.buf = append(r.buf, '\t')
		r.buf = scaleText(r.buf, r.next)
		r.buf = append(r.buf, '\n')
		r.next++
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.buf)
	r.buf = r.buf[:copy(r.buf, r.buf[n:])]
	return n, nil
}

// startScaleServer starts an in-process server on file blobs and SQLite in
// a temporary directory.
func startScaleServer(tb testing.TB) *testserver.Server {
	tb.Helper()
	dir := tb.TempDir()
	ctx := context.Background()
	b, err := file.Open(ctx, filepath.Join(dir, "blob"))
	if err != nil {
		tb.Fatal(err)
	}
	cons, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "consensus.db")})
	if err != nil {
		tb.Fatal(err)
	}
	s := testserver.Start(tb, testserver.Options{Blob: b, Consensus: cons})
	tb.Cleanup(func() { cons.Close(); b.Close() })
	return s
}

// copyIn loads n rows into a new table t and returns how long COPY took.
func copyIn(tb testing.TB, c *pgx.Conn, n int64) time.Duration {
	tb.Helper()
	mustExec(tb, c, "CREATE TABLE t (id int8 NOT NULL, payload text NOT NULL)")
	start := time.Now()
	tag, err := c.PgConn().CopyFrom(context.Background(), &copyRowsReader{n: n}, "COPY t FROM STDIN")
	elapsed := time.Since(start)
	if err != nil {
		tb.Fatalf("COPY: %v", err)
	}
	if want := fmt.Sprintf("COPY %d", n); tag.String() != want {
		tb.Fatalf("COPY tag %q, want %q", tag, want)
	}
	return elapsed
}

// selectAll streams SELECT * FROM t, checks that it returns rows 0..n-1
// each once with its own text, and returns how long it took.
func selectAll(tb testing.TB, c *pgx.Conn, n int64) time.Duration {
	tb.Helper()
	start := time.Now()
	rows, err := c.Query(context.Background(), "SELECT * FROM t", pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		tb.Fatal(err)
	}
	seen := make([]bool, n)
	var count int64
	var want []byte
	for rows.Next() {
		raw := rows.RawValues()
		id, err := strconv.ParseInt(string(raw[0]), 10, 64)
		if err != nil || id < 0 || id >= n || seen[id] {
			rows.Close()
			tb.Fatalf("row %d: bad or repeated id %q (%v)", count, raw[0], err)
		}
		if want = scaleText(want[:0], id); !bytes.Equal(raw[1], want) || len(raw[1]) != scaleTextLen {
			rows.Close()
			tb.Fatalf("row %d: text %q, want %q", id, raw[1], want)
		}
		seen[id] = true
		count++
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	elapsed := time.Since(start)
	if count != n {
		tb.Fatalf("SELECT * returned %d rows, want %d", count, n)
	}
	return elapsed
}

// copyOut streams COPY t TO STDOUT and returns the number of lines.
func copyOut(tb testing.TB, c *pgx.Conn) int64 {
	tb.Helper()
	pr, pw := io.Pipe()
	lines := make(chan int64, 1)
	go func() {
		var k int64
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			k++
		}
		io.Copy(io.Discard, pr)
		lines <- k
	}()
	_, err := c.PgConn().CopyTo(context.Background(), pw, "COPY t TO STDOUT")
	pw.CloseWithError(err)
	if err != nil {
		tb.Fatal(err)
	}
	return <-lines
}

// peakRSS returns the process's peak resident set (VmHWM) in bytes.
func peakRSS(tb testing.TB) int64 {
	tb.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	tb.Fatal("no VmHWM in /proc/self/status")
	return 0
}

func TestCopyFromSelect100k(t *testing.T) {
	const n = 100_000
	s := startScaleServer(t)
	c := connectMode(t, s, pgx.QueryExecModeCacheStatement)
	copyIn(t, c, n)
	selectAll(t, c, n)
	if got := copyOut(t, c); got != n {
		t.Errorf("COPY TO STDOUT: %d lines, want %d", got, n)
	}
	// A bad row at the very end rejects the whole load.
	r := io.MultiReader(&copyRowsReader{next: n, n: 2 * n}, strings.NewReader("x\ty\n"))
	_, err := c.PgConn().CopyFrom(context.Background(), r, "COPY t FROM STDIN")
	wantCode(t, err, "22P02", "COPY with a bad last row")
	selectAll(t, c, n)
}

// BenchmarkCopyFromSelect1M loads 1,000,000 rows with COPY FROM STDIN and
// streams them back with SELECT *, reporting rows/s for each direction and
// the process's peak RSS (client and in-process server together).
//
//	go test -run '^$' -bench CopyFromSelect1M -benchtime 1x ./adapter/
//
// SHARDTAIL_SCALE_ROWS=N changes the row count, to see how memory scales.
func BenchmarkCopyFromSelect1M(b *testing.B) {
	n := int64(1_000_000)
	if v := os.Getenv("SHARDTAIL_SCALE_ROWS"); v != "" {
		var err error
		if n, err = strconv.ParseInt(v, 10, 64); err != nil || n <= 0 {
			b.Fatalf("SHARDTAIL_SCALE_ROWS=%q: want a positive integer", v)
		}
	}
	before := peakRSS(b)
	var afterCopy int64
	for b.Loop() {
		b.StopTimer()
		s := startScaleServer(b)
		c := connectMode(b, s, pgx.QueryExecModeCacheStatement)
		b.StartTimer()
		copyDur := copyIn(b, c, n)
		afterCopy = max(afterCopy, peakRSS(b))
		selectDur := selectAll(b, c, n)
		b.StopTimer()
		b.ReportMetric(float64(n)/copyDur.Seconds(), "copy_rows/s")
		b.ReportMetric(float64(n)/selectDur.Seconds(), "select_rows/s")
		c.Close(context.Background())
		s.Stop()
		b.StartTimer()
	}
	peak := peakRSS(b)
	b.ReportMetric(float64(afterCopy)/(1<<20), "peak_rss_copy_MB")
	b.ReportMetric(float64(peak)/(1<<20), "peak_rss_MB")
	b.ReportMetric(float64(before)/(1<<20), "rss_before_MB")
}
