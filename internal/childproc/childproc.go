// Package childproc supervises a server run as a child process that must
// not outlive its parent: the PostgreSQL clusters of internal/localpg and
// the `shardtail serve` children of the benchmark (bench.StartServer).
// It is a production helper, not a test harness: `shardtail bench` ships
// in the binary and starts both kinds of child.
//
//	p, err := childproc.Start(bin, args, childproc.Options{LogPath: log})
//	if err != nil {
//		return err
//	}
//	if err := p.WaitReady(ctx, time.Minute, probe); err != nil {
//		p.Kill()
//		return fmt.Errorf("did not start: %w\n%s", err, p.Log())
//	}
//	defer p.Stop()
//
// # What it guarantees
//
// The child runs in a process group of its own, so a terminal's Ctrl-C
// reaches only the parent, which stops the child in order (Stop) rather
// than having it die under its clients. If the parent dies without Stop (a
// panic, a test timeout, a kill), the kernel sends the child
// Options.DeathSignal (Pdeathsig). The child's stdout and stderr go to
// Options.LogPath, which Log reads back for error messages.
//
// # The caller's duties
//
// Call Stop or Kill exactly once; after either the child has exited and
// been reaped. Start does not take a context: the child outlives the call
// that started it; WaitReady's context bounds only the wait.
package childproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// pollInterval is how often WaitReady probes.
const pollInterval = 50 * time.Millisecond

// Options configures Start.
type Options struct {
	// LogPath is the file, created or truncated, that receives the
	// child's stdout and stderr.
	LogPath string
	// Credential, when set, is the user the child runs as (postgres
	// refuses to run as root).
	Credential *syscall.Credential
	// DeathSignal is what the child gets when the parent dies without
	// stopping it; SIGKILL if zero.
	DeathSignal syscall.Signal
	// StopSignal asks the child to shut down in order (Stop); SIGTERM if
	// zero.
	StopSignal syscall.Signal
	// KillSignal makes the child exit at once (Kill, and Stop past
	// StopTimeout); SIGKILL if zero. A postmaster wants SIGQUIT, which
	// takes its backends along.
	KillSignal syscall.Signal
	// StopTimeout is how long Stop waits for the child to exit after
	// StopSignal, and Kill after KillSignal, before SIGKILL.
	StopTimeout time.Duration
}

// Process is a running child. PID is read-only.
type Process struct {
	// PID is the child's process id.
	PID int

	opts    Options
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited; then waitErr is set
	waitErr error
}

// Start starts path with args as a supervised child (see the package
// doc) and returns once it runs; it does not wait for it to be ready.
func Start(path string, args []string, opts Options) (*Process, error) {
	logFile, err := os.Create(opts.LogPath)
	if err != nil {
		return nil, fmt.Errorf("child log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	// Not CommandContext: the child outlives the caller's context.
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: opts.Credential,
		Setpgid:    true,
		Pdeathsig:  or(opts.DeathSignal, syscall.SIGKILL),
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &Process{PID: cmd.Process.Pid, opts: opts, cmd: cmd, exited: make(chan struct{})}
	go func() { // owned by p: ends when the child exits, which Stop and Kill wait for
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// WaitReady calls probe until it returns nil, the child exits, ctx ends,
// or timeout passes; each probe gets ctx.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration, probe func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	last := errors.New("not probed")
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("exited: %v", p.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if last = probe(ctx); last == nil {
			return nil
		}
		time.Sleep(pollInterval)
	}
	return fmt.Errorf("not ready after %v: %w", timeout, last)
}

// Exited reports whether the child has exited, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.exited:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Log returns what the child has written, or why it cannot be read.
func (p *Process) Log() string {
	b, err := os.ReadFile(p.opts.LogPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.opts.LogPath, err)
	}
	return string(b)
}

// Stop asks the child to shut down (StopSignal) and waits for it to exit;
// a child still running after StopTimeout is killed (Kill), and Stop says
// so.
func (p *Process) Stop() error {
	if p.cmd.Process.Signal(or(p.opts.StopSignal, syscall.SIGTERM)) != nil {
		<-p.exited // the signal fails only once the child is gone
		return nil
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(p.opts.StopTimeout):
		p.Kill()
		return fmt.Errorf("did not stop within %v; killed it", p.opts.StopTimeout)
	}
}

// Kill makes the child exit at once (KillSignal, then SIGKILL after
// StopTimeout) and waits for it to exit.
func (p *Process) Kill() {
	sig := or(p.opts.KillSignal, syscall.SIGKILL)
	p.cmd.Process.Signal(sig)
	if sig == syscall.SIGKILL {
		<-p.exited
		return
	}
	select {
	case <-p.exited:
	case <-time.After(p.opts.StopTimeout):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

func or(sig, def syscall.Signal) syscall.Signal {
	if sig == 0 {
		return def
	}
	return sig
}
