package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/internal/loopback"
)

const (
	initdbTimeout = 2 * time.Minute
	readyTimeout  = time.Minute
	stopTimeout   = 30 * time.Second
	// startAttempts bounds retries when another process takes the free
	// port between our probe and postgres's bind.
	startAttempts = 5
)

// Options configures Start.
type Options struct {
	// MaxConnections is postgres's max_connections; 0 keeps PostgreSQL's
	// default (100).
	MaxConnections int
}

// Server is a throwaway PostgreSQL cluster run by this process. Start sets
// its exported fields; they are read-only.
type Server struct {
	// URL is the admin connection URL: user postgres (a superuser, trust
	// authentication), database postgres.
	URL string
	// PID is the postmaster's pid. Its CPU time includes that of the
	// backends that have exited (they are its children).
	PID int
	// Version is `postgres --version`, or "" if that failed.
	Version string

	dir     string // owns data/, the unix socket, postgres.log
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited; then waitErr is set
	waitErr error
}

// Start initdbs a new cluster and starts postgres on it, returning once it
// accepts connections. ctx bounds the start only, not the server's life:
// call Stop. Start returns ErrNoBinaries when PostgreSQL is not installed;
// when postgres would not start, the error quotes its log.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	base := tempBase(cred != nil)
	removeStale(base)
	dir, err := makeDir(base, cred)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()

	data := filepath.Join(dir, "data")
	ictx, cancel := context.WithTimeout(ctx, initdbTimeout)
	defer cancel()
	initdb := exec.CommandContext(ictx, filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb (%s): %w\n%s", bin, err, out)
	}
	var version string
	if out, err := exec.CommandContext(ctx, filepath.Join(bin, "postgres"), "--version").Output(); err == nil {
		version = strings.TrimSpace(string(out))
	}

	for attempt := 1; ; attempt++ {
		s, err := launch(ctx, bin, dir, cred, opts)
		if err == nil {
			s.Version = version
			ok = true
			return s, nil
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			return nil, err
		}
	}
}

// launch starts postgres on the cluster in dir at a free port and waits
// until it accepts connections.
func launch(ctx context.Context, bin, dir string, cred *syscall.Credential, opts Options) (*Server, error) {
	port, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	args := []string{
		"-D", filepath.Join(dir, "data"),
		"-k", dir,
		"-h", "127.0.0.1",
		"-p", strconv.Itoa(port),
		// The data dies with the server: skip every sync.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
	}
	if opts.MaxConnections > 0 {
		args = append(args, "-c", "max_connections="+strconv.Itoa(opts.MaxConnections))
	}
	// Not CommandContext: the server outlives ctx.
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: cred,
		// A terminal's Ctrl-C goes to the caller, which stops postgres in
		// order (Stop) rather than having it die under its clients.
		Setpgid: true,
		// If the caller dies without Stop (a panic, a test timeout, a
		// kill), postgres shuts down immediately too.
		Pdeathsig: syscall.SIGQUIT,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres (%s): %w", bin, err)
	}
	s := &Server{
		URL:    fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		PID:    cmd.Process.Pid,
		dir:    dir,
		cmd:    cmd,
		exited: make(chan struct{}),
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx); err != nil {
		s.kill()
		log := readLog(logPath)
		if strings.Contains(log, "could not bind") || strings.Contains(log, "already in use") {
			return nil, fmt.Errorf("%w: %d", errPortTaken, port)
		}
		return nil, fmt.Errorf("postgres (%s) did not start: %w\nserver log:\n%s", bin, err, log)
	}
	return s, nil
}

// waitReady connects until postgres answers, it exits, ctx ends, or
// readyTimeout passes.
func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited: %v", s.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgconn.Connect(cctx, s.URL)
		if err == nil {
			conn.Close(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not accepting connections after %v: %v", readyTimeout, last)
}

// Stop shuts postgres down (fast shutdown: SIGINT, which ends open
// sessions) and removes the cluster directory. Call it once.
func (s *Server) Stop() error {
	var err error
	if s.cmd.Process.Signal(syscall.SIGINT) == nil {
		select {
		case <-s.exited:
		case <-time.After(stopTimeout):
			err = fmt.Errorf("postgres did not stop within %v; killed it", stopTimeout)
			s.kill()
		}
	}
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = fmt.Errorf("remove cluster directory: %w", rmErr)
	}
	return err
}

// kill stops postgres at once and waits for it to exit.
func (s *Server) kill() {
	s.cmd.Process.Signal(syscall.SIGQUIT) // immediate shutdown: the postmaster takes its children along
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// readLog returns the server log, or why it cannot.
func readLog(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return string(b)
}
