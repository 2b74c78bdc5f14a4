package pgwire

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
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
	var got []string
	for range want {
		got = append(got, summarize(c.receive()))
	}
	if !slices.Equal(got, want) {
		c.t.Fatalf("got messages:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
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

// step is one exchange of a protocol script: messages to send, messages to
// expect back.
type step struct {
	send []pgproto3.FrontendMessage
	want []string
}

func msgs(m ...pgproto3.FrontendMessage) []pgproto3.FrontendMessage { return m }
func lines(s ...string) []string                                    { return s }

func rows(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("DataRow %d", i))
	}
	return out
}

func concat(parts ...[]string) []string { return slices.Concat(parts...) }

var (
	syncM   = &pgproto3.Sync{}
	flushM  = &pgproto3.Flush{}
	ready   = "ReadyForQuery I"
	readyT  = "ReadyForQuery T"
	parseOK = "ParseComplete"
	bindOK  = "BindComplete"
)

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

// TestProtocolScripts runs message-level scripts, each on a new connection.
func TestProtocolScripts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
		ended int // long-running results that must have ended
	}{
		{name: "PortalRowLimit", steps: []step{{
			send: msgs(parseMsg("", "select 10"), bindMsg("p", ""), describeMsg('P', "p"),
				execMsg("p", 3), execMsg("p", 3), execMsg("p", 0), execMsg("p", 0), syncM),
			want: concat(lines(parseOK, bindOK, "RowDescription n:20:0"),
				rows(1, 3), lines("PortalSuspended"), rows(4, 6), lines("PortalSuspended"),
				rows(7, 10), lines("CommandComplete SELECT 10", "CommandComplete SELECT 10", ready)),
		}}},
		{name: "PortalLivesUntilCommit", ended: 1, steps: []step{
			{send: msgs(query("begin")), want: lines("CommandComplete BEGIN", readyT)},
			{send: msgs(parseMsg("s", "stream"), bindMsg("c", "s"), execMsg("c", 2), syncM),
				want: concat(lines(parseOK, bindOK), rows(1, 2), lines("PortalSuspended", readyT))},
			{send: msgs(execMsg("c", 2), syncM), want: concat(rows(3, 4), lines("PortalSuspended", readyT))},
			{send: msgs(query("commit")), want: lines("CommandComplete COMMIT", ready)},
			{send: msgs(execMsg("c", 1), syncM), want: lines(`ErrorResponse ERROR 34000 portal "c" does not exist`, ready)},
		}},
		{name: "PortalClosedAtSyncOutsideTransaction", steps: []step{
			{send: msgs(parseMsg("", "select 5"), bindMsg("p", ""), execMsg("p", 1), syncM),
				want: concat(lines(parseOK, bindOK), rows(1, 1), lines("PortalSuspended", ready))},
			{send: msgs(execMsg("p", 1), syncM), want: lines(`ErrorResponse ERROR 34000 portal "p" does not exist`, ready)},
		}},
		{name: "SkipUntilSync", steps: []step{
			{send: msgs(parseMsg("", "select 1"), bindMsg("", "nope"), execMsg("", 0), parseMsg("x", "select 2"), describeMsg('S', "x"), flushM, syncM),
				want: lines(parseOK, `ErrorResponse ERROR 26000 prepared statement "nope" does not exist`, ready)},
			{send: msgs(bindMsg("", ""), execMsg("", 0), describeMsg('S', "x"), syncM),
				want: concat(lines(bindOK), rows(1, 1), lines("CommandComplete SELECT 1", `ErrorResponse ERROR 26000 prepared statement "x" does not exist`, ready))},
		}},
		{name: "ErrorInTransactionBlock", steps: []step{
			{send: msgs(query("begin")), want: lines("CommandComplete BEGIN", readyT)},
			{send: msgs(parseMsg("", "error 22012"), bindMsg("", ""), execMsg("", 0), syncM),
				want: lines(parseOK, bindOK, "ErrorResponse ERROR 22012 fake error 22012", "ReadyForQuery E")},
			{send: msgs(bindMsg("", "missing"), syncM), want: lines(`ErrorResponse ERROR 26000 prepared statement "missing" does not exist`, "ReadyForQuery E")},
			{send: msgs(query("rollback")), want: lines("CommandComplete ROLLBACK", ready)},
		}},
		{name: "PgwireErrorFailsTransactionBlock", steps: []step{
			{send: msgs(query("begin")), want: lines("CommandComplete BEGIN", readyT)},
			{send: msgs(execMsg("nope", 0), syncM), want: lines(`ErrorResponse ERROR 34000 portal "nope" does not exist`, "ReadyForQuery E")},
		}},
		{name: "DuplicateNames", steps: []step{
			{send: msgs(parseMsg("s", "select 1"), parseMsg("s", "select 2"), syncM),
				want: lines(parseOK, `ErrorResponse ERROR 42P05 prepared statement "s" already exists`, ready)},
			{send: msgs(query("begin"), bindMsg("p", "s"), bindMsg("p", "s"), syncM),
				want: lines("CommandComplete BEGIN", readyT, bindOK, `ErrorResponse ERROR 42P03 portal "p" already exists`, "ReadyForQuery E")},
		}},
		{name: "Describe", steps: []step{{
			send: msgs(parseMsg("e", "echo $1"), describeMsg('S', "e"), parseMsg("c", "copy out"), describeMsg('S', "c"),
				&pgproto3.Bind{PreparedStatement: "e", Parameters: [][]byte{[]byte("x")}, ResultFormatCodes: []int16{1}}, describeMsg('P', ""),
				describeMsg('S', "nope"), syncM),
			want: lines(parseOK, "ParameterDescription [25]", "RowDescription echo:25:0", parseOK, "ParameterDescription []", "NoData",
				bindOK, "RowDescription echo:25:1", `ErrorResponse ERROR 26000 prepared statement "nope" does not exist`, ready),
		}}},
		{name: "BindValidation", steps: []step{
			{send: msgs(parseMsg("e", "echo $1"), bindMsg("", "e"), syncM),
				want: lines(parseOK, `ErrorResponse ERROR 08P01 bind message supplies 0 parameters, but prepared statement "e" requires 1`, ready)},
			{send: msgs(&pgproto3.Bind{PreparedStatement: "e", Parameters: [][]byte{nil}, ResultFormatCodes: []int16{0, 0}}, syncM),
				want: lines("ErrorResponse ERROR 08P01 bind message has 2 result formats but query has 1 columns", ready)},
			{send: msgs(&pgproto3.Bind{PreparedStatement: "e", Parameters: [][]byte{nil}, ParameterFormatCodes: []int16{7}}, syncM),
				want: lines("ErrorResponse ERROR 22023 unsupported format code: 7", ready)},
			{send: msgs(&pgproto3.Bind{PreparedStatement: "e", Parameters: [][]byte{[]byte("ok")}, ParameterFormatCodes: []int16{1}, ResultFormatCodes: []int16{1}}, execMsg("", 0), syncM),
				want: lines(bindOK, "DataRow ok", "CommandComplete SELECT 1", ready)},
		}},
		{name: "UnnamedReplacement", steps: []step{
			{send: msgs(parseMsg("", "select 1"), parseMsg("", "select 2"), bindMsg("", ""), execMsg("", 0), syncM),
				want: concat(lines(parseOK, parseOK, bindOK), rows(1, 2), lines("CommandComplete SELECT 2", ready))},
			// A failed Parse still drops the unnamed statement.
			{send: msgs(parseMsg("", "bogus"), syncM), want: lines(`ErrorResponse ERROR 42601 syntax error at or near "bogus"`, ready)},
			{send: msgs(bindMsg("", ""), syncM), want: lines("ErrorResponse ERROR 26000 unnamed prepared statement does not exist", ready)},
			// A simple query drops it too.
			{send: msgs(parseMsg("", "select 1"), syncM), want: lines(parseOK, ready)},
			{send: msgs(query("echo x")), want: lines("RowDescription echo:25:0", "DataRow x", "CommandComplete SELECT 1", ready)},
			{send: msgs(bindMsg("", ""), syncM), want: lines("ErrorResponse ERROR 26000 unnamed prepared statement does not exist", ready)},
		}},
		{name: "EmptyStatement", steps: []step{{
			send: msgs(parseMsg("", ""), bindMsg("", ""), describeMsg('P', ""), execMsg("", 0), syncM),
			want: lines(parseOK, bindOK, "NoData", "EmptyQueryResponse", ready),
		}}},
		{name: "Close", steps: []step{{
			send: msgs(parseMsg("s", "select 1"), bindMsg("p", "s"), closeMsg('P', "p"), closeMsg('S', "s"), closeMsg('S', "never"),
				execMsg("p", 0), syncM),
			want: lines(parseOK, bindOK, "CloseComplete", "CloseComplete", "CloseComplete", `ErrorResponse ERROR 34000 portal "p" does not exist`, ready),
		}}},
		{name: "PortalOutlivesStatement", steps: []step{{
			send: msgs(parseMsg("s", "select 2"), bindMsg("p", "s"), closeMsg('S', "s"), execMsg("p", 0), syncM),
			want: concat(lines(parseOK, bindOK, "CloseComplete"), rows(1, 2), lines("CommandComplete SELECT 2", ready)),
		}}},
		{name: "Flush", steps: []step{
			{send: msgs(parseMsg("", "select 1"), flushM), want: lines(parseOK)},
			{send: msgs(syncM), want: lines(ready)},
		}},
		{name: "ErrorIsFlushed", steps: []step{
			// The error reaches a client waiting after Flush (which is
			// itself skipped, as everything until Sync).
			{send: msgs(parseMsg("", "select 1"), bindMsg("", "nope"), flushM), want: lines(parseOK, `ErrorResponse ERROR 26000 prepared statement "nope" does not exist`)},
			{send: msgs(syncM), want: lines(ready)},
		}},
		{name: "StreamRowLimitThenClose", ended: 1, steps: []step{
			{send: msgs(parseMsg("", "stream"), bindMsg("p", ""), execMsg("p", 5), flushM), want: concat(lines(parseOK, bindOK), rows(1, 5), lines("PortalSuspended"))},
			{send: msgs(closeMsg('P', "p"), syncM), want: lines("CloseComplete", ready)},
		}},
		{name: "SimpleQueries", steps: []step{
			{send: msgs(query("select 2; error 42P01; select 3")),
				want: concat(lines("RowDescription n:20:0"), rows(1, 2), lines("CommandComplete SELECT 2", "ErrorResponse ERROR 42P01 fake error 42P01", ready))},
			{send: msgs(query("")), want: lines("EmptyQueryResponse", ready)},
			{send: msgs(query("notice")), want: lines("RowDescription n:20:0", "NoticeResponse NOTICE 01000", "DataRow 1", "CommandComplete SELECT 1", ready)},
			{send: msgs(query("set a = b")), want: lines("ParameterStatus a=b", "CommandComplete SET", ready)},
			{send: msgs(query("copy out")),
				want: lines("CopyOutResponse 0 [0]", `CopyData "line1\n"`, `CopyData "line2\n"`, `CopyData "line3\n"`, "CopyDone", "CommandComplete COPY 3", ready)},
			{send: msgs(query("begin; error 42601; select 1")), want: lines("CommandComplete BEGIN", "ErrorResponse ERROR 42601 fake error 42601", "ReadyForQuery E")},
			{send: msgs(query("rollback")), want: lines("CommandComplete ROLLBACK", ready)},
		}},
		{name: "CopyIn", steps: []step{
			{send: msgs(query("copy in")), want: lines("CopyInResponse 0 [0]")},
			{send: msgs(&pgproto3.CopyData{Data: []byte("a\nb")}, flushM, &pgproto3.CopyData{Data: []byte("c\n")}, &pgproto3.CopyDone{}),
				want: lines("CommandComplete COPY 2", ready)},
		}},
		{name: "CopyInExtended", steps: []step{
			{send: msgs(parseMsg("", "copy in"), bindMsg("", ""), execMsg("", 0), syncM), want: lines(parseOK, bindOK, "CopyInResponse 0 [0]")},
			{send: msgs(&pgproto3.CopyData{Data: []byte("x\ny\nz\n")}, &pgproto3.CopyDone{}, syncM),
				want: lines("CommandComplete COPY 3", ready)},
		}},
		{name: "CopyFail", steps: []step{
			{send: msgs(query("copy in")), want: lines("CopyInResponse 0 [0]")},
			{send: msgs(&pgproto3.CopyData{Data: []byte("a\n")}, &pgproto3.CopyFail{Message: "boom"}),
				want: lines("ErrorResponse ERROR 57014 COPY from stdin failed: boom", ready)},
			// Stray copy messages are dropped.
			{send: msgs(&pgproto3.CopyData{Data: []byte("stray")}, &pgproto3.CopyDone{}, query("select 1")),
				want: lines("RowDescription n:20:0", "DataRow 1", "CommandComplete SELECT 1", ready)},
		}},
		{name: "CopyInterruptedByQuery", steps: []step{
			{send: msgs(query("copy in")), want: lines("CopyInResponse 0 [0]")},
			{send: msgs(query("select 1")), want: lines("ErrorResponse ERROR 08P01 unexpected message type 0x51 during COPY from stdin", ready)},
		}},
		{name: "FunctionCall", steps: []step{
			{send: msgs(&pgproto3.FunctionCall{Function: 1}), want: lines("ErrorResponse ERROR 0A000 the function call protocol is not supported", ready)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newFakeBackend()
			ts := startServer(t, b, Config{})
			c := ts.dialRaw(t)
			for _, s := range tc.steps {
				c.send(s.send...)
				c.expect(s.want...)
			}
			c.send(&pgproto3.Terminate{})
			waitFor(t, "the session to close", func() bool { _, closed, _ := b.counts(); return closed == 1 })
			if _, _, ended := b.counts(); ended != tc.ended {
				t.Errorf("%d long-running results ended, want %d", ended, tc.ended)
			}
		})
	}
}

// TestCancelCopyIn cancels a COPY FROM STDIN that waits for client data.
func TestCancelCopyIn(t *testing.T) {
	ts := startServer(t, newFakeBackend(), Config{})
	c := ts.dialRaw(t)
	c.send(query("copy in"))
	c.expect("CopyInResponse 0 [0]")
	c.send(&pgproto3.CopyData{Data: []byte("partial")})
	sendCancel(t, ts.addr, c.pid, c.secret)
	c.expect("ErrorResponse ERROR 57014 canceling statement due to user request", ready)
	c.send(&pgproto3.CopyDone{}, query("select 1"))
	c.expect("RowDescription n:20:0", "DataRow 1", "CommandComplete SELECT 1", ready)
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
