package sockopt

import (
	"net"
	"syscall"
)

// RawConn returns c's raw socket, or nil when c has none (a TLS
// connection, a pipe) or it cannot be had: the callers then fall back to
// what they do without one.
func RawConn(c net.Conn) syscall.RawConn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
