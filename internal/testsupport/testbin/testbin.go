// Package testbin serves the tests that exec the shardtail binary: it
// builds cmd/shardtail once per test process and hands out free loopback
// addresses for the servers they start.
//
//	bin := testbin.Build(t)
//	addr := testbin.FreeAddr(t) // 127.0.0.1:54321
//	cmd := exec.Command(bin, "serve", "--listen", addr, ...)
//
// The binary lives in a temporary directory that Remove deletes; call it
// from TestMain after m.Run (see pgtest.Main's cleanups).
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/shardtail/shardtail/internal/loopback"
)

// pkg is what Build builds.
const pkg = "github.com/shardtail/shardtail/cmd/shardtail"

var (
	once     sync.Once
	dir, bin string
	buildErr error
)

// Build returns the path of a shardtail binary built from cmd/shardtail
// (go build, no race detector), building it on the first call of the
// process; a failed build fails every caller.
func Build(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		dir, buildErr = os.MkdirTemp("", "shardtail-testbin-*")
		if buildErr != nil {
			return
		}
		bin = filepath.Join(dir, "shardtail")
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

// Remove deletes the binary Build made, if any. Call it once the tests
// have run.
func Remove() error {
	if dir == "" {
		return nil
	}
	return os.RemoveAll(dir)
}

// FreeAddr returns a 127.0.0.1:PORT address whose port was free a moment
// ago (loopback.FreePort); a server started on it retries with another
// when the port was taken in between.
func FreeAddr(t testing.TB) string {
	t.Helper()
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}
