//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package pgwire

import (
	"net"
	"syscall"
)

// rawConnOf is nil on this platform: a resumed connection's writes may
// wait, and a resumer that waits counts as stalled after a while.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

// nowWriter is never used without a raw connection.
type nowWriter struct{}

func (*nowWriter) write(syscall.RawConn, []byte) (int, error) { return 0, nil }
