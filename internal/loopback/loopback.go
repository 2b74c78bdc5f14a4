// Package loopback finds free ports on 127.0.0.1 for the servers that
// tests and benchmarks start: the one implementation behind bench's child
// servers, localpg and the tests' testbin.FreeAddr.
package loopback

import (
	"fmt"
	"net"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// Another process may take it before the caller listens on it: callers
// that start a server on it retry with another port when it is taken.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
