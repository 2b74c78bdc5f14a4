//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pgwire

import (
	"errors"
	"net"
	"syscall"
)

// waitReadable blocks until nc has something for Read: bytes, end of file
// or an error (a deadline, the socket closed). The connection's input waits so
// before it takes a read buffer, so that a connection whose client sends
// nothing (an idle subscriber, for hours) holds none. It peeks without
// consuming; when it cannot wait (not a socket) it returns at once and the
// caller's Read blocks instead. Errors are left for that Read to report.
func waitReadable(nc net.Conn) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	var b [1]byte
	_ = rc.Read(func(fd uintptr) bool {
		for {
			_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case errors.Is(err, syscall.EINTR):
				continue
			case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK):
				return false // nothing yet: wait for readability, then look again
			}
			return true // bytes, end of file or an error: Read will say which
		}
	})
}
