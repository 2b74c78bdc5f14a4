package file

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/persisttest"
)

func TestBlob(t *testing.T) {
	persisttest.TestBlob(t, func(t *testing.T) persist.Blob { return mustOpen(t, t.TempDir()) })
}

func TestKeyIsPath(t *testing.T) {
	root := t.TempDir()
	b := mustOpen(t, root)
	mustSet(t, b, "s1/v2/r3", "value")
	got, err := os.ReadFile(filepath.Join(root, "s1", "v2", "r3"))
	if err != nil || string(got) != "value" {
		t.Fatalf("file for key s1/v2/r3: got %q, %v; want %q", got, err, "value")
	}
	if existed, err := b.Delete(t.Context(), "s1/v2/r3"); err != nil || !existed {
		t.Fatalf("Delete = %v, %v; want true, nil", existed, err)
	}
	// Empty directories are pruned up to, not including, the root.
	if _, err := os.Stat(filepath.Join(root, "s1")); !os.IsNotExist(err) {
		t.Errorf("directory s1 after deleting its only key: Stat err %v, want not-exist", err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Errorf("root after deleting every key: %v", err)
	}
}

func TestKeyConflicts(t *testing.T) {
	root := t.TempDir()
	b := mustOpen(t, root)
	mustSet(t, b, "a", "file")
	if err := b.Set(t.Context(), "a/b", []byte("x")); err == nil {
		t.Errorf("Set(a/b) with key a present = nil, want an error")
	}
	if _, err := b.Get(t.Context(), "a/b"); !errors.Is(err, persist.ErrNotFound) {
		t.Errorf("Get(a/b) with key a present = %v, want ErrNotFound", err)
	}
	mustSet(t, b, "x/y", "file")
	if err := b.Set(t.Context(), "x", []byte("x")); err == nil {
		t.Errorf("Set(x) with key x/y present = nil, want an error")
	}
	if _, err := b.Get(t.Context(), "x"); !errors.Is(err, persist.ErrNotFound) {
		t.Errorf("Get(x) with key x/y present = %v, want ErrNotFound", err)
	}
	if existed, err := b.Delete(t.Context(), "x"); err != nil || existed {
		t.Errorf("Delete(x) with key x/y present = %v, %v; want false, nil", existed, err)
	}
	// The failed Sets left no temporary file behind.
	if temps, _ := filepath.Glob(filepath.Join(root, tempPrefix+"*")); len(temps) != 0 {
		t.Errorf("temporary files after failed Sets: %v", temps)
	}
}

func TestOpenRemovesStaleTemps(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "s1", "v2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, tempPrefix+"stale")
	fresh := filepath.Join(dir, tempPrefix+"fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * StaleTempAge)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	b := mustOpen(t, root)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary file after Open: Stat err %v, want not-exist", err)
	}
	// A young one may be a Set in progress in another process.
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temporary file after Open: %v, want it kept", err)
	}
	err := b.List(t.Context(), "", func(m persist.BlobMeta) error {
		return fmt.Errorf("List reported %q, want no keys", m.Key)
	})
	if err != nil {
		t.Error(err)
	}
}

// TestCrashDuringSet kills a process that is writing values of a few
// MiB, many times over, and checks that every key left behind holds a
// whole value. A process kill does not lose what the kernel has, so this
// tests atomicity (rename), not durability (fsync).
func TestCrashDuringSet(t *testing.T) {
	root := t.TempDir()
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$")
		cmd.Env = append(os.Environ(), "SHARDTAIL_FILE_CRASH_ROOT="+root, "SHARDTAIL_FILE_CRASH_ROUND="+strconv.Itoa(round))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the child has written something, then kill it mid-Set.
		if _, err := stdout.Read(make([]byte, 1)); err != nil {
			t.Fatalf("round %d: child wrote nothing: %v", round, err)
		}
		time.Sleep(time.Duration(20+30*round) * time.Millisecond)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	b := mustOpen(t, root)
	keys := 0
	err := b.List(t.Context(), "", func(m persist.BlobMeta) error {
		keys++
		value, err := b.Get(t.Context(), m.Key)
		if err != nil {
			return err
		}
		if !validCrashValue(value) {
			return fmt.Errorf("key %s: %d bytes that are not a whole value", m.Key, len(value))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if keys == 0 {
		t.Fatal("no keys survived; the child never finished a Set")
	}
}

// TestCrashHelper is the child process of TestCrashDuringSet; run alone it
// does nothing.
func TestCrashHelper(t *testing.T) {
	root := os.Getenv("SHARDTAIL_FILE_CRASH_ROOT")
	if root == "" {
		return
	}
	round, _ := strconv.Atoi(os.Getenv("SHARDTAIL_FILE_CRASH_ROUND"))
	b := mustOpen(t, root)
	for i := 0; ; i++ {
		// Rewrite the same few keys with different sizes, so a torn write
		// would show as a wrong length or checksum.
		key := fmt.Sprintf("crash/k%d", i%4)
		if err := b.Set(t.Context(), key, crashValue(round*1000+i)); err != nil {
			t.Fatal(err)
		}
		os.Stdout.Write([]byte{'.'})
	}
}

// crashValue is a self-checking value of 1 to 4 MiB: its last 32 bytes are
// the SHA-256 of the rest.
func crashValue(seed int) []byte {
	n := (1 + seed%4) << 20
	value := make([]byte, n-sha256.Size)
	for i := 0; i+8 <= len(value); i += 8 {
		binary.LittleEndian.PutUint64(value[i:], uint64(seed)*uint64(i+1))
	}
	sum := sha256.Sum256(value)
	return append(value, sum[:]...)
}

func validCrashValue(value []byte) bool {
	if len(value) < sha256.Size {
		return false
	}
	body, sum := value[:len(value)-sha256.Size], value[len(value)-sha256.Size:]
	want := sha256.Sum256(body)
	return bytes.Equal(sum, want[:])
}

func BenchmarkSetGet(b *testing.B) {
	blob, err := Open(b.Context(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer blob.Close()
	persisttest.BenchmarkBlobSetGet(b, blob)
}

func mustOpen(t *testing.T, dir string) *Blob {
	t.Helper()
	b, err := Open(t.Context(), dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return b
}

func mustSet(t *testing.T, b *Blob, key, value string) {
	t.Helper()
	if err := b.Set(t.Context(), key, []byte(value)); err != nil {
		t.Fatalf("Set(%q): %v", key, err)
	}
}
