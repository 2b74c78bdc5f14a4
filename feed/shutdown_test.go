package feed_test

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/feed"
	"github.com/shardtail/shardtail/internal/testsupport/testcert"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/pgwire"
)

// TestShutdownEndsStreamsCleanly: a server shutting down ends every
// stream with the end of its body, so that a client reads a whole
// response: a gzip member with its trailer (its CRC and length checked by
// the reader), over HTTP/1.1 (a connection the stream took over) and
// HTTP/2 (a ResponseWriter, whose connection the server closed first),
// for one collection and several. A truncated member reads as
// io.ErrUnexpectedEOF.
func TestShutdownEndsStreamsCleanly(t *testing.T) {
	for _, proto := range []struct {
		name  string
		http2 bool
	}{{"HTTP1", false}, {"HTTP2", true}} {
		for _, target := range []struct{ name, path string }{
			{"One", "/v1/subscribe/t"},
			{"Several", "/v1/subscribe?collection=t&collection=u"},
		} {
			t.Run(proto.name+"/"+target.name, func(t *testing.T) {
				testShutdownEndsStream(t, proto.http2, target.path)
			})
		}
	}
}

func testShutdownEndsStream(t *testing.T, http2 bool, path string) {
	cfg, pool := testcert.SelfSigned(t)
	srv := start(t, testserver.Options{PGWire: pgwire.Config{TLSConfig: cfg}})
	execAll(t, connect(t, srv), "CREATE TABLE t (a int)", "CREATE TABLE u (b int)", "INSERT INTO t VALUES (1)", "INSERT INTO u VALUES (2)")
	// A client with a TLS config of its own speaks HTTP/1.1 unless told
	// to try HTTP/2.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: http2}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+srv.FeedAddr+path, nil)
	// Asked for explicitly, the body is not decompressed by the client.
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if want := map[bool]int{false: 1, true: 2}[http2]; resp.ProtoMajor != want || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("%s, Content-Encoding %q: want HTTP/%d, gzip", resp.Proto, resp.Header.Get("Content-Encoding"), want)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := newSSEReader(zr)
	m := model{}
	waitFor(t, r, m, func(ev event) bool { return ev.Name == "progress" })
	srv.Stop()
	for {
		_, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the stream after the server stopped: %v, want its clean end (io.EOF)", err)
		}
	}
}

// TestShutdownCutsSlowClient: a server shutting down does not wait for a
// client that stopped reading in the middle of a large batch (its write
// blocked on a full socket) for the write timeout, an hour here: the
// write gets the shutdown's grace.
func TestShutdownCutsSlowClient(t *testing.T) {
	// Over HTTP/1.1 the stream took its connection over and writes to it;
	// over HTTP/2 it writes through its ResponseWriter, blocked on the
	// stream's flow control, which only closing the connection ends.
	for _, http2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP1", true: "HTTP2"}[http2], func(t *testing.T) {
			testShutdownCutsSlowClient(t, http2)
		})
	}
}

func testShutdownCutsSlowClient(t *testing.T, http2 bool) {
	cfg, pool := testcert.SelfSigned(t)
	srv := start(t, testserver.Options{PGWire: pgwire.Config{TLSConfig: cfg}, Feed: feed.Config{WriteTimeout: time.Hour}})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int, b text)")
	// Some 12 MiB of JSON: more than the sockets' buffers (and an HTTP/2
	// stream's window) hold.
	pad := strings.Repeat("x", 250)
	var rows [][]any
	for i := range 40000 {
		rows = append(rows, []any{int32(i), pad})
	}
	if _, err := c.CopyFrom(context.Background(), pgx.Identifier{"t"}, []string{"a", "b"}, pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if http2 {
		// The client's transport buffers a stream's window (4 MiB) and
		// grants no more while the body is not read.
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
		defer client.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+srv.FeedAddr+"/v1/subscribe/t", nil)
		req.Header.Set("Accept-Encoding", "identity") // gzip would shrink the padding to nothing
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s, want HTTP/2", resp.Proto)
		}
	} else {
		conn, err := (&tls.Dialer{Config: &tls.Config{RootCAs: pool}}).DialContext(ctx, "tcp", srv.FeedAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte("GET /v1/subscribe/t HTTP/1.1\r\nHost: feed\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		// The head goes out with the snapshot's batch, in its write: once
		// the client has it, the write has begun. The client reads no more.
		if _, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil {
			t.Fatal(err)
		}
	}
	stopped := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(stopped)
		srv.Stop()
	}()
	select {
	case <-stopped:
		t.Logf("stopped in %v", time.Since(began))
	case <-ctx.Done():
		t.Fatal("the server's close waited for a client that does not read")
	}
}
