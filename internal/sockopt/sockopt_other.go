//go:build !linux

package sockopt

import (
	"errors"
	"net"
)

// SetNotSentLowWater is Linux's TCP_NOTSENT_LOWAT; elsewhere the kernel's
// send buffer alone bounds what a socket holds.
func SetNotSentLowWater(net.Conn, int) error { return nil }

// SetRecvBuffer sets SO_RCVBUF; the window clamp is Linux's.
func SetRecvBuffer(nc net.Conn, n int) error {
	if t, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = t.NetConn()
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		return tc.SetReadBuffer(n)
	}
	return nil
}

// NotSentLowWater is Linux's TCP_NOTSENT_LOWAT; elsewhere there is none.
func NotSentLowWater(net.Conn) (int, error) { return 0, errors.ErrUnsupported }
