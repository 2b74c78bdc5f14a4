package feed_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// proxy forwards TCP connections to a server and breaks them on the
// server's side: after a random number of bytes from the server (limit),
// or all at once (Drop).
type proxy struct {
	ln    net.Listener
	to    string
	limit func() int64 // nil: no limit
	mu    sync.Mutex
	conns map[net.Conn]bool
	// heads are the first bytes the server sent on each connection
	// (headSize at most): the responses' heads.
	heads []*[]byte // mu
	wg    sync.WaitGroup
}

// headSize is how much of each connection's response the proxy records.
const headSize = 2048

// headWriter forwards to w and records the first headSize bytes in head.
type headWriter struct {
	p    *proxy
	w    io.Writer
	head *[]byte
}

func (h headWriter) Write(b []byte) (int, error) {
	h.p.mu.Lock()
	if n := headSize - len(*h.head); n > 0 {
		*h.head = append(*h.head, b[:min(n, len(b))]...)
	}
	h.p.mu.Unlock()
	return h.w.Write(b)
}

// Heads returns the start of every response the proxy forwarded so far.
func (p *proxy) Heads() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, h := range p.heads {
		out = append(out, string(*h))
	}
	return out
}

// newProxy starts a proxy to addr, stopped when the test ends.
func newProxy(t *testing.T, addr string, limit func() int64) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, to: addr, limit: limit, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.Drop(); p.wg.Wait() })
	p.wg.Add(1)
	go p.accept()
	return p
}

// Addr is the proxy's address.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		n := int64(1 << 62)
		if p.limit != nil {
			n = p.limit()
		}
		head := new([]byte)
		p.mu.Lock()
		p.conns[c], p.conns[s] = true, true
		p.heads = append(p.heads, head)
		p.mu.Unlock()
		closeBoth := func() {
			c.Close()
			s.Close()
			p.mu.Lock()
			delete(p.conns, c)
			delete(p.conns, s)
			p.mu.Unlock()
		}
		p.wg.Add(2)
		go func() { defer p.wg.Done(); io.Copy(s, c); closeBoth() }()
		go func() { defer p.wg.Done(); io.CopyN(headWriter{p, c, head}, s, n); closeBoth() }()
	}
}

// Drop breaks every open connection.
func (p *proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}
