//go:build linux

package feed_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/shardtail/shardtail/feed"
	"github.com/shardtail/shardtail/internal/sockopt"
	"github.com/shardtail/shardtail/internal/testsupport/testcert"
)

// recordingListener keeps the connections it accepts.
type recordingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// TestNotSentLowWater: each connection the feed accepts carries
// Config.NotSentLowWater as TCP_NOTSENT_LOWAT, so that a stream whose
// client stops reading pins no more kernel memory than that; zero leaves
// the kernel's.
func TestNotSentLowWater(t *testing.T) {
	kernel, err := sockopt.KernelNotSentLowWater()
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, pool := testcert.SelfSigned(t)
	for _, tc := range []struct {
		name      string
		cfg, want int
		tls       bool // HTTPS, HTTP/2: the mark goes on the socket under TLS
	}{{"Set", 16 << 10, 16 << 10, false}, {"Kernel", 0, kernel, false}, {"TLS", 16 << 10, 16 << 10, true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := feed.Config{NotSentLowWater: tc.cfg}
			client := &http.Client{Transport: &http.Transport{}}
			scheme := "http"
			if tc.tls {
				cfg.TLSConfig = tlsConfig
				client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
				scheme = "https"
			}
			h, err := feed.NewHandler(nil, cfg)
			if err != nil {
				t.Fatal(err)
			}
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := &recordingListener{Listener: inner}
			srv := feed.Serve(h, ln) // its Close closes h
			defer srv.Close()
			// A static page: the request needs no collection.
			defer client.CloseIdleConnections()
			resp, err := client.Get(scheme + "://" + srv.Addr().String() + "/ui/feed.js")
			if err != nil {
				t.Fatal(err)
			}
			// Read to the end, so that the connection stays open, idle in
			// the client's pool, while its option is read below (a body
			// closed unread makes the client close the connection, and
			// the server then closes its end: a race with the read).
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /ui/feed.js: %s", resp.Status)
			}
			if tc.tls && resp.ProtoMajor != 2 {
				t.Fatalf("GET over TLS: %s, want HTTP/2", resp.Proto)
			}
			ln.mu.Lock()
			defer ln.mu.Unlock()
			if len(ln.conns) != 1 {
				t.Fatalf("accepted %d connections, want 1", len(ln.conns))
			}
			got, err := sockopt.NotSentLowWater(ln.conns[0])
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("TCP_NOTSENT_LOWAT = %d, want %d", got, tc.want)
			}
		})
	}
}
