package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardtail/shardtail/internal/childproc"
	"github.com/shardtail/shardtail/internal/loopback"
)

// startTimeout bounds how long a starting server may take to answer PING.
const startTimeout = 30 * time.Second

// portAttempts is how many free ports Start tries: another process may take
// a port between loopback.FreePort and redis-server's bind.
const portAttempts = 5

// installHint ends every "cannot start Redis" message.
const installHint = "install Redis (Debian/Ubuntu: apt-get install -y redis-server; scripts/prereqs.sh does it)"

// Options tune a server; the zero value is what tests want.
type Options struct {
	// AppendFsync is the appendfsync policy: "always" if empty, which
	// loses no acknowledged write to a SIGKILL; benchmarks measure with
	// "everysec", the common production setting.
	AppendFsync string
}

// Server is a running redis-server. Addr and Dir are read-only.
type Server struct {
	// Addr is the server's host:port on 127.0.0.1.
	Addr string
	// Dir is the server's data directory (its appendonly files).
	Dir string

	bin   string
	fsync string
	mu    sync.Mutex
	// proc is the running child, nil while the server is down.
	// mu must be held.
	proc *childproc.Process
	runs int // mu must be held. Numbers the log files.
}

// Start starts a new, empty redis-server for t and stops it when t ends.
// It fails t if redis-server is missing or does not start.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with opts.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server not found: %v; %s", err, installHint)
	}
	s := &Server{Dir: t.TempDir(), bin: bin, fsync: opts.AppendFsync}
	if s.fsync == "" {
		s.fsync = "always"
	}
	var lastErr error
	for range portAttempts {
		port, err := loopback.FreePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s.Addr = "127.0.0.1:" + strconv.Itoa(port)
		if lastErr = s.launch(); lastErr == nil {
			t.Cleanup(s.stop)
			return s
		}
		if !strings.Contains(lastErr.Error(), "in use") {
			break
		}
	}
	t.Fatalf("redistest: %v\n%s", lastErr, installHint)
	return nil
}

// URL returns the server's redis:// URL for database 0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Kill SIGKILLs the server, which stays down until Restart.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		t.Fatalf("redistest: Kill: the server is not running")
	}
	s.proc.Kill()
	s.proc = nil
}

// Restart SIGKILLs the server if it runs, then starts it again on the same
// port with the same data directory: it comes back with every write it
// acknowledged before the kill (appendonly).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	if s.proc != nil {
		s.proc.Kill()
		s.proc = nil
	}
	s.mu.Unlock()
	if err := s.launch(); err != nil {
		t.Fatalf("redistest: restart: %v", err)
	}
}

// launch starts redis-server on s.Addr and waits until it answers PING.
func (s *Server) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, port, _ := strings.Cut(s.Addr, ":")
	s.runs++
	logPath := filepath.Join(s.Dir, fmt.Sprintf("redis-%d.log", s.runs))
	args := []string{
		"--port", port,
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--daemonize", "no",
		"--logfile", "", // stdout, which childproc sends to logPath
		// appendonly, by default with fsync before every reply: a
		// SIGKILL of the server loses nothing it acknowledged. With
		// everysec, Redis may postpone the AOF write while a background
		// fsync runs and still reply, so a kill can lose acknowledged
		// writes.
		"--appendonly", "yes",
		"--appendfsync", s.fsync,
		"--save", "", // no RDB snapshots: the AOF is the only durability
		"--protected-mode", "no",
	}
	proc, err := childproc.Start(s.bin, args, childproc.Options{LogPath: logPath, StopTimeout: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	client := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer client.Close()
	probe := func(ctx context.Context) error { return client.Ping(ctx).Err() }
	if err := proc.WaitReady(context.Background(), startTimeout, probe); err != nil {
		log := proc.Log()
		proc.Kill()
		if strings.Contains(log, "Address already in use") {
			return fmt.Errorf("redis-server on %s: port in use", s.Addr)
		}
		return fmt.Errorf("redis-server on %s did not start: %w\n%s", s.Addr, err, log)
	}
	s.proc = proc
	return nil
}

// stop shuts the server down at the end of the test.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.Stop()
		s.proc = nil
	}
}
