//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proxy

import (
	"net"
	"testing"
	"time"
)

// pair returns the two ends of a loopback TCP connection.
func pair(t *testing.T) (near, far net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	near, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	far = <-accepted
	if far == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { near.Close(); far.Close() })
	return near, far
}

// waitLost polls peekLost until it reports want: what the far end did
// reaches the near socket asynchronously.
func waitLost(t *testing.T, c net.Conn, want bool) {
	t.Helper()
	for range 500 {
		if peekLost(c) == want {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("peekLost never reported %v", want)
}

// TestPeekLost: an idle connection is not lost; one whose server sent an
// ErrorResponse while idle, or closed it, is; a peek consumes nothing.
func TestPeekLost(t *testing.T) {
	t.Run("Idle", func(t *testing.T) {
		near, _ := pair(t)
		if peekLost(near) {
			t.Fatal("an idle connection reported lost")
		}
	})
	t.Run("Notice", func(t *testing.T) {
		near, far := pair(t)
		if _, err := far.Write([]byte{'N'}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		if peekLost(near) {
			t.Fatal("a pending NoticeResponse reported lost")
		}
		b := make([]byte, 1)
		if _, err := near.Read(b); err != nil || b[0] != 'N' {
			t.Fatalf("after the peek: read %q, %v; want the N still there", b, err)
		}
	})
	t.Run("ErrorResponse", func(t *testing.T) {
		near, far := pair(t)
		if _, err := far.Write([]byte{'E'}); err != nil {
			t.Fatal(err)
		}
		waitLost(t, near, true)
	})
	t.Run("Closed", func(t *testing.T) {
		near, far := pair(t)
		far.Close()
		waitLost(t, near, true)
	})
}
