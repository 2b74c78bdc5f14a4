package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

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

	dir     string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited; then waitErr is set
	waitErr error
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
		logPath:    filepath.Join(dir, "server.log"),
		exited:     make(chan struct{}),
	}
	s.URL = "postgres://materialize@" + s.Addr + "/materialize?sslmode=disable"
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	args := []string{"serve",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen", s.Addr,
		"--http-listen", fmt.Sprintf("127.0.0.1:%d", hp),
		"--subscribe-persist-fast-path=" + strconv.FormatBool(opt.FastPath)}
	if opt.Blob != "" {
		args = append(args, "--blob", opt.Blob)
	}
	if opt.Consensus != "" {
		args = append(args, "--consensus", opt.Consensus)
	}
	if opt.Upstream != "" {
		args = append(args, "--upstream", opt.Upstream)
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group: a Ctrl-C at the terminal reaches only
		// the bench, which then stops the server in order.
		Setpgid: true,
		// If the bench dies without stopping it, the server dies too.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", bin, err)
	}
	s.PID = s.cmd.Process.Pid
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx, hp); err != nil {
		s.kill()
		return nil, fmt.Errorf("server did not start: %w\n%s", err, s.LogTail(20))
	}
	ok = true
	return s, nil
}

func (s *Server) waitReady(ctx context.Context, httpPort int) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", httpPort)
	deadline := time.Now().Add(serverReadyTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("exited: %v", s.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("/healthz not OK after %v", serverReadyTimeout)
}

// Exited reports whether the child has exited, and how.
func (s *Server) Exited() (bool, error) {
	select {
	case <-s.exited:
		return true, s.waitErr
	default:
		return false, nil
	}
}

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
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(s.MetricsURL, "/metrics")+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthz: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz: %s", resp.Status)
	}
	return nil
}

// CPU is a probe of the child's CPU time.
func (s *Server) CPU() CPUProbe { return CPUProbe{PID: s.PID} }

// RSS returns the child's resident set size in bytes.
func (s *Server) RSS() (int64, error) { return ProcRSS(s.PID) }

// LogTail returns the last n lines of the server's log.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop stops the child (SIGTERM, then SIGKILL) and removes its directory.
func (s *Server) Stop() error {
	var err error
	if s.cmd.Process.Signal(syscall.SIGTERM) == nil {
		select {
		case <-s.exited:
		case <-time.After(stopTimeout):
			err = fmt.Errorf("server did not stop within %v; killed it", stopTimeout)
			s.kill()
		}
	}
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

func (s *Server) kill() {
	s.cmd.Process.Kill()
	<-s.exited
}
