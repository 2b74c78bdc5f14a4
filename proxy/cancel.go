package proxy

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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
type cancelUpstream struct {
	conn *pgconn.PgConn
	stop chan struct{}
	done chan struct{}
}

// HandleCancel implements ctxwatch.Handler.
func (h *cancelUpstream) HandleCancel(context.Context) {
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
	close(h.stop)
	<-h.done
	h.conn.Conn().SetDeadline(time.Time{})
}
