//go:build linux

package sockopt

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// SetNotSentLowWater sets TCP_NOTSENT_LOWAT on a TCP connection's socket:
// past n bytes that the kernel has not yet sent, the socket reports itself
// unwritable and a write waits, so that the rest of a large result stays in
// the process, where its encoding is shared, instead of being copied into
// the socket's send queue. n <= 0 leaves the kernel's setting; other
// connections (a Unix socket, a test's pipe) are left alone. A TLS
// connection is set on the connection under it.
func SetNotSentLowWater(nc net.Conn, n int) error {
	tc, ok := tcpConn(nc)
	if !ok || n <= 0 {
		return nil
	}
	return control(tc, func(fd int) error {
		return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, n)
	})
}

// SetRecvBuffer sets a connected TCP socket's SO_RCVBUF to n (at most
// net.core.rmem_max; the kernel doubles it for its overhead) and its
// TCP_WINDOW_CLAMP to n, which a buffer set before connecting had clamped
// the window to. The window still cannot pass what the window scale agreed
// at the handshake allows: 64 KiB when the buffer was small then. A TLS
// connection is set on the connection under it; others are left alone.
func SetRecvBuffer(nc net.Conn, n int) error {
	tc, ok := tcpConn(nc)
	if !ok {
		return nil
	}
	return control(tc, func(fd int) error {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, n); err != nil {
			return err
		}
		return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_WINDOW_CLAMP, n)
	})
}

// NotSentLowWater returns a TCP connection's TCP_NOTSENT_LOWAT, for tests
// and diagnostics. An accepted socket whose mark was not set reports the
// kernel's (KernelNotSentLowWater); a dialed one reports 0.
func NotSentLowWater(nc net.Conn) (int, error) {
	tc, ok := tcpConn(nc)
	if !ok {
		return 0, errNotTCP
	}
	var v int
	err := control(tc, func(fd int) (err error) {
		v, err = unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
		return err
	})
	return v, err
}

// tcpConn is the TCP connection under nc: nc itself, or the connection a
// TLS one runs on.
func tcpConn(nc net.Conn) (*net.TCPConn, bool) {
	if t, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = t.NetConn()
	}
	tc, ok := nc.(*net.TCPConn)
	return tc, ok
}

// KernelNotSentLowWater is what NotSentLowWater reports of an accepted
// socket whose mark was not set: net.ipv4.tcp_notsent_lowat, whose unsigned default
// (no mark) reads as -1.
func KernelNotSentLowWater() (int, error) {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/tcp_notsent_lowat")
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("sockopt: net.ipv4.tcp_notsent_lowat: %w", err)
	}
	return int(int32(uint32(v))), nil
}

// control runs f on tc's socket and returns the first error, the socket's
// or f's.
func control(tc *net.TCPConn, f func(fd int) error) error {
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
