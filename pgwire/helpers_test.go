package pgwire

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// testServer is a Server on a loopback port with a fakeBackend.
type testServer struct {
	*Server
	addr         string
	b            *fakeBackend
	done         chan error
	once         sync.Once
	expectPanics int64
}

// startServer starts a server on 127.0.0.1:0. Cleanup closes it and checks
// that it recovered no unexpected panic and closed every session it opened.
func startServer(t *testing.T, b *fakeBackend, cfg Config) *testServer {
	t.Helper()
	return startServerAt(t, b, cfg, "127.0.0.1:0")
}

// startServerAt is startServer listening on addr.
func startServerAt(t *testing.T, b *fakeBackend, cfg Config, addr string) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return startServerOn(t, b, cfg, ln)
}

// startServerOn is startServer serving ln.
func startServerOn(t *testing.T, b *fakeBackend, cfg Config, ln net.Listener) *testServer {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	srv, err := NewServer(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: srv, addr: ln.Addr().String(), b: b, done: make(chan error, 1)}
	go func() { ts.done <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() { ts.shutdown(t) })
	return ts
}

func (ts *testServer) shutdown(t *testing.T) {
	t.Helper()
	ts.once.Do(func() {
		if err := ts.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-ts.done; err != ErrServerClosed {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
		if got := ts.panics.Load(); got != ts.expectPanics {
			t.Errorf("recovered %d panics, want %d", got, ts.expectPanics)
		}
		if open, closed, _ := ts.b.counts(); open != closed {
			t.Errorf("sessions: %d opened, %d closed", open, closed)
		}
		if n := ts.connCount(); n != 0 {
			t.Errorf("%d connections left after Close", n)
		}
	})
}

func (ts *testServer) host() (string, string) {
	h, p, _ := net.SplitHostPort(ts.addr)
	return h, p
}

// url returns a connection string for user (with "user:password" for a
// password) and extra query parameters.
func (ts *testServer) url(user, extra string) string {
	s := fmt.Sprintf("postgres://%s@%s/materialize?sslmode=disable&connect_timeout=5", user, ts.addr)
	if extra != "" {
		s += "&" + extra
	}
	return s
}

// connect opens a pgx connection closed at cleanup.
func (ts *testServer) connect(t *testing.T, user, extra string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(testContext(t), ts.url(user, extra))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// testContext returns a context that ends with the test or after 30 seconds,
// so that a hang fails the test instead of the whole run.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or 5 seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testLogger logs to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// serverGoroutines returns the stacks of goroutines running pgwire server
// code; after Close there must be none.
func serverGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "pgwire.(*Server).serveConn") || strings.Contains(g, "pgwire.(*inputPipe).readLoop") ||
			strings.Contains(g, "pgwire.(*hangupWatcher).loop") {
			found = append(found, g)
		}
	}
	return found
}
