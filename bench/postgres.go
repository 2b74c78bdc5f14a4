package bench

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Postgres is a throwaway PostgreSQL cluster: the peer of the report. It
// runs the same storm as SELECT * from fresh connections. Started as root
// (as tests and CI are), initdb and postgres run as the OS user postgres
// in a directory it owns under /tmp; internal/pgtest does the same for
// tests, but only through testing.TB.
type Postgres struct {
	// URL is the connection URL (user postgres, database postgres).
	URL string
	// PID is the postmaster's pid; its CPU time includes the backends
	// that have exited (they are its children).
	PID int
	// Version is `postgres --version`.
	Version string

	dir     string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// StartPostgres initdbs a cluster and starts postgres on a free loopback
// port, allowing maxConns connections. It returns ErrNoPostgres when the
// binaries are missing.
func StartPostgres(ctx context.Context, maxConns int) (*Postgres, error) {
	bin, err := postgresBinaries()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	base := os.TempDir()
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, postgres must run as the OS user postgres: %w", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		base = "/tmp" // world-traversable, unlike a TMPDIR under /root
	}
	dir, err := os.MkdirTemp(base, "shardtail-bench-pg-*")
	if err != nil {
		return nil, fmt.Errorf("postgres dir: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	p := &Postgres{dir: dir, exited: make(chan struct{})}
	if out, err := exec.CommandContext(ctx, filepath.Join(bin, "postgres"), "--version").Output(); err == nil {
		p.Version = strings.TrimSpace(string(out))
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	p.cmd = exec.Command(filepath.Join(bin, "postgres"),
		"-D", data, "-k", dir, "-h", "127.0.0.1", "-p", strconv.Itoa(port),
		// Throwaway data: no syncs. Connections for the largest storm.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections="+strconv.Itoa(maxConns))
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	p.PID = p.cmd.Process.Pid
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	p.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := p.waitReady(ctx); err != nil {
		p.kill()
		log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
		return nil, fmt.Errorf("postgres did not start: %w\n%s", err, log)
	}
	ok = true
	return p, nil
}

func (p *Postgres) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("exited: %v", p.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := pgconn.Connect(cctx, p.URL)
		cancel()
		if err == nil {
			c.Close(ctx)
			return nil
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not accepting connections: %v", last)
}

// CPU is a probe of the postmaster's CPU time, its exited backends
// included.
func (p *Postgres) CPU() CPUProbe { return CPUProbe{PID: p.PID} }

// Stop shuts postgres down (fast shutdown) and removes the cluster.
func (p *Postgres) Stop() error {
	var err error
	if p.cmd.Process.Signal(syscall.SIGINT) == nil {
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			err = fmt.Errorf("postgres did not stop within %v; killed it", stopTimeout)
			p.kill()
		}
	}
	if rmErr := os.RemoveAll(p.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

func (p *Postgres) kill() {
	p.cmd.Process.Signal(syscall.SIGQUIT) // the postmaster takes its children along
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// postgresBinaries returns the directory holding initdb and postgres: the
// one in PATH (symlinks resolved) or the newest /usr/lib/postgresql/*/bin.
func postgresBinaries() (string, error) {
	var candidates []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versions, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return cmp.Compare(vb, va)
	})
	candidates = append(candidates, versions...)
	for _, dir := range candidates {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", ErrNoPostgres
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
