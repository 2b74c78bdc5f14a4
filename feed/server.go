package feed

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/shardtail/shardtail/internal/sockopt"
)

// Server serves a Handler on one listener: HTTP, or HTTPS with HTTP/2
// when the Handler's Config has a TLSConfig.
type Server struct {
	h    *Handler
	srv  *http.Server
	addr net.Addr
	done chan struct{}
}

// Serve starts serving h on ln and returns at once; Close stops it.
func Serve(h *Handler, ln net.Listener) *Server {
	s := &Server{h: h, addr: ln.Addr(), done: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}}
	if n := h.cfg.NotSentLowWater; n > 0 {
		s.srv.ConnState = func(nc net.Conn, st http.ConnState) {
			if st == http.StateNew {
				if err := sockopt.SetNotSentLowWater(nc, n); err != nil {
					h.cfg.Log.Debug("feed: TCP_NOTSENT_LOWAT not set", "err", err)
				}
			}
		}
	}
	if h.cfg.TLSConfig != nil {
		cfg := h.cfg.TLSConfig.Clone()
		// HTTP/2 first, so that a page holds many streams on one
		// connection (HTTP/1.1 browsers allow six per host).
		cfg.NextProtos = []string{"h2", "http/1.1"}
		s.srv.TLSConfig = cfg
		ln = tls.NewListener(ln, cfg)
	}
	go func() {
		defer close(s.done)
		// ErrServerClosed after Close; any other error also ends serving,
		// and the streams with it.
		_ = s.srv.Serve(ln)
	}()
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Close stops listening, ends every stream (the handler's subscriptions
// closed) and closes the connections. A stream ends its body cleanly
// before its connection closes (a gzip member with its trailer, an
// HTTP/2 stream with its end), for a client that reads within closeGrace;
// after twice that, the connections still open are closed.
func (s *Server) Close() error {
	// Shutdown stops listening and waits for the connections to go idle
	// (an HTTP/2 one gets GOAWAY, and ends once its streams did) while
	// the handler's Close ends the streams, which write their ends on
	// connections still open (Close would cut them first).
	ctx, cancel := context.WithTimeout(context.Background(), 2*closeGrace)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- s.srv.Shutdown(ctx) }()
	// A handler whose write through its ResponseWriter is blocked (a
	// client that does not read) returns only once its connection is
	// closed: past the grace, whatever the handler's Close waits for.
	cut := time.AfterFunc(2*closeGrace, func() { _ = s.srv.Close() })
	defer cut.Stop()
	s.h.Close()
	err := <-shut
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, http.ErrServerClosed) {
		// Past the grace: the rest are cut. (Its error would be the
		// listener's, closed twice.)
		_ = s.srv.Close()
		err = nil
	}
	<-s.done
	return err
}
