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

	"github.com/shardtail/shardtail/internal/childproc"
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

	dir  string // owns data/, the unix socket, postgres.log
	proc *childproc.Process
	bin  string
	cred *syscall.Credential
	opts Options
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
	proc, err := childproc.Start(filepath.Join(bin, "postgres"), args, childproc.Options{
		LogPath:    filepath.Join(dir, "postgres.log"),
		Credential: cred,
		// If the caller dies without Stop, postgres shuts down
		// immediately too.
		DeathSignal: syscall.SIGQUIT,
		// Fast shutdown: ends open sessions.
		StopSignal: syscall.SIGINT,
		// Immediate shutdown: the postmaster takes its children along.
		KillSignal:  syscall.SIGQUIT,
		StopTimeout: stopTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("postgres (%s): %w", bin, err)
	}
	s := &Server{
		URL:  fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		PID:  proc.PID,
		dir:  dir,
		proc: proc,
		bin:  bin,
		cred: cred,
		opts: opts,
	}
	if err := proc.WaitReady(ctx, readyTimeout, s.accepts); err != nil {
		proc.Kill()
		log := proc.Log()
		if strings.Contains(log, "could not bind") || strings.Contains(log, "already in use") {
			return nil, fmt.Errorf("%w: %d", errPortTaken, port)
		}
		return nil, fmt.Errorf("postgres (%s) did not start: %w\nserver log:\n%s", bin, err, log)
	}
	return s, nil
}

// accepts reports whether postgres accepts a connection.
func (s *Server) accepts(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, s.URL)
	if err != nil {
		return err
	}
	conn.Close(ctx)
	return nil
}

// Crash stops postgres at once (immediate shutdown: no checkpoint, so the
// next start recovers from its WAL as after a crash) and starts it again on
// the same cluster at a new port: URL and PID change. Tests of clients that
// must survive their database's crash use it.
func (s *Server) Crash(ctx context.Context) error {
	s.proc.Kill()
	for attempt := 1; ; attempt++ {
		ns, err := launch(ctx, s.bin, s.dir, s.cred, s.opts)
		if err == nil {
			s.URL, s.PID, s.proc = ns.URL, ns.PID, ns.proc
			return nil
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			return err
		}
	}
}

// Stop shuts postgres down (fast shutdown: SIGINT, which ends open
// sessions; immediate, then SIGKILL, past stopTimeout) and removes the
// cluster directory. Call it once.
func (s *Server) Stop() error {
	err := s.proc.Stop()
	if err != nil {
		err = fmt.Errorf("postgres: %w", err)
	}
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = fmt.Errorf("remove cluster directory: %w", rmErr)
	}
	return err
}
