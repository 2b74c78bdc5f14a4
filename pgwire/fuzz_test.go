package pgwire

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgproto3/v2"
)

var writeFuzzSeeds = flag.Bool("write-fuzz-seeds", false, "rewrite the seed corpus of FuzzBackend under testdata/fuzz")

// FuzzBackend feeds arbitrary bytes to an authenticated connection. The
// server must not panic (not even a recovered one), must close or keep
// serving the connection, and must end it once the client is gone.
func FuzzBackend(f *testing.F) {
	b := newFakeBackend()
	srv, err := NewServer(b, Config{MaxMessageSize: 64 << 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	f.Cleanup(func() {
		srv.Close()
		<-done
	})
	addr := ln.Addr().String()

	f.Fuzz(func(t *testing.T, data []byte) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write(startupBytes()); err != nil {
			t.Fatal(err)
		}
		fe := pgproto3.NewFrontend(pgproto3.NewChunkReader(nc), nc)
		for {
			msg, err := fe.Receive()
			if err != nil {
				t.Fatalf("startup: %v", err)
			}
			if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
				break
			}
		}
		nc.Write(data) // the server may already have hung up
		nc.(*net.TCPConn).CloseWrite()
		if _, err := io.Copy(io.Discard, nc); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				hung(t, data, "server did not close the connection after the client left")
			}
		}
		nc.Close()
		deadline := time.Now().Add(5 * time.Second)
		for srv.connCount() != 0 {
			if time.Now().After(deadline) {
				hung(t, data, "connection goroutine did not end")
			}
			time.Sleep(time.Millisecond)
		}
		if n := srv.panics.Load(); n != 0 {
			t.Fatalf("server recovered %d panics", n)
		}
	})
}

// TestFuzzSeeds writes the seed corpus with -write-fuzz-seeds; the seeds are
// protocol exchanges a fuzzer would take long to discover.
func TestFuzzSeeds(t *testing.T) {
	if !*writeFuzzSeeds {
		t.Skip("run with -write-fuzz-seeds to rewrite testdata/fuzz/FuzzBackend")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzBackend")
	must(t, os.MkdirAll(dir, 0o755))
	for name, msgs := range fuzzSeeds() {
		var data []byte
		for _, m := range msgs {
			var err error
			if data, err = m.Encode(data); err != nil {
				t.Fatal(err)
			}
		}
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
}

// rawBytes is a FrontendMessage of literal bytes, for garbage seeds.
type rawBytes []byte

func (rawBytes) Frontend()                                          {}
func (r rawBytes) Decode([]byte) error                              { return nil }
func (r rawBytes) Encode(dst []byte) ([]byte, error)                { return append(dst, r...), nil }
func seed(m ...pgproto3.FrontendMessage) []pgproto3.FrontendMessage { return m }

func fuzzSeeds() map[string][]pgproto3.FrontendMessage {
	return map[string][]pgproto3.FrontendMessage{
		"simple-query": seed(query("select 3; echo x; set a = b"), query("")),
		"extended": seed(parseMsg("s", "echo $1"), &pgproto3.Describe{ObjectType: 'S', Name: "s"},
			&pgproto3.Bind{DestinationPortal: "p", PreparedStatement: "s", ParameterFormatCodes: []int16{1}, Parameters: [][]byte{[]byte("v")}, ResultFormatCodes: []int16{1}},
			describeMsg('P', "p"), execMsg("p", 1), execMsg("p", 0), closeMsg('P', "p"), closeMsg('S', "s"), &pgproto3.Sync{}),
		"row-limit":   seed(parseMsg("", "select 20"), bindMsg("c", ""), execMsg("c", 3), &pgproto3.Flush{}, execMsg("c", 0), &pgproto3.Sync{}),
		"stream":      seed(parseMsg("", "stream"), bindMsg("", ""), execMsg("", 4), &pgproto3.Sync{}, query("stream")),
		"copy-in":     seed(query("copy in"), &pgproto3.CopyData{Data: []byte("a\nb\n")}, &pgproto3.Flush{}, &pgproto3.CopyDone{}, query("select 1")),
		"copy-fail":   seed(query("copy in"), &pgproto3.CopyData{Data: []byte("a")}, &pgproto3.CopyFail{Message: "no"}, &pgproto3.CopyDone{}),
		"copy-out":    seed(query("copy out"), parseMsg("", "copy out"), bindMsg("", ""), execMsg("", 1), &pgproto3.Sync{}),
		"errors":      seed(query("begin; error 42601"), bindMsg("", "nope"), execMsg("", 0), &pgproto3.Sync{}, query("rollback")),
		"misc":        seed(&pgproto3.FunctionCall{Function: 7, Arguments: [][]byte{nil}}, &pgproto3.Flush{}, &pgproto3.Terminate{}),
		"garbage":     seed(rawBytes("\x00\x01\x02\xff\xfe Q\x00\x00\x00")),
		"huge-header": seed(rawBytes("Q\x7f\xff\xff\xffselect")),
		"bad-bind":    seed(parseMsg("", "echo $1"), rawBytes("B\x00\x00\x00\x0a\x00\x00\x00\x01\x00")),
	}
}

// hung fails a fuzz run that left a connection behind, with what is needed to
// debug it: the input and the stacks of the server's goroutines.
func hung(t *testing.T, data []byte, what string) {
	t.Helper()
	stacks := make([]byte, 1<<20)
	stacks = stacks[:runtime.Stack(stacks, true)]
	os.WriteFile(filepath.Join(os.TempDir(), "pgwire-fuzz-hang.txt"), fmt.Appendf(nil, "input %q\n\n%s", data, stacks), 0o644)
	t.Fatalf("%s; input %q", what, data)
}
