package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shardtail/shardtail/internal/childproc"
	"github.com/shardtail/shardtail/internal/loopback"
)

// serverReadyTimeout bounds a child server's start.
const serverReadyTimeout = time.Minute

// stopTimeout is how long a child gets to exit after SIGTERM.
const stopTimeout = 15 * time.Second

// Server is a `shardtail serve` child process on a fresh temporary data
// directory and free loopback ports: role all, or a tail process in front
// of another Server (ServerOptions.Upstream). Stop kills it and removes the
// directory; so does the death of this process (Pdeathsig).
type Server struct {
	// URL is the pgwire connection URL; MetricsURL the Prometheus endpoint.
	URL, MetricsURL string
	// Addr is the pgwire address (HOST:PORT), what a tail's --upstream
	// names.
	Addr string
	// PID is the child's process id.
	PID int
	// FastPath is the --subscribe-persist-fast-path it was started with.
	FastPath bool
	// Upstream is the --upstream it was started with: set for a tail
	// process.
	Upstream string
	// FeedAddr is the HTTP change feed's address (HOST:PORT) when it was
	// started with ServerOptions.Feed; else "".
	FeedAddr string

	dir  string
	proc *childproc.Process
}

// ServerOptions configures a Server. The zero value is role all with the
// fast path off on the embedded default storage (file blobs and SQLite in
// the child's temporary data directory).
type ServerOptions struct {
	// FastPath is --subscribe-persist-fast-path.
	FastPath bool
	// Blob and Consensus, when set, are --blob and --consensus: storage
	// shared with other Servers (SharedStorage).
	Blob, Consensus string
	// Upstream, when set, makes the child a tail process (--upstream) in
	// front of the role-all server at this pgwire address; it must share
	// that server's Blob and Consensus.
	Upstream string
	// Feed serves the HTTP change feed on a free loopback port
	// (Server.FeedAddr), with room for any number of streams; without it
	// the feed is off, since several servers run at once.
	Feed bool
	// MemoryBudget, when positive, is --memory-budget in bytes; else the
	// server's default.
	MemoryBudget int64
}

// StartServer starts bin serve and waits until /healthz answers. The child
// inherits this process's RLIMIT_NOFILE, so raise it first
// (RaiseFileLimit).
func StartServer(ctx context.Context, bin string, opt ServerOptions) (*Server, error) {
	dir, err := os.MkdirTemp("", "shardtail-bench-*")
	if err != nil {
		return nil, fmt.Errorf("server dir: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	pg, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	hp, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		Addr:       fmt.Sprintf("127.0.0.1:%d", pg),
		MetricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", hp),
		FastPath:   opt.FastPath,
		Upstream:   opt.Upstream,
		dir:        dir,
	}
	s.URL = "postgres://materialize@" + s.Addr + "/materialize?sslmode=disable"
	args := []string{"serve",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen", s.Addr,
		"--http-listen", fmt.Sprintf("127.0.0.1:%d", hp),
		"--subscribe-persist-fast-path=" + strconv.FormatBool(opt.FastPath)}
	if opt.Feed {
		fp, err := loopback.FreePort()
		if err != nil {
			return nil, err
		}
		s.FeedAddr = fmt.Sprintf("127.0.0.1:%d", fp)
		args = append(args, "--feed-listen", s.FeedAddr, "--feed-max-connections", "1000000")
	} else {
		args = append(args, "--feed-listen", "")
	}
	if opt.Blob != "" {
		args = append(args, "--blob", opt.Blob)
	}
	if opt.Consensus != "" {
		args = append(args, "--consensus", opt.Consensus)
	}
	if opt.Upstream != "" {
		args = append(args, "--upstream", opt.Upstream)
	}
	if opt.MemoryBudget > 0 {
		args = append(args, "--memory-budget", strconv.FormatInt(opt.MemoryBudget, 10))
	}
	// In a process group of its own (a Ctrl-C at the terminal reaches
	// only the bench, which then stops the server in order), and killed
	// if the bench dies without stopping it.
	s.proc, err = childproc.Start(bin, args, childproc.Options{
		LogPath:     filepath.Join(dir, "server.log"),
		StopTimeout: stopTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("%s serve: %w", bin, err)
	}
	s.PID = s.proc.PID
	healthz := fmt.Sprintf("http://127.0.0.1:%d/healthz", hp)
	if err := s.proc.WaitReady(ctx, serverReadyTimeout, func(ctx context.Context) error { return healthy(ctx, healthz) }); err != nil {
		s.proc.Kill()
		return nil, fmt.Errorf("server did not start: %w\n%s", err, s.LogTail(20))
	}
	ok = true
	return s, nil
}

// healthy reports whether GET url answers 200 OK.
func healthy(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// Exited reports whether the child has exited, and how.
func (s *Server) Exited() (bool, error) { return s.proc.Exited() }

// Healthy reports whether the server still accepts pgwire connections and
// answers /healthz.
func (s *Server) Healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u, _ := url.Parse(s.URL)
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return fmt.Errorf("pgwire: %w", err)
	}
	c.Close()
	if err := healthy(ctx, strings.TrimSuffix(s.MetricsURL, "/metrics")+"/healthz"); err != nil {
		return fmt.Errorf("healthz: %w", err)
	}
	return nil
}

// CPU is a probe of the child's CPU time.
func (s *Server) CPU() CPUProbe { return CPUProbe{PID: s.PID} }

// RSS returns the child's resident set size in bytes.
func (s *Server) RSS() (int64, error) { return ProcRSS(s.PID) }

// LogTail returns the last n lines of the server's log.
func (s *Server) LogTail(n int) string {
	lines := strings.Split(strings.TrimRight(s.proc.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop stops the child (SIGTERM, then SIGKILL) and removes its directory.
func (s *Server) Stop() error {
	err := s.proc.Stop()
	if err != nil {
		err = fmt.Errorf("server: %w", err)
	}
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}
