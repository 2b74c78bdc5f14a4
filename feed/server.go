package feed

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"
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
// closed) and closes the connections.
func (s *Server) Close() error {
	err := s.srv.Close()
	s.h.Close()
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
