package pgwire

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgproto3/v2"
)

// rawClient speaks the protocol message by message, for what drivers do not
// expose: row limits, named portals, message ordering, protocol errors.
type rawClient struct {
	t           *testing.T
	nc          net.Conn
	fe          *pgproto3.Frontend
	pid, secret uint32
}

// dialRaw connects and completes a trust startup as user alice.
func (ts *testServer) dialRaw(t *testing.T) *rawClient {
	t.Helper()
	c := ts.dialRawNoStartup(t)
	c.send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: map[string]string{"user": "alice", "database": "materialize"}})
	for {
		msg := c.receive()
		switch m := msg.(type) {
		case *pgproto3.BackendKeyData:
			c.pid, c.secret = m.ProcessID, m.SecretKey
		case *pgproto3.ErrorResponse:
			t.Fatalf("startup: %s", summarize(m))
		case *pgproto3.ReadyForQuery:
			return c
		}
	}
}

func (ts *testServer) dialRawNoStartup(t *testing.T) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, fe: pgproto3.NewFrontend(pgproto3.NewChunkReader(nc), nc)}
}

// send writes the messages in one write.
func (c *rawClient) send(msgs ...pgproto3.FrontendMessage) {
	c.t.Helper()
	var buf []byte
	for _, m := range msgs {
		var err error
		if buf, err = m.Encode(buf); err != nil {
			c.t.Fatal(err)
		}
	}
	if _, err := c.nc.Write(buf); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *rawClient) receive() pgproto3.BackendMessage {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	msg, err := c.fe.Receive()
	if err != nil {
		c.t.Fatalf("receive: %v", err)
	}
	return msg
}

// expect reads len(want) messages and compares their summaries.
func (c *rawClient) expect(want ...string) {
	c.t.Helper()
	c.expectAt("", want...)
}

// expectAt is expect for a script step at pos (file:line), which the
// failure names.
func (c *rawClient) expectAt(pos string, want ...string) {
	c.t.Helper()
	var got []string
	for range want {
		got = append(got, summarize(c.receive()))
	}
	if !slices.Equal(got, want) {
		if pos != "" {
			pos += ": "
		}
		c.t.Fatalf("%sgot messages:\n\t%s\nwant:\n\t%s", pos, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// summarize renders a backend message as one line for comparisons.
func summarize(msg pgproto3.BackendMessage) string {
	switch m := msg.(type) {
	case *pgproto3.DataRow:
		vals := make([]string, len(m.Values))
		for i, v := range m.Values {
			if v == nil {
				vals[i] = "NULL"
			} else {
				vals[i] = string(v)
			}
		}
		return "DataRow " + strings.Join(vals, ",")
	case *pgproto3.CommandComplete:
		return "CommandComplete " + string(m.CommandTag)
	case *pgproto3.ErrorResponse:
		return fmt.Sprintf("ErrorResponse %s %s %s", m.Severity, m.Code, m.Message)
	case *pgproto3.NoticeResponse:
		return fmt.Sprintf("NoticeResponse %s %s", m.Severity, m.Code)
	case *pgproto3.ReadyForQuery:
		return "ReadyForQuery " + string(m.TxStatus)
	case *pgproto3.RowDescription:
		var fs []string
		for _, f := range m.Fields {
			fs = append(fs, fmt.Sprintf("%s:%d:%d", f.Name, f.DataTypeOID, f.Format))
		}
		return "RowDescription " + strings.Join(fs, ",")
	case *pgproto3.ParameterDescription:
		return fmt.Sprintf("ParameterDescription %v", m.ParameterOIDs)
	case *pgproto3.ParameterStatus:
		return fmt.Sprintf("ParameterStatus %s=%s", m.Name, m.Value)
	case *pgproto3.CopyInResponse:
		return fmt.Sprintf("CopyInResponse %d %v", m.OverallFormat, m.ColumnFormatCodes)
	case *pgproto3.CopyOutResponse:
		return fmt.Sprintf("CopyOutResponse %d %v", m.OverallFormat, m.ColumnFormatCodes)
	case *pgproto3.CopyData:
		return fmt.Sprintf("CopyData %q", m.Data)
	default:
		return reflect.TypeOf(msg).Elem().Name()
	}
}

// ready is the ReadyForQuery summary outside a transaction block.
const ready = "ReadyForQuery I"

func query(sql string) *pgproto3.Query { return &pgproto3.Query{String: sql} }
func parseMsg(name, sql string) *pgproto3.Parse {
	return &pgproto3.Parse{Name: name, Query: sql}
}
func bindMsg(portal, stmt string) *pgproto3.Bind {
	return &pgproto3.Bind{DestinationPortal: portal, PreparedStatement: stmt}
}
func execMsg(portal string, max uint32) *pgproto3.Execute {
	return &pgproto3.Execute{Portal: portal, MaxRows: max}
}
func describeMsg(kind byte, name string) *pgproto3.Describe {
	return &pgproto3.Describe{ObjectType: kind, Name: name}
}
func closeMsg(kind byte, name string) *pgproto3.Close {
	return &pgproto3.Close{ObjectType: kind, Name: name}
}

// TestProtocolScripts runs the message-level scripts of
// testdata/protocol/*.txt (their format: protocol_script_test.go), each on
// a new connection, and checks that the session closes with the script's
// long-running results ended. Each runs on both inputs.
func TestProtocolScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/protocol/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no protocol scripts (%v)", err)
	}
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			for _, file := range files {
				runProtocolFile(t, file, in.pipe)
			}
		})
	}
}

// runProtocolFile runs the scripts of one file, each on a new server whose
// connections read their input as pipe says.
func runProtocolFile(t *testing.T, file string, pipe bool) {
	t.Helper()
	scripts, err := parseProtocolFile(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
		for _, s := range scripts {
			t.Run(s.name, func(t *testing.T) {
				b := newFakeBackend()
				ts := startServerInput(t, b, pipe)
				c := ts.dialRaw(t)
				for _, st := range s.steps {
					c.send(st.send...)
					c.expectAt(s.pos, st.want...)
				}
				c.send(&pgproto3.Terminate{})
				waitFor(t, "the session to close", func() bool { _, closed, _ := b.counts(); return closed == 1 })
				if _, _, ended := b.counts(); ended != s.ended {
					t.Errorf("%s: %d long-running results ended, want %d", s.pos, ended, s.ended)
				}
			})
		}
	})
}

// TestCancelCopyIn cancels a COPY FROM STDIN that waits for client data,
// on both inputs. The interrupted read leaves nothing behind: a later COPY
// still gets its data.
func TestCancelCopyIn(t *testing.T) {
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			ts := startServerInput(t, newFakeBackend(), in.pipe)
			c := ts.dialRaw(t)
			c.send(query("copy in"))
			c.expect("CopyInResponse 0 [0]")
			c.send(&pgproto3.CopyData{Data: []byte("partial")})
			sendCancel(t, ts.addr, c.pid, c.secret)
			c.expect("ErrorResponse ERROR 57014 canceling statement due to user request", ready)
			c.send(&pgproto3.CopyDone{}, query("select 1"))
			c.expect("RowDescription n:20:0", "DataRow 1", "CommandComplete SELECT 1", ready)
			c.send(query("copy in"))
			c.expect("CopyInResponse 0 [0]")
			c.send(&pgproto3.CopyData{Data: []byte("a\nb\n")}, &pgproto3.CopyDone{})
			c.expect("CommandComplete COPY 2", ready)
		})
	}
}

// TestCancelWrongKey checks that a CancelRequest with a wrong secret does
// nothing.
func TestCancelWrongKey(t *testing.T) {
	b := newFakeBackend()
	ts := startServer(t, b, Config{})
	c := ts.dialRaw(t)
	c.send(query("sleep"))
	<-b.running
	sendCancel(t, ts.addr, c.pid, c.secret+1)
	sendCancel(t, ts.addr, c.pid+1, c.secret)
	time.Sleep(50 * time.Millisecond)
	if _, _, ended := b.counts(); ended != 0 {
		t.Fatal("a cancel request with a wrong key canceled the statement")
	}
	sendCancel(t, ts.addr, c.pid, c.secret)
	c.expect("ErrorResponse ERROR 57014 canceling statement due to user request", ready)
}

func sendCancel(t *testing.T, addr string, pid, secret uint32) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	must(t, err)
	defer nc.Close()
	buf := binary.BigEndian.AppendUint32(nil, 16)
	buf = binary.BigEndian.AppendUint32(buf, cancelRequestCode)
	buf = binary.BigEndian.AppendUint32(buf, pid)
	buf = binary.BigEndian.AppendUint32(buf, secret)
	_, err = nc.Write(buf)
	must(t, err)
	// The server closes the connection without a reply.
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := nc.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("cancel request: read %d bytes, err %v; want EOF", n, err)
	}
}

// TestNegotiateProtocolVersion sends a 3.2 StartupMessage with a protocol
// option, as newer libpq does; the server must answer NegotiateProtocolVersion
// (3.0, the option unknown) and go on with protocol 3.0.
func TestNegotiateProtocolVersion(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{})
	c := ts.dialRawNoStartup(t)
	body := binary.BigEndian.AppendUint32(nil, 3<<16|2)
	for _, s := range []string{"user", "alice", "_pq_.frob", "on", ""} {
		body = append(append(body, s...), 0)
	}
	_, err := c.nc.Write(append(be32(4+len(body)), body...))
	must(t, err)
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	hdr := make([]byte, 5)
	_, err = io.ReadFull(c.nc, hdr)
	must(t, err)
	msg := make([]byte, binary.BigEndian.Uint32(hdr[1:])-4)
	_, err = io.ReadFull(c.nc, msg)
	must(t, err)
	want := append(append(be32(3<<16), be32(1)...), "_pq_.frob\x00"...)
	if hdr[0] != 'v' || string(msg) != string(want) {
		t.Fatalf("got %q %q, want NegotiateProtocolVersion %q", hdr[0], msg, want)
	}
	if _, ok := c.receive().(*pgproto3.AuthenticationOk); !ok {
		t.Fatal("no AuthenticationOk after NegotiateProtocolVersion")
	}
	for {
		if _, ok := c.receive().(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	c.send(query("select 1"))
	c.expect("RowDescription n:20:0", "DataRow 1", "CommandComplete SELECT 1", ready)
}

// TestCancelThroughPeer checks peering: a CancelRequest that reaches
// another server behind the same load balancer is forwarded to the server
// holding the connection, and one for an unknown peer is dropped.
func TestCancelThroughPeer(t *testing.T) {
	lnA, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addrA := lnA.Addr().String()
	lnA.Close()
	b := newFakeBackend()
	// B knows A's address; A is started on the address B was told.
	tsB := startServer(t, newFakeBackend(), Config{PeerID: 2, Peers: map[uint8]string{1: addrA, 2: "127.0.0.1:1"}})
	tsA := startServerAt(t, b, Config{PeerID: 1, Peers: map[uint8]string{2: tsB.addr}}, addrA)

	c := tsA.dialRaw(t)
	if peer := c.pid >> peerShift; peer != 1 {
		t.Fatalf("process id %#x carries peer %d, want 1", c.pid, peer)
	}
	c.send(query("sleep"))
	<-b.running
	sendCancel(t, tsB.addr, c.pid&(1<<peerShift-1)|3<<peerShift, c.secret) // peer 3: unknown, dropped
	sendCancel(t, tsB.addr, c.pid, c.secret+1)                             // forwarded, wrong secret
	time.Sleep(50 * time.Millisecond)
	if _, _, ended := b.counts(); ended != 0 {
		t.Fatal("a cancel request for another process canceled the statement")
	}
	sendCancel(t, tsB.addr, c.pid, c.secret)
	c.expect("ErrorResponse ERROR 57014 canceling statement due to user request", ready)
}

func TestPeerConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Peers: map[uint8]string{1: "127.0.0.1:1"}},            // no PeerID
		{PeerID: 1, Peers: map[uint8]string{0: "127.0.0.1:1"}}, // id 0
		{PeerID: 1, Peers: map[uint8]string{2: "no-port"}},     // bad address
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%+v: valid, want an error", cfg)
		}
	}
}
