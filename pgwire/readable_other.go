//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package pgwire

import "net"

// waitReadable cannot wait without reading on this platform: the input
// reader blocks in Read with its buffer instead.
func waitReadable(net.Conn) {}
