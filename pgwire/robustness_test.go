package pgwire

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgproto3/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// startupBytes is a valid trust StartupMessage for alice.
func startupBytes() []byte {
	return startupWith(map[string]string{"user": "alice"})
}

// startupWith is a StartupMessage with the given parameters.
func startupWith(params map[string]string) []byte {
	b, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: params}).Encode(nil)
	return b
}

// TestGarbage sends broken input and checks that the client gets a FATAL
// error where one can be sent, that its connection is closed, and that another
// client is unaffected throughout.
func TestGarbage(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{MaxMessageSize: 1 << 20})
	bystander := ts.connect(t, "alice", "")
	ctx, cancel := context.WithCancel(testContext(t))
	rows, err := bystander.Query(ctx, "stream")
	must(t, err)
	defer rows.Close()
	defer cancel() // pgx sends a CancelRequest, ending the stream
	nextRow := func() {
		t.Helper()
		if !rows.Next() {
			t.Fatalf("bystander stream ended: %v", rows.Err())
		}
	}
	nextRow()

	for _, tc := range []struct {
		name    string
		startup bool   // send a valid startup first
		data    string // then this
		code    string // the FATAL error expected, "" for a silent close
	}{
		{"HTTPRequest", false, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "08P01"},
		{"ShortStartup", false, "\x00\x00\x00\x04", "08P01"},
		{"NegativeStartupLength", false, "\xff\xff\xff\xff", "08P01"},
		{"UnknownProtocol", false, "\x00\x00\x00\x08\x00\x02\x00\x00", "0A000"},
		{"BadStartupLayout", false, "\x00\x00\x00\x0c\x00\x03\x00\x00user", "08P01"},
		{"BadCancelLength", false, "\x00\x00\x00\x0c\x04\xd2\x16\x2e\x00\x00\x00\x01", "08P01"},
		{"TruncatedStartup", false, "\x00\x00\x00\x20\x00\x03", ""},
		{"UnknownMessageType", true, "\x00\x00\x00\x00\x05", "08P01"},
		{"RandomBytes", true, "\x8b\x1f\xe2\x07\x99\x00\x13\x37garbage", "08P01"},
		{"HugeQuery", true, "Q\x7f\xff\xff\xff", "08P01"},
		{"HighBitLength", true, "Q\xf3\x0a\x5b\x5d", "08P01"},
		{"HighBitCopyData", true, "Q\x00\x00\x00\x0ccopy in\x00d\xf3\x0a\x5b\x5d", "08P01"},
		{"OverLimitQuery", true, "Q\x00\x20\x00\x00", "08P01"},
		{"HugeSync", true, "S\x00\x01\x00\x00", "08P01"},
		{"NegativeLength", true, "Q\x00\x00\x00\x02", "08P01"},
		{"MalformedBind", true, "B\x00\x00\x00\x06\x01\x02", "08P01"},
		{"MalformedParse", true, "P\x00\x00\x00\x05x", "08P01"},
		{"PasswordAfterAuth", true, "p\x00\x00\x00\x08abc\x00", "08P01"},
		{"SSLRequestAfterStartup", true, "\x00\x00\x00\x08\x04\xd2\x16\x2f", "08P01"},
		// Not UTF-8: it would be echoed to the client and stored (the
		// statement log) where it cannot be.
		{"StartupValueNotUTF8", false, string(startupWith(map[string]string{"user": "alice", "application_name": "ev\xffil"})), "22021"},
		{"StartupNameNotUTF8", false, string(startupWith(map[string]string{"user": "alice", "opt\xfe": "x"})), "22021"},
		{"UserNotUTF8", false, string(startupWith(map[string]string{"user": "al\xffice"})), "22021"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ts.dialRawNoStartup(t)
			data := []byte(tc.data)
			if tc.startup {
				data = append(startupBytes(), data...)
			}
			_, err := c.nc.Write(data)
			must(t, err)
			// Half-close: a server waiting for more bytes sees EOF. A server
			// that refused the bytes at once may have reset the connection
			// already, and then there is nothing to half-close.
			if err := c.nc.(*net.TCPConn).CloseWrite(); err != nil && !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatal(err)
			}
			got := readAllMessages(t, c.nc)
			want := "FATAL " + tc.code
			if tc.code == "" {
				want = ""
			}
			if !strings.HasSuffix(got, want) {
				t.Errorf("got %q, want it to end with %q", got, want)
			}
			nextRow()
		})
	}
	waitFor(t, "garbage connections to end", func() bool { return ts.connCount() == 1 })
	nextRow()
}

// readAllMessages reads until the server closes the connection and renders
// what it sent: "R" for messages of the startup, "FATAL CODE" for an error.
func readAllMessages(t *testing.T, nc net.Conn) string {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	fe := pgproto3.NewFrontend(pgproto3.NewChunkReader(nc), nc)
	var out []string
	for {
		msg, err := fe.Receive()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("server did not close the connection; got %q", out)
			}
			return strings.Join(out, " ")
		}
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			out = append(out, e.Severity+" "+e.Code)
		} else {
			out = append(out, "R")
		}
	}
}

func TestMaxMessageSize(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{MaxMessageSize: 16 << 10})
	small := ts.connect(t, "alice", "")
	big := ts.connect(t, "alice", "")
	ctx := testContext(t)

	var s string
	must(t, small.QueryRow(ctx, "echo "+strings.Repeat("x", 15<<10), pgx.QueryExecModeSimpleProtocol).Scan(&s))
	_, err := big.Exec(ctx, "echo "+strings.Repeat("x", 17<<10), pgx.QueryExecModeSimpleProtocol)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "08P01" || pgErr.Severity != "FATAL" {
		t.Errorf("oversized query: got %v, want FATAL 08P01", err)
	}
	if !big.IsClosed() {
		if _, err := big.Exec(ctx, "select 1"); err == nil {
			t.Error("connection usable after an oversized message")
		}
	}
	// Large responses are not limited.
	must(t, small.QueryRow(ctx, "big 100000", pgx.QueryExecModeSimpleProtocol).Scan(&s))
	if len(s) != 100000 {
		t.Errorf("big: %d bytes", len(s))
	}
}

func TestPanicInSession(t *testing.T) {
	b := newFakeBackend()
	b.allowPanic = true
	ts := startServer(t, b, Config{})
	ts.expectPanics = 1
	conn := ts.connect(t, "alice", "")
	other := ts.connect(t, "alice", "")
	_, err := conn.Exec(testContext(t), "panic")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "XX000" || pgErr.Severity != "FATAL" || pgErr.Message != "internal error" {
		t.Errorf("got %v, want FATAL XX000 internal error", err)
	}
	if got := collectInts(t, other, pgx.QueryExecModeCacheStatement, "select 2"); len(got) != 2 {
		t.Errorf("other connection: %v", got)
	}
	waitFor(t, "the panicked session to close", func() bool { _, closed, _ := b.counts(); return closed == 1 })
}

func TestAuthTimeout(t *testing.T) {
	ts := startServer(t, authBackend(), Config{AuthTimeout: 100 * time.Millisecond})
	// A client that never sends a startup packet...
	idle := ts.dialRawNoStartup(t)
	// ...and one that stops in the middle of SCRAM.
	stuck := ts.dialRawNoStartup(t)
	stuck.send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: map[string]string{"user": "bob"}})
	for _, c := range []*rawClient{idle, stuck} {
		c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.ReadAll(c.nc)
		if err != nil {
			t.Errorf("connection not closed by the server: %v", err)
		}
	}
	waitFor(t, "timed-out connections to end", func() bool { return ts.connCount() == 0 })
}

func TestServerClose(t *testing.T) {
	b := newFakeBackend()
	ts := startServer(t, b, Config{})
	idle := ts.connect(t, "alice", "")
	streaming := ts.connect(t, "alice", "")
	rows, err := streaming.Query(testContext(t), "stream")
	must(t, err)
	for i := 0; i < 3; i++ {
		if !rows.Next() {
			t.Fatal(rows.Err())
		}
	}
	<-b.running // the streaming client's stream started
	// A client that sends a streaming query and never reads: the server is
	// blocked writing to it (the big row, or the stream after it when the
	// sockets' buffers took the row).
	stuck := ts.dialRaw(t)
	stuck.send(query("big 1000000"), query("stream"))
	time.Sleep(50 * time.Millisecond)

	closed := make(chan struct{})
	go func() {
		ts.shutdown(t)
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}

	for rows.Next() {
	}
	var pgErr *pgconn.PgError
	if err := rows.Err(); !errors.As(err, &pgErr) || pgErr.Code != "57P01" {
		t.Errorf("streaming client: got %v, want 57P01", err)
	}
	if _, err := idle.Exec(testContext(t), "select 1"); !errors.As(err, &pgErr) || pgErr.Code != "57P01" {
		t.Errorf("idle client: got %v, want 57P01", err)
	}
	// Every stream that started ended: the streaming client's, and the
	// stuck client's if it got past the big row.
	started := 1 + len(b.running)
	if open, closed, ended := b.counts(); open != 3 || closed != 3 || ended != started {
		t.Errorf("sessions open %d closed %d, streams ended %d; want 3, 3, %d", open, closed, ended, started)
	}
	// Close waited for the goroutines' WaitGroup; give them a moment to
	// return from their last deferred call.
	deadline := time.Now().Add(2 * time.Second)
	for g := serverGoroutines(); len(g) != 0; g = serverGoroutines() {
		if time.Now().After(deadline) {
			t.Fatalf("server goroutines left after Close:\n%s", strings.Join(g, "\n\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := ts.Serve(context.Background(), newClosedListener()); err != ErrServerClosed {
		t.Errorf("Serve after Close: %v", err)
	}
}

func TestServeContext(t *testing.T) {
	b := newFakeBackend()
	srv, err := NewServer(b, Config{Logger: testLogger(t)})
	must(t, err)
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	conn, err := pgx.Connect(testContext(t), "postgres://alice@"+ln.Addr().String()+"/x?sslmode=disable")
	must(t, err)
	defer conn.Close(context.Background())
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve: %v, want context.Canceled", err)
	}
	// Connections outlive Serve.
	if got := collectInts(t, conn, pgx.QueryExecModeCacheStatement, "select 1"); len(got) != 1 {
		t.Errorf("after Serve returned: %v", got)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("listener still accepting")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, ""},
		{Config{Auth: AuthMethod(9)}, "Auth"},
		{Config{MaxMessageSize: 10}, "MaxMessageSize"},
		{Config{AuthTimeout: -time.Second}, "AuthTimeout"},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%+v) = %v, want an error naming %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := NewServer(newFakeBackend(), Config{MaxMessageSize: 1}); err == nil {
		t.Error("NewServer accepted an invalid config")
	}
}

func newClosedListener() net.Listener {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ln.Close()
	return ln
}
