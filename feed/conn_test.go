package feed_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardtail/shardtail/feed"
	"github.com/shardtail/shardtail/internal/testsupport/testcert"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	"github.com/shardtail/shardtail/pgwire"
)

// TestLiveStreamOwnsConnection: over HTTP/1.1 a live stream writes its
// own response head on the connection it took from net/http (a well-formed
// 200 whose body runs to the close, with the stream's headers and CORS),
// streams its events, and ends when the client leaves, as a stream served
// through net/http did, without waiting for a write to fail.
func TestLiveStreamOwnsConnection(t *testing.T) {
	srv := start(t, testserver.Options{Tick: time.Hour, Feed: feed.Config{CORSOrigins: []string{"http://page.test"}, Heartbeat: time.Hour}})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int)", "INSERT INTO t VALUES (1)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", srv.FeedAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /v1/subscribe/t HTTP/1.1\r\nHost: feed\r\nOrigin: http://page.test\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []struct{ name, want string }{
		{"Content-Type", "text/event-stream; charset=utf-8"}, {"Cache-Control", "no-store"},
		{"Access-Control-Allow-Origin", "http://page.test"},
	} {
		if got := resp.Header.Get(h.name); got != h.want {
			t.Errorf("header %s: %q, want %q", h.name, got, h.want)
		}
	}
	if resp.StatusCode != http.StatusOK || resp.ContentLength != -1 || len(resp.TransferEncoding) != 0 || !resp.Close {
		t.Errorf("response %d, length %d, transfer encoding %v, close %v: want 200 with a body to the close",
			resp.StatusCode, resp.ContentLength, resp.TransferEncoding, resp.Close)
	}
	m := model{}
	waitFor(t, newSSEReader(resp.Body), m, func(ev event) bool { return ev.Name == "progress" })
	wantModel(t, m, `{"a":1} x1`)
	if got := gauge(t, srv, "shardtail_feed_streams/sse"); got != 1 {
		t.Fatalf("shardtail_feed_streams{transport=sse} = %v with the stream open, want 1", got)
	}
	// The client leaves; no heartbeat is due for an hour.
	conn.Close()
	for gauge(t, srv, "shardtail_feed_streams/sse") != 0 {
		if ctx.Err() != nil {
			t.Fatal("the stream outlived its client")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStreamEndWaitsForClient: a stream that ended (UP TO) sends the end
// of its response after its bytes and closes the connection once the
// client has read them and closed its side, rather than leave them to a
// closed socket (which the kernel resets under memory pressure): the
// client reads every byte to EOF while the server still holds the
// connection.
func TestStreamEndWaitsForClient(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int)", "INSERT INTO t VALUES (1)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := get(t, ctx, "http://"+srv.FeedAddr+"/v1/subscribe/t?live=false")
	io.Copy(io.Discard, resp.Body)
	f, err := strconv.ParseUint(resp.Header.Get(feed.FrontierHeader), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", srv.FeedAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	// UP TO well after the frontier: the stream's AS OF, chosen when it
	// starts, may be past it.
	fmt.Fprintf(conn, "GET /v1/subscribe/t?up_to=%d HTTP/1.1\r\nHost: feed\r\n\r\n", f+300)
	body, err := io.ReadAll(conn) // to the server's end of the response
	if err != nil {
		t.Fatalf("read to the end: %v", err)
	}
	if !strings.Contains(string(body), "\n\nevent: end\n") {
		t.Fatalf("the response ended without its end event:\n%s", body)
	}
	// The server's socket is still open: bytes the client sends now are
	// read, not answered with a reset (as by a closed socket).
	if _, err := conn.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("read after the end: %d bytes, %v, want EOF (the server closed its socket before the client)", n, err)
	}
	if got := gauge(t, srv, "shardtail_feed_streams/sse"); got != 1 {
		t.Errorf("shardtail_feed_streams{transport=sse} = %v after the response ended, want 1 until the client closes", got)
	}
	conn.Close()
	for gauge(t, srv, "shardtail_feed_streams/sse") != 0 {
		if ctx.Err() != nil {
			t.Fatal("the stream was not closed after its client closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gauge reads a metric of srv's registry by name and label values
// ("name/value").
func gauge(t *testing.T, srv *testserver.Server, name string) float64 {
	t.Helper()
	families, err := srv.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			n := f.GetName()
			for _, l := range m.GetLabel() {
				n += "/" + l.GetValue()
			}
			if n == name {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// TestClientLeavingDuringStorageRead: a stream whose Next is blocked in
// storage (its snapshot, another stream reading the piece it waits for)
// ends when its client leaves, while the read still waits: it does not
// hold its share of the snapshot until its next write, a heartbeat an
// hour away here. (The connection was watched only once the stream first
// waited for new data, which a snapshot read is not.)
func TestClientLeavingDuringStorageRead(t *testing.T) {
	blob := &gatedBlob{Blob: blobmem.New()}
	srv := start(t, testserver.Options{Blob: blob, Tick: time.Hour, Feed: feed.Config{Heartbeat: time.Hour}})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int)", "INSERT INTO t VALUES (1), (2)")
	blob.shut()
	t.Cleanup(blob.open) // before the server stops (cleanups run last first)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitUntil := func(what string, done func() bool) {
		t.Helper()
		for !done() {
			if ctx.Err() != nil {
				t.Fatal(what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	request := func() net.Conn {
		t.Helper()
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", srv.FeedAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := conn.Write([]byte("GET /v1/subscribe/t HTTP/1.1\r\nHost: feed\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	// The first stream reads the snapshot's piece itself and waits in the
	// part's Get; the second, at the same time (no tick in between),
	// shares it and waits for that read.
	request()
	waitUntil("the first stream never read a part", func() bool {
		return blob.held.Load() > 0 && gauge(t, srv, "shardtail_feed_streams/sse") == 1
	})
	leaving := request()
	waitUntil("the second stream never opened", func() bool { return gauge(t, srv, "shardtail_feed_streams/sse") == 2 })
	leaving.Close()
	waitUntil("the stream whose client left while it waited for storage is still open", func() bool {
		return gauge(t, srv, "shardtail_feed_streams/sse") == 1
	})
}

// gatedBlob is a blob whose Gets of parts wait while it is shut, until
// it opens or their context ends. It hides the inner blob's Lend, so that
// every part read is a Get.
type gatedBlob struct {
	persist.Blob
	held atomic.Int64 // Gets that waited

	mu   sync.Mutex
	gate chan struct{} // mu; nil while open
}

func (g *gatedBlob) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate == nil {
		g.gate = make(chan struct{})
	}
}

func (g *gatedBlob) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

func (g *gatedBlob) Get(ctx context.Context, key string) ([]byte, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	// Parts are <shard>/p<uuid>; rollups <shard>/<seqno>/r<uuid>.
	if gate != nil && strings.HasPrefix(path.Base(key), "p") {
		g.held.Add(1)
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Blob.Get(ctx, key)
}

// TestStreamHeadersAtOnce: a stream through a ResponseWriter (HTTP/2)
// sends its response's head before it first waits for its subscription,
// whatever its framing: an uncompressed NDJSON stream resuming at the
// latest frontier has nothing to send then (SSE has its retry hint, gzip
// its header), and sent its head only with its first batch or heartbeat,
// an hour away here (no tick either).
func TestStreamHeadersAtOnce(t *testing.T) {
	cfg, pool := testcert.SelfSigned(t)
	srv := start(t, testserver.Options{Tick: time.Hour, PGWire: pgwire.Config{TLSConfig: cfg}, Feed: feed.Config{Heartbeat: time.Hour}})
	execAll(t, connect(t, srv), "CREATE TABLE t (a int)")
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:    &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2:  true,
		DisableCompression: true,
	}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+srv.FeedAddr+"/v1/subscribe/t?live=false", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	frontier := resp.Header.Get(feed.FrontierHeader)
	for _, tc := range []struct{ name, accept, encoding, contentType string }{
		{"NDJSON", "application/x-ndjson", "", "application/x-ndjson"},
		{"NDJSONGzip", "application/x-ndjson", "gzip", "application/x-ndjson"},
		{"SSE", "text/event-stream", "", "text/event-stream; charset=utf-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+srv.FeedAddr+"/v1/subscribe/t?after="+frontier, nil)
			req.Header.Set("Accept", tc.accept)
			if tc.encoding != "" {
				req.Header.Set("Accept-Encoding", tc.encoding)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("no response head: %v", err)
			}
			defer resp.Body.Close()
			if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s %d, want HTTP/2 200", resp.Proto, resp.StatusCode)
			}
			if got := resp.Header.Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type %q, want %q", got, tc.contentType)
			}
			if got := resp.Header.Get("Content-Encoding"); got != tc.encoding {
				t.Errorf("Content-Encoding %q, want %q", got, tc.encoding)
			}
		})
	}
}
