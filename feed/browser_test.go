package feed_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/feed"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
)

var screenshot = flag.String("screenshot", "", "TestBrowser: write a screenshot of the live table to this PNG file")

// testPage is the page the browser test serves from its own origin: it
// renders the feed with the feed's own script (ui/feed.js), across
// origins (CORS).
const testPage = `<!doctype html><html><head><meta charset="utf-8"><title>feed test</title>
<style>body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em}</style></head>
<body><h1>t</h1><div id="status"></div><table id="rows"><thead></thead><tbody></tbody></table>
<script src="%[1]s/ui/feed.js"></script>
<script>renderFeed("%[1]s/v1/subscribe/t", document.getElementById("rows"), document.getElementById("status"));</script>
</body></html>`

// TestBrowser drives headless Chromium (Debian's chromium): a page opens
// an EventSource on the feed and renders a table from it; the stream
// survives a server-side drop of every connection and a server restart on
// the same storage, reconnecting with Last-Event-ID; the table ends equal
// to the source table, no row missing and none twice, with no reset.
// Chromium asks for gzip: the streams are compressed (each shared run of
// rows compressed once, spliced into the stream), and the page shows
// each change while its stream goes on, so the browser decodes the
// spliced stream as it arrives.
func TestBrowser(t *testing.T) {
	blob, cons := blobmem.New(), consmem.New()
	opts := testserver.Options{Blob: blob, Consensus: cons, Tick: 50 * time.Millisecond,
		Feed: feed.Config{CORSOrigins: []string{"*"}, Retry: 100 * time.Millisecond}}
	srv := start(t, opts)
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (k int, v text)",
		// A resume after the restart must still be in history.
		"ALTER TABLE t SET (RETAIN HISTORY FOR '5 minutes')",
		"INSERT INTO t VALUES (1, 'one'), (2, 'two'), (2, 'two')")
	px := newProxy(t, srv.FeedAddr, nil)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, testPage, "http://"+px.Addr())
	}))
	defer page.Close()

	ctx := headless(t, 90*time.Second, chromedp.WindowSize(800, 600))
	if _, err := chromedp.Run(ctx, chromedp.Navigate(page.URL)); err != nil {
		t.Fatal(err)
	}
	waitTable(t, ctx, c)
	// The page's streams do not end (no UP TO): the rows it shows came
	// while one was open. It is compressed.
	execAll(t, c, "INSERT INTO t VALUES (6, 'six')")
	waitTable(t, ctx, c)
	gzipped := 0
	for _, h := range px.Heads() {
		if strings.Contains(h, "text/event-stream") && strings.Contains(h, "\r\nContent-Encoding: gzip\r\n") {
			gzipped++
		}
	}
	if gzipped == 0 {
		t.Fatalf("no stream the page opened was gzip-compressed; responses began:\n%q", px.Heads())
	}

	execAll(t, c, "INSERT INTO t VALUES (3, 'three')", "DELETE FROM t WHERE k = 1")
	px.Drop() // the server's side breaks every stream
	execAll(t, c, "INSERT INTO t VALUES (4, 'four')", "UPDATE t SET v = 'TWO' WHERE k = 2")
	waitTable(t, ctx, c)

	// A restart: the page reconnects to the new server, on the same
	// storage and address, from the last frontier it saw.
	c.Close(context.Background())
	srv.Stop()
	opts.FeedListen = srv.FeedAddr
	srv = start(t, opts)
	c = connect(t, srv)
	execAll(t, c, "INSERT INTO t VALUES (5, 'five')", "DELETE FROM t WHERE k = 3")
	waitTable(t, ctx, c)

	counts, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[window.feedState.errors, window.feedState.resets]`))
	if err != nil {
		t.Fatal(err)
	}
	errs, resets := counts[0], counts[1]
	if errs < 2 || resets != 0 {
		t.Errorf("the page saw %d connection errors and %d resets, want at least 2 (drop, restart) and none", errs, resets)
	}
	// The feed's own page of the collection shows the same table.
	if _, err := chromedp.Run(ctx, chromedp.Navigate("http://"+srv.FeedAddr+"/ui/t")); err != nil {
		t.Fatal(err)
	}
	waitTable(t, ctx, c)
	if *screenshot != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*screenshot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// waitTable waits until the page's table equals the source table.
func waitTable(t *testing.T, ctx context.Context, c *pgx.Conn) {
	t.Helper()
	rows, err := c.Query(ctx, "SELECT k, v FROM t")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for rows.Next() {
		var k int32
		var v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%d|%s", k, v))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	var got []string
	for {
		var err error
		got, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#rows tbody tr")).map(tr => Array.from(tr.cells).map(c => c.textContent).join("|")).sort()`))
		if err != nil {
			t.Fatalf("read the page's table: %v (last seen %q, want %q)", err, got, want)
		}
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the page's table is\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestBrowserResetDropsAfter: the feed's page opened with a resume point
// (?after=) older than the collection's history gets event: reset and
// starts over without it, once: it shows the table, where reconnecting
// with the same ?after= was reset again, in a loop as fast as the browser
// could open streams.
func TestBrowserResetDropsAfter(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (k int, v text)", "INSERT INTO t VALUES (1, 'one'), (2, 'two')")
	ctx := headless(t, 60*time.Second)
	waitSincePast1(t, ctx, c)
	if _, err := chromedp.Run(ctx, chromedp.Navigate("http://"+srv.FeedAddr+"/ui/t?after=2")); err != nil {
		t.Fatal(err)
	}
	waitTable(t, ctx, c)
	time.Sleep(500 * time.Millisecond)
	resets, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.feedState.resets`))
	if err != nil {
		t.Fatal(err)
	}
	if resets != 1 {
		t.Errorf("the page was reset %d times, want 1", resets)
	}
}

// TestBrowserEnvelope: the feed's page passes its query to the stream, and
// with envelope=upsert its rows are the key's row now (mz_state upsert or
// delete), not counted changes: the table follows updates and deletes.
func TestBrowserEnvelope(t *testing.T) {
	srv := start(t, testserver.Options{Tick: 50 * time.Millisecond})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (k int, v text)", "INSERT INTO t VALUES (1, 'one'), (2, 'two'), (3, 'three')")
	ctx := headless(t, 60*time.Second)
	if _, err := chromedp.Run(ctx, chromedp.Navigate("http://"+srv.FeedAddr+"/ui/t?envelope=upsert&key=k")); err != nil {
		t.Fatal(err)
	}
	waitTable(t, ctx, c)
	execAll(t, c, "UPDATE t SET v = 'TWO' WHERE k = 2", "DELETE FROM t WHERE k = 3", "INSERT INTO t VALUES (4, 'four')")
	waitTable(t, ctx, c)
}

// TestBrowserRefused: a page whose stream the server refuses (an unknown
// collection: 404, which ends an EventSource for good) says so, instead of
// "reconnecting" forever, and one whose stream fails shows the error.
func TestBrowserRefused(t *testing.T) {
	srv := start(t, testserver.Options{Tick: 50 * time.Millisecond})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (k int, v text)", "INSERT INTO t VALUES (1, 'one')")
	ctx := headless(t, 60*time.Second)
	waitStatus := func(prefix string) {
		t.Helper()
		var got string
		for !strings.HasPrefix(got, prefix) {
			if ctx.Err() != nil {
				t.Fatalf("the page's status is %q, want %q...", got, prefix)
			}
			time.Sleep(20 * time.Millisecond)
			if s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("status").textContent`)); err == nil {
				got = s
			}
		}
	}
	if _, err := chromedp.Run(ctx, chromedp.Navigate("http://"+srv.FeedAddr+"/ui/nope")); err != nil {
		t.Fatal(err)
	}
	waitStatus("closed: the server refused the stream")
	if _, err := chromedp.Run(ctx, chromedp.Navigate("http://"+srv.FeedAddr+"/ui/t")); err != nil {
		t.Fatal(err)
	}
	waitTable(t, ctx, c)
	execAll(t, c, "DROP TABLE t")
	waitStatus("error 42704: relation 'materialize.public.t' was dropped; closed: the server refused the stream")
}

// headless starts a headless Chromium for the test, closed when it ends,
// and returns its context, which ends after timeout; extra are more
// options of its process.
func headless(t *testing.T, timeout time.Duration, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is required (scripts/prereqs.sh installs it): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.Headless)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, extra...)...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelTimeout(); cancelBrowser(); cancelAlloc() })
	return ctx
}
