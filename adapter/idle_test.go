package adapter_test

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgproto3/v2"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// TestIdleSubscribersHaveNoGoroutine holds fast-path subscribers idle,
// half of them as psql does (COPY (SUBSCRIBE ...) TO STDOUT in a simple
// query, with application_name and client_encoding in the startup
// message), half through the extended protocol (a SUBSCRIBE portal
// executed without a row limit, as pgx runs it), and checks that each
// connection parks without a goroutine once it has sent its snapshot,
// rather than waiting for changes on one: no goroutine stack (4 KiB at
// the least) per idle subscriber (issue 19: at most 16 KiB per idle
// subscriber). The stack bytes are checked without the race detector
// only, which changes every goroutine's stack.
func TestIdleSubscribersHaveNoGoroutine(t *testing.T) {
	// No tick: nothing wakes an idle subscriber while the test looks.
	s := testserver.Start(t, testserver.Options{Tick: time.Hour})
	c := connect(t, s)
	mustExec(t, c, "CREATE TABLE idle (id int8, payload text)",
		"INSERT INTO idle VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e'), (6, 'f'), (7, 'g'), (8, 'h'), (9, 'i'), (10, 'j')")

	// One subscriber first, so that what the first one costs the server
	// (the shared tail) is in the baseline.
	openIdleSubscriber(t, s.Addr, false)
	settleStacks()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	const n = 300
	for i := range n {
		openIdleSubscriber(t, s.Addr, i%2 == 1)
	}
	// Once it has sent its snapshot, no subscriber's connection runs on a
	// goroutine: the only connection goroutine left is the test's own
	// connection's, waiting for its client.
	var busy string
	if err := waitFor(20*time.Second, func() error {
		waiting, others := connGoroutines()
		if len(others) > 0 {
			busy = others[0]
			return fmt.Errorf("%d connection goroutines run statements, want none", len(others))
		}
		if waiting != 1 {
			return fmt.Errorf("%d connection goroutines wait for their client, want 1 (the test's)", waiting)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v; one of them:\n%s", err, busy)
	}

	if raceEnabled {
		return
	}
	settleStacks()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	perConn := float64(int64(after.StackInuse)-int64(before.StackInuse)) / n
	t.Logf("goroutine stack per idle subscriber: %.0f B; heap: %.0f B (the test's client sockets included)",
		perConn, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n)
	// None, with room for other goroutines' stacks to grow meanwhile.
	if want := 512.0; perConn > want {
		t.Errorf("goroutine stack per idle subscriber = %.0f B, want at most %.0f", perConn, want)
	}
}

// settleStacks runs garbage collections until goroutine stacks are as
// small as the runtime makes them: each collection halves a stack that
// uses less than a quarter of it, and frees those of ended goroutines.
func settleStacks() {
	for range 6 {
		runtime.GC()
	}
}

// connGoroutines counts the goroutines that run a connection and wait for
// their client's next message, and returns the stacks of the others, which
// run a statement.
func connGoroutines() (waiting int, inStatement []string) {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		switch {
		case !strings.Contains(g, "pgwire.(*Server).runConn("):
		case strings.Contains(g, "pgwire.(*conn).receive("):
			waiting++
		default:
			inStatement = append(inStatement, g)
		}
	}
	return waiting, inStatement
}

// openIdleSubscriber connects as psql does and subscribes to idle with
// PROGRESS: COPY in a simple query, or, with extended, an unlimited
// Execute of a SUBSCRIBE portal. It returns once the snapshot's 10 rows
// and the progress row after them have arrived, and closes the connection
// when the test ends; the test's goroutine then reads nothing more.
func openIdleSubscriber(t *testing.T, addr string, extended bool) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	fe := pgproto3.NewFrontend(pgproto3.NewChunkReader(nc), nc)
	send := func(msgs ...pgproto3.FrontendMessage) {
		t.Helper()
		var b []byte
		for _, m := range msgs {
			if b, err = m.Encode(b); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := nc.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: map[string]string{
		"user": "materialize", "database": "materialize", "application_name": "psql", "client_encoding": "UTF8"}})
	receive := func() pgproto3.BackendMessage {
		t.Helper()
		m, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := m.(*pgproto3.ErrorResponse); ok {
			t.Fatalf("%s: %s", e.Code, e.Message)
		}
		return m
	}
	for {
		if _, ok := receive().(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	if extended {
		send(&pgproto3.Parse{Query: "SUBSCRIBE idle WITH (PROGRESS)"}, &pgproto3.Bind{},
			&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{})
	} else {
		send(&pgproto3.Query{String: "COPY (SUBSCRIBE idle WITH (PROGRESS)) TO STDOUT"})
	}
	// Each row's second column is mz_progressed.
	progressed := func(m pgproto3.BackendMessage) (row, ok bool) {
		switch m := m.(type) {
		case *pgproto3.CopyData:
			f := strings.Split(string(m.Data), "\t")
			return true, len(f) > 1 && f[1] == "t"
		case *pgproto3.DataRow:
			return true, len(m.Values) > 1 && string(m.Values[1]) == "t"
		}
		return false, false
	}
	rows := 0
	for {
		row, progress := progressed(receive())
		switch {
		case !row:
		case !progress:
			rows++
		case rows == 10:
			nc.SetDeadline(time.Time{})
			return
		}
	}
}
