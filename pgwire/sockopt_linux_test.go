//go:build linux

package pgwire

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/sockopt"
)

// TestNotSentLowWater: each accepted TCP connection's socket carries
// Config.NotSentLowWater as TCP_NOTSENT_LOWAT (the kernel's own setting when
// zero), and a result many times larger than it reaches the client whole: a
// write held back at the mark resumes once the client has taken what the
// kernel held.
func TestNotSentLowWater(t *testing.T) {
	kernel, err := sockopt.KernelNotSentLowWater()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		cfg, want int
	}{
		{"Set", 16 << 10, 16 << 10},
		{"Kernel", 0, kernel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, newFakeBackend(), Config{NotSentLowWater: tc.cfg})
			conn := ts.connect(t, "alice", "")
			if got := serverLowWater(t, ts); got != tc.want {
				t.Errorf("TCP_NOTSENT_LOWAT = %d, want %d", got, tc.want)
			}
			const size = 3 << 20
			var s string
			must(t, conn.QueryRow(testContext(t), "big "+strconv.Itoa(size), pgx.QueryExecModeSimpleProtocol).Scan(&s))
			if len(s) != size || strings.Trim(s, "x") != "" {
				t.Errorf("big %d: got %d bytes, want %d of 'x'", size, len(s), size)
			}
		})
	}
}

// serverLowWater returns TCP_NOTSENT_LOWAT of the server's side of its one
// connection, whose startup is complete (the option is set before it).
func serverLowWater(t *testing.T, ts *testServer) int {
	t.Helper()
	ts.mu.Lock()
	var nc net.Conn
	for c := range ts.conns {
		nc = c.raw
	}
	n := len(ts.conns)
	ts.mu.Unlock()
	if n != 1 {
		t.Fatalf("server holds %d connections, want 1", n)
	}
	v, err := sockopt.NotSentLowWater(nc)
	must(t, err)
	return v
}
