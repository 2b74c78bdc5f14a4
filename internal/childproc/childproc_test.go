package childproc

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// start runs the shell script as a supervised child and stops it at the
// end of the test.
func start(t *testing.T, script string, opts Options) *Process {
	t.Helper()
	opts.LogPath = filepath.Join(t.TempDir(), "child.log")
	if opts.StopTimeout == 0 {
		opts.StopTimeout = 10 * time.Second
	}
	p, err := Start("/bin/sh", []string{"-c", script}, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if dead, _ := p.Exited(); !dead {
			p.Kill()
		}
	})
	return p
}

// logSays is a readiness probe: the child's log contains s.
func logSays(p *Process, s string) func(context.Context) error {
	return func(context.Context) error {
		if !strings.Contains(p.Log(), s) {
			return errors.New("not yet")
		}
		return nil
	}
}

func TestStopInOrder(t *testing.T) {
	p := start(t, `trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done`, Options{})
	if err := p.WaitReady(t.Context(), time.Minute, logSays(p, "ready")); err != nil {
		t.Fatalf("WaitReady: %v\n%s", err, p.Log())
	}
	if dead, err := p.Exited(); dead {
		t.Fatalf("Exited() = true (%v) before Stop", err)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if dead, _ := p.Exited(); !dead {
		t.Error("Exited() = false after Stop")
	}
	if got := p.Log(); !strings.Contains(got, "bye") {
		t.Errorf("log %q; want the child's own shutdown (bye)", got)
	}
}

func TestStopKillsAStubbornChild(t *testing.T) {
	p := start(t, `trap '' TERM; echo ready; while :; do sleep 0.05; done`, Options{StopTimeout: 200 * time.Millisecond})
	if err := p.WaitReady(t.Context(), time.Minute, logSays(p, "ready")); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	err := p.Stop()
	if err == nil || !strings.Contains(err.Error(), "killed it") {
		t.Errorf("Stop = %v; want it to say it killed the child", err)
	}
	if dead, _ := p.Exited(); !dead {
		t.Error("Exited() = false after Stop")
	}
}

func TestWaitReadySeesTheExit(t *testing.T) {
	p := start(t, `echo failing; exit 3`, Options{})
	err := p.WaitReady(t.Context(), time.Minute, logSays(p, "never printed"))
	if err == nil || !strings.Contains(err.Error(), "exited: exit status 3") {
		t.Errorf("WaitReady = %v; want the exit reported", err)
	}
}

func TestWaitReadyTimesOut(t *testing.T) {
	p := start(t, `sleep 60`, Options{})
	err := p.WaitReady(t.Context(), 100*time.Millisecond, logSays(p, "never printed"))
	if err == nil || !strings.Contains(err.Error(), "not ready after") {
		t.Errorf("WaitReady = %v; want a timeout", err)
	}
	p.Kill()
	if dead, _ := p.Exited(); !dead {
		t.Error("Exited() = false after Kill")
	}
}
