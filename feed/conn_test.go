package feed_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardtail/shardtail/feed"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
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
