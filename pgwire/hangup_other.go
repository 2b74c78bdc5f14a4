//go:build !linux

package pgwire

import "net"

// hangupWatcher is Linux's epoll watch of client hangups; elsewhere there
// is none, and each connection reads its socket on an input pipe instead.
type hangupWatcher struct{}

func newHangupWatcher() *hangupWatcher { return nil }

func (w *hangupWatcher) watch(net.Conn, func()) (unwatch func(), ok bool) { return nil, false }

func (w *hangupWatcher) close() {}
