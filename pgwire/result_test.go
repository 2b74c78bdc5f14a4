package pgwire

import (
	"net"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgproto3/v2"
)

// TestCheckResultMessage: an element of a Result's batch is one framed
// message of a type its kind allows, or, for COPY out only, a run of
// CopyData messages back to back; anything else is the producer's bug.
func TestCheckResultMessage(t *testing.T) {
	row := AppendDataRow(nil, [][]byte{[]byte("1")})
	data := AppendCopyData(nil, []byte("1\tx\n"))
	run := slices.Concat(data, AppendCopyData(nil, []byte("2\ty\n")), data)
	for _, tc := range []struct {
		name string
		kind ResultKind
		msg  []byte
		ok   bool
	}{
		{"DataRow", ResultRows, row, true},
		{"CopyData", ResultCopyOut, data, true},
		{"CopyDataRun", ResultCopyOut, run, true},
		{"DataRowRun", ResultRows, slices.Concat(row, row), false},
		{"CopyDataRunInRows", ResultRows, run, false},
		{"DataRowInCopy", ResultCopyOut, row, false},
		{"RunWithDataRow", ResultCopyOut, slices.Concat(data, row), false},
		{"RunCutShort", ResultCopyOut, run[:len(run)-1], false},
		{"RunWithTrailingBytes", ResultCopyOut, append(slices.Clone(run), 'd', 0), false},
		{"Short", ResultCopyOut, data[:4], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkResultMessage(tc.kind, tc.msg)
			if got := err == nil; got != tc.ok {
				t.Errorf("checkResultMessage = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// writeCounter is a listener whose connections count their writes.
type writeCounter struct {
	net.Listener
	writes atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: nc, writes: &l.writes}, nil
}

type countedConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countedConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestStaticResultOneWrite checks that a StaticResult (a FETCH's rows)
// reaches the client in one write with its completion and ReadyForQuery,
// where a streaming result is flushed before each Next that may block.
func TestStaticResultOneWrite(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wc := &writeCounter{Listener: ln}
	ts := startServerOn(t, newFakeBackend(), Config{}, wc)
	c := ts.dialRaw(t)
	for _, tc := range []struct {
		query  string
		want   []string
		writes int64
	}{
		{"echo hello", []string{"RowDescription echo:25:0", "DataRow hello", "CommandComplete SELECT 1", "ReadyForQuery I"}, 1},
		// select N is a streaming result in batches of 7: the
		// RowDescription, each batch, and the completion are a write each.
		{"select 10", nil, 4},
	} {
		before := wc.writes.Load()
		c.send(&pgproto3.Query{String: tc.query})
		if tc.want != nil {
			c.expect(tc.want...)
		} else {
			for {
				if _, ok := c.receive().(*pgproto3.ReadyForQuery); ok {
					break
				}
			}
		}
		if got := wc.writes.Load() - before; got != tc.writes {
			t.Errorf("%s: %d writes, want %d", tc.query, got, tc.writes)
		}
	}
}
