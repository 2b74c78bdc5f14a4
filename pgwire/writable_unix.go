//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pgwire

import (
	"net"
	"syscall"

	"github.com/shardtail/shardtail/internal/sockopt"
)

// rawConnOf returns nc's raw socket, for writes that do not wait (see
// nowWriter); nil when nc is not a socket (a TLS connection, a test's
// pipe): its writes then always may wait.
func rawConnOf(nc net.Conn) syscall.RawConn { return sockopt.RawConn(nc) }

// nowWriter writes to a socket what it takes without waiting. A resumer
// goroutine has one, so that a resumed connection finds out whether its
// write would wait for its client before it waits (conn.write). Its write
// func is made once: a write allocates nothing.
type nowWriter struct {
	fn  func(fd uintptr) bool
	b   []byte
	n   int
	err error
}

// write writes what of b rc's socket takes now: n bytes (less than
// len(b) when the rest would wait), or err.
func (w *nowWriter) write(rc syscall.RawConn, b []byte) (n int, err error) {
	if w.fn == nil {
		w.fn = w.writeFD
	}
	w.b, w.n, w.err = b, 0, nil
	if err := rc.Write(w.fn); err != nil {
		w.err = err // the connection is closed
	}
	n, err = w.n, w.err
	w.b, w.err = nil, nil
	return n, err
}

// writeFD is rc.Write's func: it never asks to wait (true).
func (w *nowWriter) writeFD(fd uintptr) bool {
	for w.n < len(w.b) {
		n, err := syscall.Write(int(fd), w.b[w.n:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
			return true
		case err != nil:
			w.err = err
			return true
		case n <= 0:
			return true // nothing taken: the caller's write waits
		}
		w.n += n
	}
	return true
}
