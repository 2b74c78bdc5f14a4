// Package pgwire is shardtail's Postgres wire protocol server (protocol 3.0),
// built on jackc/pgproto3/v2's Backend. It knows the protocol and nothing of
// SQL: it talks to the rest of the server through the interfaces defined here
// (Backend, Session, Statement, Portal, Result), which the adapter implements.
// example_test.go has a complete, tiny implementation.
//
// # Connection lifecycle
//
// Server.Serve accepts connections and runs each on its own goroutine:
//
//  1. Startup, under Config.AuthTimeout. SSLRequest is answered 'S' and TLS is
//     negotiated when Config.TLSConfig is set, else 'N'; GSSENCRequest is
//     answered 'N'. A CancelRequest cancels the running statement of the
//     session with that process id and secret key, and the connection closes
//     without a reply. A StartupMessage for 3.x with x > 0, or with "_pq_."
//     options, gets NegotiateProtocolVersion (3.0, no options).
//  2. Authentication. Backend.Role says whether the user needs a password
//     and holds its SCRAM-SHA-256 verifier (NewSCRAMVerifier). Config.Auth
//     picks SCRAM-SHA-256 (default) or a cleartext password for such roles,
//     or trust for everyone. An unknown role fails exactly like a wrong
//     password (28P01), after a full exchange. Config.AuthThrottle delays
//     the password attempts of an address that failed too often.
//  3. AuthenticationOk, Backend.OpenSession, then ParameterStatus (pgwire's
//     defaults, server_version "9.5.0" as Materialize reports, overridden by
//     Session.Parameters), BackendKeyData and ReadyForQuery.
//  4. The message loop: simple and extended query protocol, COPY.
//  5. The end, on Terminate, a disconnect, a protocol violation (FATAL 08P01)
//     or Server.Close (FATAL 57P01): pgwire closes every Result, Portal and
//     Statement of the connection, then the Session.
//
// # The interfaces and the caller's duties
//
// A Backend is shared by all connections and must be safe for concurrent
// use. Everything below it belongs to one connection, and pgwire calls it
// from that connection's goroutine only, never concurrently (from one
// goroutine at a time: a parked connection is continued by another, see
// "Parked connections").
//
// Session.Query runs a simple-protocol string: it yields one Result per
// statement, lazily. Session.Prepare parses one statement for the extended
// protocol; Statement.Bind makes a Portal; Portal.Execute makes its Result.
// pgwire keeps the named and unnamed statements and portals and applies
// Postgres's rules: Parse or Bind into the unnamed statement or portal
// replaces it; a simple Query drops both; reusing a name is an error; after
// an error, messages are skipped until Sync; Session.Sync then learns
// whether the batch failed, so it can roll back an implicit transaction or
// fail a transaction block; portals are closed when the session reports
// TxIdle after a Sync or Query; executing a completed portal repeats its
// CommandComplete. Declared cursors (DECLARE/FETCH) are SQL and live in the
// session; pgwire's portals are the protocol's.
//
// A Result says what it is (Describe) and yields already-encoded wire
// messages (Next): DataRow, CopyData, NoticeResponse, ParameterStatus. It
// never sees pgwire's framing: pgwire sends RowDescription (simple protocol),
// CopyOutResponse/CopyInResponse, PortalSuspended, CopyDone,
// CommandComplete and ErrorResponse around what it pulls. A producer can
// therefore encode a batch once and hand the very same byte slices to every
// connection that streams it; AppendDataRow, AppendCopyData, AppendNotice and
// AppendParameterStatus build such messages, and StaticResult wraps a result
// known up front.
//
// # The canonical loop
//
// Results are pulled, never pushed: the connection goroutine drives a
// long-running result (a SUBSCRIBE, a blocking FETCH) with the statement's
// context, and a row limit stops the pulling. For every Result, pgwire does:
//
//	desc := res.Describe()
//	send(header(desc))                       // RowDescription in the simple protocol, Copy*Response
//	if desc.Kind == ResultCopyIn {
//		res.(CopyInResult).CopyIn(ctx, copyData) // the client's CopyData as an io.Reader
//	}
//	for {
//		flush()                              // after each batch, before blocking for the next
//		if rr, ok := res.(ReadyResult); ok && !rr.Ready(wake) {
//			park()                           // no goroutine until wake or ctx's end; then on
//		}
//		batch, err := res.Next(ctx)
//		if err == io.EOF {
//			break
//		}
//		if err != nil {
//			send(errorResponse(err))          // 57014 if ctx was canceled by CancelRequest
//			return
//		}
//		for _, msg := range batch {
//			send(msg)                          // copied as is; a row limit stops here
//		}                                      // with PortalSuspended, the rest kept for the next Execute
//	}
//	send(commandComplete(res.Tag()))
//	res.Close()
//
// and a streaming Result of the adapter (a bare SUBSCRIBE) pulls from its
// subscription on this same goroutine and encodes what it gets:
//
//	func (r *subscribeResult) Next(ctx context.Context) ([][]byte, error) {
//		// Blocks until rows are ready; io.EOF at UP TO; ctx.Err() on a
//		// CancelRequest, a disconnect or shutdown.
//		rows, err := r.sub.Next(ctx, 0)
//		if err != nil {
//			return nil, r.p.mapErr(err)
//		}
//		// DataRows, their bytes encoded once per shape and shared by
//		// every subscriber of it.
//		return formatter.Messages(r.enc, rows, &r.buf), nil
//	}
//
// # Parked connections
//
// A Result that may wait long for its next batch (a SUBSCRIBE waiting for
// changes) can be a ReadyResult: between batches pgwire asks Ready(wake),
// and when the result has nothing, the connection parks: its goroutine
// ends, and no goroutine, stack or channel waits for it. wake (the
// result's producer calls it when a batch is ready) or the end of the
// statement's context (a CancelRequest, a hangup, Server.Close) resumes
// it: at most GOMAXPROCS resumer goroutines take the woken connections in
// turn, so that a tick waking 10,000 idle subscribers at once is served by
// a handful of goroutines (and the rest of the process does not wait
// behind more). A resumer whose write would wait for its client (one
// that does not read) gives its place to another before it waits, and one
// that has run its connection for 50 ms (a statement after the subscribe)
// is replaced by another: a connection that blocks holds up the others
// that long at most.
// An idle subscriber therefore costs its session's and its connection's
// state, not a goroutine.
//
// # Threading and contexts
//
// Each connection has one goroutine, which runs the protocol and every call
// into its session (but none while parked), and reads the socket itself (into pooled buffers of 512
// bytes to 128 KiB, sized to what the client sends, none while it sends
// nothing). So that a client that disconnects while its goroutine is busy
// streaming, or blocked in Result.Next, is noticed at once, the server
// watches every authenticated connection's socket for the peer's hangup in
// one epoll set, on one goroutine of its own (Linux): the connection context
// is canceled (cause ErrClientGone) and with it the running statement. Bytes
// the client sends meanwhile wait in the kernel until the statement is done.
// Where there is no such watcher, each connection has a second goroutine
// that only reads its socket into a small pipe (the same buffers) and
// cancels it on a read error. Every session call gets a statement
// context derived from the connection's: a CancelRequest cancels it with
// cause ErrQueryCanceled, reported as 57014 whatever error the session
// returns; Server.Close cancels connections with cause ErrServerClosed. A
// statement cut off by a canceled connection gets no error and no
// ReadyForQuery, so no client mistakes it for complete; the connection ends.
//
// As in pgproto3, a received message is valid only until the next receive:
// the parameter values given to Statement.Bind and the bytes read through
// CopyInResult's reader must be copied to be kept.
//
// # Flush policy
//
// Messages are appended to a per-connection send buffer (pgproto3's "Send
// buffers, Flush writes once") and written: at ReadyForQuery, on Flush, after
// every batch a Result yields (which is also before pulling the next one, so
// nothing sits in the buffer while the goroutine blocks), after
// CopyInResponse, and whenever the buffer reaches 64 KiB. A message of 64
// KiB or more is written directly, without a copy. Responses to Parse, Bind,
// Describe and Close wait for the next of these, as in Postgres.
//
// A write blocks (its goroutine parked in the netpoller) while the socket is
// full. How much the kernel takes first is its send buffer, autotuned up to
// net.ipv4.tcp_wmem's maximum, unless Config.NotSentLowWater bounds the
// bytes not yet sent (TCP_NOTSENT_LOWAT): then the rest of a large result
// waits in the process, shared, at the cost of more and smaller writes.
//
// With Config.LargeWriters, large writes (64 KiB or more) take turns: at
// most that many connections write a large result at once, the others
// wait in order, and a connection keeps its turn until its result is
// done, suspended or waits for data, for Config.LargeWriteTurn at most.
// See pacing.go.
//
// # Errors
//
// Any error whose chain has a SQLState() string method is sent with that
// code and that error's message, plus Detail(), Hint() and Position() where
// it has them; Error is such a type. Other errors become XX000 with their
// text, and are logged. A client that sends garbage (an unknown message type,
// a malformed or oversized message, a bad startup packet) gets FATAL 08P01
// and its connection is closed; a panic in a connection, including in session
// code, is recovered and logged, and ends only that connection (FATAL XX000).
//
// # Limits
//
// Startup packets are limited to MaxStartupMessageSize; Query, Parse, Bind,
// CopyData and FunctionCall bodies to Config.MaxMessageSize; password and
// SASL messages to 64 KiB; every other message to 10000 bytes, as in
// Postgres. pgproto3/v2 has no limit of its own, so the limit is checked on
// the header, before the body is read.
//
// Config.MaxConnections bounds the connections held at once, those in startup
// included. Past it a connection is accepted anyway (so that its client does
// not hang in the accept queue), read up to its startup message within a
// second and refused with FATAL 53300 "sorry, too many clients already", as
// Postgres does; CancelRequests are still served. At most maxRefusing
// refusals run at once; beyond that a connection is closed without a word.
// The descriptors spent on clients thus stay bounded, and storage keeps its
// own. Accept errors such as EMFILE are retried with a capped backoff.
//
// # Memory
//
// A message costs what it carries, not what its header claims: pgproto3 asks
// for a whole body at once, and pgwire's reader under it (msgReader) gives
// headers and small bodies from a 1 KiB buffer and reads a larger body into
// a buffer that starts at 8 KiB and doubles as it fills, never past the body
// length, so it is at most twice what has arrived. A client that sends a
// header claiming 64 MiB and stalls holds 8 KiB. A large body is let go when
// the next message starts. An idle connection — waiting for its client, or
// inside a statement that waits for rows, as thousands of idle subscribers
// do — holds no message buffer at all: the header buffer is dropped once
// every byte in it was consumed and a new one is taken only when the client
// sends; the socket's reader waits for it to become readable before it
// takes a read buffer; and the send buffer goes back to a shared pool at
// every flush (buffers up to 256 KiB are pooled, each with the pool entry
// that carries it back, so that a flush allocates nothing), so a streaming
// connection gets it back at its next message. A connection whose result
// is parked also lets go of its message decoder (pgproto3's Backend, 448
// bytes), made again for the next message after the statement; and its
// statement contexts are not children of the connection's, which the
// connection cancels itself, so that the connection's context holds no
// children map and no Done channel.
//
// Server.MemoryBytes counts these message buffers over all connections, for
// a process-wide memory budget; Config.Registerer exports the count as the
// gauge shardtail_memory_bytes{holder="pgwire"}.
package pgwire
