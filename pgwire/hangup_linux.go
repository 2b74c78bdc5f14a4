//go:build linux

package pgwire

import (
	"errors"
	"net"
	"sync"
	"syscall"
)

// hangupWatcher notices clients that disconnect while their connection's
// goroutine is not reading: busy in a statement, or blocked in one waiting
// for rows, as an idle subscriber is for hours. Go's netpoller tells a
// goroutine blocked in Read, so without it each connection would need a
// second goroutine reading its socket; instead one epoll set of the server
// holds every authenticated connection's socket, interested in the peer's
// hangup only (EPOLLRDHUP, and the EPOLLHUP and EPOLLERR epoll always
// reports), once (EPOLLONESHOT). Bytes the client sends do not wake it:
// they wait in the kernel for the connection's goroutine, which reads the
// socket itself. The watcher's goroutine is owned by the Server: close
// stops it and waits for it.
type hangupWatcher struct {
	epfd   int
	wakeR  int // read end of the pipe that stops the loop
	wakeW  int
	mu     sync.Mutex
	next   uint64            // mu: the token of the next registration
	byTok  map[uint64]func() // mu: what to call on each registered socket's hangup
	closed bool              // mu
	done   chan struct{}     // closed when the loop has returned
}

// wakeToken is the epoll data of the wake pipe; socket tokens start above.
const wakeToken = 0

// newHangupWatcher starts a watcher, or returns nil when epoll is not
// available (the connections then fall back to an input pipe each).
func newHangupWatcher() *hangupWatcher {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		syscall.Close(epfd)
		return nil
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN}
	setToken(&ev, wakeToken)
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, p[0], &ev); err != nil {
		syscall.Close(epfd)
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil
	}
	w := &hangupWatcher{epfd: epfd, wakeR: p[0], wakeW: p[1], next: wakeToken + 1, byTok: map[uint64]func(){}, done: make(chan struct{})}
	go w.loop()
	return w
}

// setToken and token keep a 64-bit token in the event's data, which
// syscall.EpollEvent splits into Fd and Pad.
func setToken(ev *syscall.EpollEvent, tok uint64) {
	ev.Fd, ev.Pad = int32(uint32(tok)), int32(uint32(tok>>32))
}

func token(ev *syscall.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

// loop waits for hangups and calls their functions, until close wakes it.
// It blocks in epoll_wait, a system call: one thread for all connections.
func (w *hangupWatcher) loop() {
	defer close(w.done)
	events := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(w.epfd, events, -1)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return // EBADF and the like: nothing more can be watched
		}
		for _, ev := range events[:n] {
			tok := token(&ev)
			if tok == wakeToken {
				return
			}
			w.mu.Lock()
			f := w.byTok[tok]
			delete(w.byTok, tok)
			w.mu.Unlock()
			if f != nil {
				f()
			}
		}
	}
}

// watch calls onHangup once, from the watcher's goroutine, when nc's peer
// hangs up (closes or shuts down its side, or resets the connection). It
// reports false when nc cannot be watched (not a socket, or the watcher is
// closed). The returned function stops the watch; it must be called before
// nc is closed, while the descriptor is still nc's.
func (w *hangupWatcher) watch(nc net.Conn, onHangup func()) (unwatch func(), ok bool) {
	sc, isSys := nc.(syscall.Conn)
	if w == nil || !isSys {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, false
	}
	tok := w.next
	w.next++
	ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | syscall.EPOLLONESHOT}
	setToken(&ev, tok)
	// The function is in byTok before a hangup can be reported: the loop
	// looks it up under mu.
	w.byTok[tok] = onHangup
	var ctlErr error
	// Under Control the descriptor stays nc's: it cannot be closed and
	// reused meanwhile.
	if err := rc.Control(func(fd uintptr) {
		ctlErr = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	}); err != nil || ctlErr != nil {
		delete(w.byTok, tok)
		return nil, false
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.byTok, tok)
		if w.closed {
			return // the epoll set is gone, and its descriptor with it
		}
		_ = rc.Control(func(fd uintptr) {
			_ = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil)
		})
	}, true
}

// close stops the watcher's goroutine and waits for it. Watches still
// registered are dropped; their unwatch functions stay safe to call.
func (w *hangupWatcher) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	clear(w.byTok)
	w.mu.Unlock()
	syscall.Write(w.wakeW, []byte{0})
	<-w.done
	syscall.Close(w.epfd)
	syscall.Close(w.wakeR)
	syscall.Close(w.wakeW)
}
