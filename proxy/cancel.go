package proxy

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/pgwire"
)

// Timing of cancelUpstream.
const (
	// cancelRetry is how often a canceled statement that still runs is
	// canceled again.
	cancelRetry = 500 * time.Millisecond
	// cancelSettle is how long a CancelRequest is given to reach the
	// statement before the connection runs another one: the server may
	// deliver it after closing the cancel connection (PostgreSQL signals
	// the backend), and it must not cancel the next statement.
	cancelSettle = 100 * time.Millisecond
	// cancelGiveUp is how long a canceled statement may run on before the
	// connection's deadline ends it, and the connection with it.
	cancelGiveUp = 10 * time.Second
)

// cancelUpstream is the pgconn context watcher of an upstream connection:
// when a proxied statement's context is canceled, it sends a CancelRequest
// upstream, and sends it again every cancelRetry until the statement ends.
// pgconn's CancelRequestContextWatcherHandler sends one only, and a
// CancelRequest that reaches the upstream before the statement has started
// there is lost, as in PostgreSQL (the proxy forwards the client's cancel
// at once, possibly while its statement is still on the wire); the
// client's own retries stop at the proxy, whose statement is already
// canceled. After cancelGiveUp the connection's deadline ends the
// statement and the connection.
//
// A context canceled because the client's session is ending (its client
// disconnected, or this process is shutting down) closes the connection
// instead: the upstream then sees its own client disconnect, as it would
// had the client been connected to it directly, and ends (and logs) the
// statement as aborted rather than canceled. pgconn, finding its socket
// closed, would still send a CancelRequest before giving up on the
// connection, which could reach the upstream before the end of its input
// and make the statement canceled after all; ended makes the dial of that
// cancel connection fail (noCancelAfterEnd).
type cancelUpstream struct {
	conn  *pgconn.PgConn
	ended *atomic.Bool
	stop  chan struct{}
	done  chan struct{}
}

// HandleCancel implements ctxwatch.Handler.
func (h *cancelUpstream) HandleCancel(ctx context.Context) {
	if sessionEnded(ctx) {
		// The read waiting for the statement's rows fails at once, and
		// pgconn takes the connection for closed.
		h.stop, h.done = nil, nil
		h.ended.Store(true)
		h.conn.Conn().Close()
		return
	}
	h.stop, h.done = make(chan struct{}), make(chan struct{})
	deadline := time.Now().Add(cancelGiveUp)
	h.conn.Conn().SetDeadline(deadline)
	go func() {
		defer close(h.done)
		for {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			h.conn.CancelRequest(ctx)
			cancel()
			time.Sleep(cancelSettle)
			select {
			case <-h.stop:
				return
			case <-time.After(cancelRetry - cancelSettle):
			}
			if time.Now().After(deadline) {
				<-h.stop
				return
			}
		}
	}()
}

// HandleUnwatchAfterCancel implements ctxwatch.Handler: the statement has
// ended; no CancelRequest of it is in flight once this returns.
func (h *cancelUpstream) HandleUnwatchAfterCancel() {
	if h.stop == nil {
		return // the connection was closed, not the statement canceled
	}
	close(h.stop)
	<-h.done
	h.conn.Conn().SetDeadline(time.Time{})
}

// sessionEnded reports whether ctx, a statement's context, was canceled
// because the client's whole session is ending (the client disconnected,
// the proxy is shutting down), not by a cancel of the statement.
func sessionEnded(ctx context.Context) bool {
	cause := context.Cause(ctx)
	return errors.Is(cause, pgwire.ErrClientGone) || errors.Is(cause, pgwire.ErrServerClosed)
}

// errSessionEnded refuses the dial of a CancelRequest after the session
// ended (cancelUpstream).
var errSessionEnded = errors.New("proxy: the session ended; its upstream connection is closed, not canceled")

// noCancelAfterEnd wraps an upstream connection's dial function: once
// ended is set, every dial fails. The connection itself is dialed before;
// later dials are pgconn's CancelRequests.
func noCancelAfterEnd(dial pgconn.DialFunc, ended *atomic.Bool) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if ended.Load() {
			return nil, errSessionEnded
		}
		return dial(ctx, network, addr)
	}
}
