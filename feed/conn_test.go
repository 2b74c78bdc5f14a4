package feed_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
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
