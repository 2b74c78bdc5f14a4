//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proxy

import (
	"errors"
	"net"
	"syscall"

	"github.com/shardtail/shardtail/internal/sockopt"
)

// peekLost reports whether an idle upstream connection is known to be
// gone: its socket has reached end of file or failed, or holds an
// ErrorResponse ('E') that the server sent while the connection was idle
// (FATAL, at shutdown). It peeks without blocking and without consuming
// anything, so a live connection is left as it was; when it cannot tell,
// it reports false and the next statement finds out.
func peekLost(c net.Conn) bool {
	rc := sockopt.RawConn(c)
	if rc == nil {
		return false
	}
	lost := false
	var b [1]byte
	err := rc.Read(func(fd uintptr) bool {
		for {
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case errors.Is(err, syscall.EINTR):
				continue
			case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK):
				// Nothing to read: the idle connection is as it should be.
			case err != nil:
				lost = true
			case n == 0:
				lost = true // end of file
			default:
				lost = b[0] == 'E'
			}
			return true // never wait for readability
		}
	})
	if err != nil && errors.Is(err, net.ErrClosed) {
		lost = true
	}
	return lost
}
