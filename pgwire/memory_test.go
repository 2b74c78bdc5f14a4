package pgwire

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgproto3/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// liveHeap returns the bytes of live heap objects after a full collection
// (two, so that sync.Pool victims go too).
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestClaimedLengthCostsNothing is issue 12's attack: authenticated clients
// that each send a Query header claiming 64 MiB, a few bytes of it, and
// stall. The server must hold what they sent, not what they claimed, and
// give it all back when they leave.
func TestClaimedLengthCostsNothing(t *testing.T) {
	const (
		clients = 200
		claimed = 64 << 20
		sent    = 100 // body bytes each client sends before stalling
		budget  = 64 << 20
	)
	ts := startServer(t, newFakeBackend(), Config{})
	before := liveHeap()

	var cs []*rawClient
	for range clients {
		cs = append(cs, ts.dialRaw(t))
	}
	idle := ts.MemoryBytes()
	msg := binary.BigEndian.AppendUint32([]byte{'Q'}, claimed)
	msg = append(msg, bytes.Repeat([]byte{'x'}, sent)...)
	for _, c := range cs {
		if _, err := c.nc.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	// Every connection has started its body once the server holds at least
	// a first body buffer for each.
	waitFor(t, "the server to read every header", func() bool {
		return ts.MemoryBytes()-idle >= clients*bodyStartLen
	})
	grown := liveHeap() - before
	held := ts.MemoryBytes()
	t.Logf("%d clients claiming %d MiB: live heap grew %.1f MiB, message buffers hold %.1f MiB (%.1f MiB idle)",
		clients, claimed>>20, mib(grown), mib(held), mib(idle))
	if grown >= budget {
		t.Errorf("live heap grew by %.1f MiB, want less than %d MiB", mib(grown), budget>>20)
	}
	if held >= budget {
		t.Errorf("MemoryBytes = %.1f MiB, want less than %d MiB", mib(held), budget>>20)
	}

	for _, c := range cs {
		c.nc.Close()
	}
	waitFor(t, "the connections to end", func() bool { return ts.connCount() == 0 })
	if got := ts.MemoryBytes(); got != 0 {
		t.Errorf("MemoryBytes = %d after every connection ended, want 0", got)
	}
	cs = nil
	after := liveHeap() - before
	t.Logf("after they left: live heap %+.1f MiB", mib(after))
	if after >= 4<<20 {
		t.Errorf("live heap still %.1f MiB above where it started after the clients left, want less than 4 MiB", mib(after))
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// TestLargeMessages sends messages far over every buffer size, within the
// limit, and checks that they arrive intact and that their buffers are let
// go once they are done.
func TestLargeMessages(t *testing.T) {
	b := newFakeBackend()
	ts := startServer(t, b, Config{})
	c := ts.dialRaw(t)

	t.Run("Query", func(t *testing.T) {
		c.t = t
		text := strings.TrimSpace(pattern(20 << 20)) // as echo trims it
		c.send(query("echo " + text))
		c.expect("RowDescription echo:25:0")
		row, ok := c.receive().(*pgproto3.DataRow)
		if !ok || len(row.Values) != 1 || string(row.Values[0]) != text {
			t.Fatalf("echo of %d bytes came back wrong", len(text))
		}
		c.expect("CommandComplete SELECT 1", ready)
		waitReleased(t, ts)
	})
	t.Run("CopyData", func(t *testing.T) {
		c.t = t
		text := pattern(20 << 20)
		c.send(query("copy in"))
		c.expect("CopyInResponse 0 [0]")
		c.send(&pgproto3.CopyData{Data: []byte(text)}, &pgproto3.CopyDone{})
		c.expect(fmt.Sprintf("CommandComplete COPY %d", strings.Count(text, "\n")), ready)
		if got := b.copiedData(); got != text {
			t.Fatalf("copy in received %d bytes, want the %d sent", len(got), len(text))
		}
		waitReleased(t, ts)
	})
}

// pattern returns at least n bytes of text lines: the numbers from 0 in hex,
// so that a misplaced or dropped chunk shows.
func pattern(n int) string {
	b := make([]byte, 0, n+64)
	for i := int64(0); len(b) < n; i++ {
		b = strconv.AppendInt(b, i, 16)
		if i%512 == 511 {
			b = append(b, '\n')
		} else {
			b = append(b, '.')
		}
	}
	return string(append(b, '\n'))
}

// waitReleased waits for the server to let go of the buffer of the last large
// message, which it does when it starts reading the next one.
func waitReleased(t *testing.T, ts *testServer) {
	t.Helper()
	waitFor(t, "the large message buffer to be released", func() bool { return ts.MemoryBytes() < 1<<20 })
}

// TestMemoryGauge checks that the registered gauge reports MemoryBytes.
func TestMemoryGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := startServer(t, newFakeBackend(), Config{Registerer: reg})
	c := ts.dialRaw(t)
	// An idle connection holds no buffer: a message half sent makes this
	// one hold its header buffer.
	if _, err := c.nc.Write(append(binary.BigEndian.AppendUint32([]byte{'Q'}, 100), "sel"...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server to buffer the message", func() bool { return ts.MemoryBytes() > 0 })
	want := float64(ts.MemoryBytes())
	families, err := reg.Gather()
	must(t, err)
	var got []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				got = append(got, fmt.Sprintf("%s{%s=%q} %v", f.GetName(), l.GetName(), l.GetValue(), m.GetGauge().GetValue()))
			}
		}
	}
	if w := fmt.Sprintf("shardtail_memory_bytes{holder=%q} %v", "pgwire", want); len(got) != 1 || got[0] != w {
		t.Errorf("gathered %q, want [%s]", got, w)
	}
	if _, err := NewServer(newFakeBackend(), Config{Registerer: reg}); err == nil {
		t.Error("a second server registered the same gauge")
	}
}

// TestIdleConnectionsHoldNoMessageBuffers: connections that ran a query
// and then wait — for their client, or inside a statement that waits for
// rows, as an idle subscriber does — hold no message buffer at all: no
// header buffer, no send buffer, no read buffer in the input pipe.
func TestIdleConnectionsHoldNoMessageBuffers(t *testing.T) {
	const clients = 20
	ts := startServer(t, newFakeBackend(), Config{})
	for i := range clients {
		c := ts.dialRaw(t)
		c.send(query("select 10"))
		for {
			if _, ok := c.receive().(*pgproto3.ReadyForQuery); ok {
				break
			}
		}
		if i%2 == 1 {
			c.send(query("sleep")) // waits inside the statement
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for ts.MemoryBytes() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := ts.MemoryBytes(); got != 0 {
		t.Errorf("MemoryBytes = %d with %d idle connections, want 0", got, clients)
	}
}

// TestParkedConnectionsLetGoOfTheirDecoder: a connection whose result
// waits for its next batch (an idle subscriber) holds neither its message
// decoder nor a send buffer while it waits, and still gets each batch to
// its client and its next message after the statement.
func TestParkedConnectionsLetGoOfTheirDecoder(t *testing.T) {
	type holds struct{ decoder, sendBuf bool }
	parked := make(chan holds, 16)
	parkedHook = func(c *conn) {
		parked <- holds{decoder: c.be != nil, sendBuf: c.out != nil || c.outBox != nil}
	}
	t.Cleanup(func() { parkedHook = nil })
	b := newFakeBackend()
	ts := startServer(t, b, Config{})
	c := ts.dialRaw(t)

	c.send(&pgproto3.Parse{Query: "tick"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
	c.expect("ParseComplete", "BindComplete")
	for i := 1; i <= 3; i++ {
		if h := <-parked; h.decoder || h.sendBuf {
			t.Fatalf("parked connection (wait %d) holds its decoder: %v, a send buffer: %v; want neither", i, h.decoder, h.sendBuf)
		}
		b.tick()
		c.expect(fmt.Sprintf("DataRow %d", i))
	}
	<-parked
	// The decoder comes back for the next message: a CancelRequest ends
	// the statement, and the connection serves another.
	sendCancel(t, ts.addr, c.pid, c.secret)
	c.expect("ErrorResponse ERROR 57014 canceling statement due to user request", ready)
	c.send(query("select 1"))
	c.expect("RowDescription n:20:0", "DataRow 1", "CommandComplete SELECT 1", ready)
}

// discardConn is a net.Conn whose writes succeed and go nowhere.
type discardConn struct{ net.Conn }

func (discardConn) Write(b []byte) (int, error) { return len(b), nil }

// TestFlushAllocatesNothing: a connection that sends a message and flushes
// it, as an idle subscriber does with each progress row, allocates nothing
// once the send buffer pool is warm: the buffer goes back to the pool with
// the entry it came in.
func TestFlushAllocatesNothing(t *testing.T) {
	srv, err := NewServer(newFakeBackend(), Config{})
	must(t, err)
	c := newConn(srv, context.Background(), discardConn{})
	defer c.cancelAll(errConnDone)
	msg := AppendDataRow(nil, [][]byte{[]byte("1796220014675705031"), []byte("t")})
	cycle := func() {
		c.sendRaw(msg)
		if err := c.flush(); err != nil {
			t.Fatal(err)
		}
	}
	cycle()
	allocs := testing.AllocsPerRun(1000, cycle)
	t.Logf("%.2f allocations per send and flush", allocs)
	if raceEnabled {
		return // the race detector's sync.Pool drops a Put now and then
	}
	if allocs != 0 {
		t.Errorf("send and flush allocate %.2f times, want 0", allocs)
	}
}

// TestStatementContextFollowsConnection: a statement's context, which is
// not a child of the connection's (so that an idle connection's context
// holds no children map), is still canceled with the connection's cause:
// while it runs, and when it begins after the connection was canceled.
func TestStatementContextFollowsConnection(t *testing.T) {
	srv, err := NewServer(newFakeBackend(), Config{})
	must(t, err)
	server, client := net.Pipe()
	defer client.Close()
	c := newConn(srv, context.Background(), server)
	defer c.close()

	ctx, end := c.beginStatement()
	c.cancelStatement()
	if got := context.Cause(ctx); got != ErrQueryCanceled {
		t.Errorf("after a CancelRequest the statement's cause is %v, want %v", got, ErrQueryCanceled)
	}
	end()
	if c.ctx.Err() != nil {
		t.Fatal("a CancelRequest canceled the connection")
	}

	ctx, end = c.beginStatement()
	c.abort(ErrServerClosed)
	if got := context.Cause(ctx); got != ErrServerClosed {
		t.Errorf("running statement's cause after the connection was canceled = %v, want %v", got, ErrServerClosed)
	}
	end()
	ctx, end = c.beginStatement()
	defer end()
	if got := context.Cause(ctx); got != ErrServerClosed {
		t.Errorf("cause of a statement begun after the connection was canceled = %v, want %v", got, ErrServerClosed)
	}
}
