// Package proxy is a proxy process's link to its upstream server: the
// connection a client session opens upstream, the results it streams back
// to the client, and the forwarding of the client's cancels.
//
// A proxy process (`shardtail serve --upstream HOST:PORT`, called a tail
// process in the user documentation) serves fast-path SUBSCRIBEs itself
// from the shared storage and passes every other statement, on the same
// client session, to the upstream server. Which statements go upstream is
// the adapter's routing decision; this package only carries them.
//
// # Types
//
//   - Conn is one session's connection, opened by Dial when the session
//     first needs it, as the client's role with the password the client
//     logged in with (the proxy asks for it in clear text) or else the
//     proxy's configured fallback.
//   - The results of Exec, Query, ExecParams and CopyOut implement
//     pgwire.Result. Each streams from a goroutine of its own, so a
//     SUBSCRIBE reaches the client row by row, with the upstream's
//     NoticeResponses in order among its rows.
//   - Prepare and CopyIn return a pgwire.Statement and a pgwire.Result that
//     reach the upstream later, through a Connect: the session's current
//     connection at the time they run.
//
// # The caller's duties
//
//  1. Use a Conn from the session's goroutine only, one statement at a
//     time: while Busy (a suspended portal still reads the connection) run
//     nothing else on it; ErrBusy is the error to give the client.
//  2. Before reusing an idle Conn, ask Lost: it finds, without a round
//     trip, a connection whose upstream has gone (end of file, or a FATAL
//     sent while idle), which the next statement would otherwise find only
//     after it was sent. A connection lost inside a transaction block must
//     not be replaced before the block ends (ErrLostInBlock): the upstream
//     rolled its part back.
//  3. Close every result, and the Conn when the session ends.
//
// # Errors and cancels
//
// An upstream statement's error reaches the client with its SQLSTATE and
// fields. Losing the upstream (a failed dial, a dropped connection, a
// FATAL at its shutdown) is 08006 naming the upstream: it ends the
// proxy's connection upstream, not the client's to the proxy, and
// fast-path SUBSCRIBEs go on.
//
// A canceled statement context sends a CancelRequest upstream and keeps
// the connection, as a direct client's cancel would. It is sent again
// every half second until the statement ends, because a CancelRequest
// that arrives before its statement has started upstream is lost; after
// ten seconds the connection's deadline ends the statement and the
// connection. A statement context canceled because the session is ending
// (cause pgwire.ErrClientGone or pgwire.ErrServerClosed) closes the
// connection instead, so that the upstream sees its client disconnect, as
// a direct client's disconnect would look, and records the statement as
// aborted, not canceled.
//
// # Example
//
// A session's statement that the adapter routed upstream:
//
//	c, err := proxy.Dial(ctx, proxy.Config{Addr: upstream, User: user, Password: password})
//	if err != nil {
//		return err // 08006, or the upstream's refusal
//	}
//	defer c.Close()
//	res, err := c.Exec(ctx, "SELECT * FROM t")
//	if err != nil {
//		return err
//	}
//	defer res.Close()
//	for {
//		msgs, err := res.Next(ctx) // wire-encoded DataRows, NoticeResponses
//		if errors.Is(err, io.EOF) {
//			break
//		}
//		if err != nil {
//			return err
//		}
//		send(msgs)
//	}
package proxy
