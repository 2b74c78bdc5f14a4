//go:build linux

package sockopt

import (
	"crypto/tls"
	"net"
	"testing"
)

// TestSetNotSentLowWater: the mark is set on a TCP connection and on the
// TCP connection under a TLS one; n <= 0 leaves the kernel's; a connection
// that is not TCP is left alone without an error.
func TestSetNotSentLowWater(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// accept returns the accepted side of a new connection, as a server
	// holds it (a dialed socket reads its unset mark as 0, an accepted one
	// as the kernel's).
	accept := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}

	kernelConn := accept()
	kernel, err := KernelNotSentLowWater()
	if err != nil {
		t.Fatal(err)
	}
	if err := SetNotSentLowWater(kernelConn, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := NotSentLowWater(kernelConn); err != nil || got != kernel {
		t.Errorf("after n=0: TCP_NOTSENT_LOWAT = %d (%v), want the kernel's %d", got, err, kernel)
	}

	for _, tc := range []struct {
		name string
		conn func() net.Conn
	}{
		{"TCP", accept},
		{"TLS", func() net.Conn { return tls.Server(accept(), &tls.Config{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.conn()
			if err := SetNotSentLowWater(c, 16<<10); err != nil {
				t.Fatal(err)
			}
			got, err := NotSentLowWater(c)
			if err != nil {
				t.Fatal(err)
			}
			if got != 16<<10 {
				t.Errorf("TCP_NOTSENT_LOWAT = %d, want %d", got, 16<<10)
			}
		})
	}

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if err := SetNotSentLowWater(a, 16<<10); err != nil {
		t.Errorf("a pipe: %v, want it left alone", err)
	}
	if _, err := NotSentLowWater(a); err == nil {
		t.Error("NotSentLowWater of a pipe: no error")
	}
}
