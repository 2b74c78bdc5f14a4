package pgtest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// dirPattern names the throwaway clusters' directories.
	dirPattern = "shardtail-pgtest-*"
	// ownerFile, in a cluster directory, holds the test binary's pid.
	ownerFile = "owner.pid"

	initdbTimeout = 2 * time.Minute
	readyTimeout  = time.Minute
	stopTimeout   = 30 * time.Second
	// startAttempts bounds retries when another process takes the free
	// port between our probe and postgres's bind.
	startAttempts = 5
)

// installHint ends every "cannot get PostgreSQL" message.
const installHint = "install PostgreSQL (Debian/Ubuntu: apt-get install -y postgresql) " +
	"or set " + EnvURL + " to the URL of a server whose user may CREATE DATABASE"

// server is a throwaway PostgreSQL cluster run by this test binary.
type server struct {
	dir     string // owns data/, the unix socket, postgres.log
	url     string // admin URL: user postgres, database postgres
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited; then waitErr is set
	waitErr error
}

// startServer initdbs a new cluster and starts postgres on it.
func startServer() (*server, error) {
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
	dir, err := os.MkdirTemp(base, dirPattern)
	if err != nil {
		return nil, fmt.Errorf("cluster directory: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, fmt.Errorf("cluster directory: %w", err)
	}
	// MkdirTemp makes 0700; postgres must reach its data and socket.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster directory: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("cluster directory: %w", err)
		}
	}

	data := filepath.Join(dir, "data")
	ctx, cancel := context.WithTimeout(context.Background(), initdbTimeout)
	defer cancel()
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb (%s): %w\n%s", bin, err, out)
	}

	for attempt := 1; ; attempt++ {
		s, err := launch(bin, dir, data, cred)
		if err == nil {
			ok = true
			return s, nil
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			return nil, err
		}
	}
}

// errPortTaken means postgres could not bind the port we picked.
var errPortTaken = errors.New("port taken")

// launch starts postgres on a free port and waits until it accepts
// connections.
func launch(bin, dir, data string, cred *syscall.Credential) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(filepath.Join(bin, "postgres"),
		"-D", data,
		"-k", dir,
		"-h", "127.0.0.1",
		"-p", strconv.Itoa(port),
		// The data dies with the test: skip every sync.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=200",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: cred,
		// If the test binary dies without Main's stop (a panic, a test
		// timeout, a kill), postgres shuts down immediately too.
		Pdeathsig: syscall.SIGQUIT,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres (%s): %w", bin, err)
	}
	s := &server{
		dir:    dir,
		url:    fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		cmd:    cmd,
		exited: make(chan struct{}),
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(); err != nil {
		log := readLog(logPath)
		s.kill()
		if strings.Contains(log, "could not bind") || strings.Contains(log, "already in use") {
			return nil, fmt.Errorf("%w: %d", errPortTaken, port)
		}
		return nil, fmt.Errorf("postgres (%s) did not start: %w; %s\nserver log:\n%s", bin, err, installHint, log)
	}
	return s, nil
}

// waitReady connects until postgres answers, it exits, or readyTimeout.
func (s *server) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited: %v", s.waitErr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.url)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
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

// stop shuts postgres down (fast shutdown: SIGINT) and removes the cluster.
func (s *server) stop() error {
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
func (s *server) kill() {
	s.cmd.Process.Signal(syscall.SIGQUIT) // immediate shutdown: the postmaster takes its children along
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// findBinaries returns the directory holding initdb and postgres: the one
// in PATH (symlinks resolved, as on Debian where PATH has wrappers) or the
// newest /usr/lib/postgresql/*/bin.
func findBinaries() (string, error) {
	var candidates []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versions, func(a, b string) int { // newest first
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
	return "", fmt.Errorf("PostgreSQL server binaries (initdb, postgres) not found in PATH or /usr/lib/postgresql/*/bin; %s", installHint)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// credential returns who initdb and postgres run as: nil (this process's
// user) unless that is root, which they refuse; then the postgres user.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("tests run as root, and initdb and postgres refuse to; they run as the OS user postgres, which is missing (%v); %s", err, installHint)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user postgres has uid %q gid %q; want numbers", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// tempBase returns the directory to create the cluster in: os.TempDir(),
// unless another user must reach into it and one of its ancestors is not
// world-traversable (say TMPDIR under /root); then /tmp.
func tempBase(otherUser bool) string {
	base := os.TempDir()
	if !otherUser {
		return base
	}
	for dir := base; ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if dir == filepath.Dir(dir) {
			return base
		}
	}
}

// removeStale deletes cluster directories in base left by test binaries
// that died without stopping their server (Pdeathsig stopped it).
func removeStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, dirPattern))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or still being set up
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		if postmasterAlive(filepath.Join(dir, "data")) {
			continue
		}
		os.RemoveAll(dir)
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// postmasterAlive reports whether data's postmaster.pid names a live
// process (a server still shutting down).
func postmasterAlive(data string) bool {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return false
	}
	first, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(first)))
	return err == nil && pid > 0 && processAlive(pid)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// readLog returns the server log, or why it cannot.
func readLog(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return string(b)
}
