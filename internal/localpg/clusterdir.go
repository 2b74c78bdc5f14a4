package localpg

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	// dirPattern names the cluster directories.
	dirPattern = "shardtail-pg-*"
	// ownerFile, in a cluster directory, holds the pid of the process that
	// started the cluster.
	ownerFile = "owner.pid"
)

// makeDir creates a cluster directory in base that postgres, running as
// cred, can reach, and records this process as its owner.
func makeDir(base string, cred *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp(base, dirPattern)
	if err != nil {
		return "", fmt.Errorf("cluster directory: %w", err)
	}
	err = os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644)
	if err == nil {
		// MkdirTemp makes 0700; postgres must reach its data and socket.
		err = os.Chmod(dir, 0o755)
	}
	if err == nil && cred != nil {
		err = os.Chown(dir, int(cred.Uid), int(cred.Gid))
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("cluster directory: %w", err)
	}
	return dir, nil
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

// removeStale deletes cluster directories in base left by processes that
// died without stopping their server (Pdeathsig stopped it).
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
