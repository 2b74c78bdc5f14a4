package testcert

import (
	"crypto/tls"
	"testing"
)

// TestSelfSigned: a client trusting the pool completes a handshake with a
// server using the config, for 127.0.0.1.
func TestSelfSigned(t *testing.T) {
	cfg, pool := SelfSigned(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			err = c.(*tls.Conn).Handshake()
			c.Close()
		}
		done <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatalf("server handshake: %v", err)
	}
}
