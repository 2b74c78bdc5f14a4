// Package testserver starts a real shardtail server in-process for tests:
// the coordinator and the pgwire server on a loopback port, over the
// storage a test chooses (in-memory by default). It is the test-friendly
// face of package server: defaults for tests, t.Fatal on errors, and a
// stop when the test ends.
package testserver

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/feed"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/server"
	"github.com/shardtail/shardtail/tail"
)

// Options configure a test server. Zero values give an in-memory server
// with the fast path on and a 100 ms tick.
type Options struct {
	Blob      persist.Blob
	Consensus persist.Consensus
	// FastPath is the default of enable_subscribe_persist_fast_path; nil
	// means on.
	FastPath *bool
	Tick     time.Duration
	Persist  persist.Config
	// Tail tunes the fast path.
	Tail    tail.Config
	Adapter func(*adapter.Config)
	PGWire  pgwire.Config
	// Listen is the pgwire address; "" means a free loopback port. A test
	// restarts a server where clients expect it (a tail's upstream) by
	// starting a new one on the stopped one's Addr and storage.
	Listen string
	// FeedListen is the HTTP feed's address ("127.0.0.1:0" for a free
	// port); "" means no feed. Feed configures it.
	FeedListen string
	Feed       feed.Config
}

// Server is a running test server.
type Server struct {
	Coordinator *adapter.Coordinator
	Persist     *persist.Client
	Registry    *prometheus.Registry
	Addr        string
	// FeedAddr is the HTTP feed's address, "" without Options.FeedListen.
	FeedAddr string
	srv      *server.Server
}

// Start starts a server and stops it when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Blob == nil {
		opts.Blob = blobmem.New()
	}
	if opts.Consensus == nil {
		opts.Consensus = consmem.New()
	}
	if opts.Tick == 0 {
		opts.Tick = 100 * time.Millisecond
	}
	if opts.Persist.PollInterval == 0 {
		opts.Persist.PollInterval = 50 * time.Millisecond
	}
	fast := true
	if opts.FastPath != nil {
		fast = *opts.FastPath
	}
	acfg := adapter.Config{Tick: opts.Tick, FastPath: fast, Version: "test", Tail: opts.Tail}
	if opts.Adapter != nil {
		opts.Adapter(&acfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := server.New(ctx, server.Config{
		Blob:       opts.Blob,
		Consensus:  opts.Consensus,
		Persist:    opts.Persist,
		Adapter:    acfg,
		PGWire:     opts.PGWire,
		Listen:     opts.Listen,
		FeedListen: opts.FeedListen,
		Feed:       opts.Feed,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Coordinator: srv.Coordinator(), Persist: srv.Persist(), Registry: srv.Registry(), Addr: srv.Addr().String(), srv: srv}
	if a := srv.FeedAddr(); a != nil {
		s.FeedAddr = a.String()
	}
	t.Cleanup(s.Stop)
	return s
}

// Stop shuts the server down: it closes every connection (clients get
// FATAL 57P01), stops the coordinator and its persist client, and leaves
// the storage as it is. It is idempotent, and runs when the test ends; a
// test calls it earlier to take the server away mid-test.
func (s *Server) Stop() {
	if s.srv == nil {
		return
	}
	s.srv.Close()
	s.srv = nil
}

// URL returns a connection URL for the default role.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://materialize@%s/materialize?sslmode=disable", s.Addr)
}

// HostPort returns the host and port.
func (s *Server) HostPort() (string, string) {
	h, p, _ := net.SplitHostPort(s.Addr)
	return h, p
}
