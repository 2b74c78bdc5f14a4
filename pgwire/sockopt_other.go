//go:build !linux

package pgwire

import "net"

// setNotSentLowWater is Linux's TCP_NOTSENT_LOWAT; elsewhere the kernel's
// send buffer alone bounds what a socket holds.
func setNotSentLowWater(net.Conn, int) error { return nil }
