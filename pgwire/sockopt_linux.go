//go:build linux

package pgwire

import (
	"net"

	"golang.org/x/sys/unix"
)

// setNotSentLowWater sets TCP_NOTSENT_LOWAT on a TCP connection's socket
// (Config.NotSentLowWater): past n bytes that the kernel has not yet sent,
// the socket reports itself unwritable and a write waits, so that the rest
// of a large result stays in the process, where its encoding is shared,
// instead of being copied into the socket's send queue. Other connections
// (a Unix socket, a test's pipe) are left alone.
func setNotSentLowWater(nc net.Conn, n int) error {
	tc, ok := nc.(*net.TCPConn)
	if !ok || n <= 0 {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, n)
	}); err != nil {
		return err
	}
	return serr
}
