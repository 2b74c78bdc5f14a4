package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/persisttest"
)

func TestConsensus(t *testing.T) {
	persisttest.TestConsensus(t, func(t *testing.T) persist.Consensus {
		return mustOpen(t, Config{Path: filepath.Join(t.TempDir(), "consensus.db")})
	})
}

// TestTwoInstancesRace races writers through two Consensus on one file,
// each with its own connection pools, as two processes would.
func TestTwoInstancesRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "consensus.db")
	a := mustOpenClosed(t, Config{Path: path})
	b := mustOpenClosed(t, Config{Path: path})
	persisttest.ConsensusRace(t, "race", persisttest.ConsensusRaceRounds, a, b, a, b, a, b, a, b)
}

func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dir with spaces?&#%", "consensus.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, Config{Path: path})
	ok, err := c.CompareAndSet(t.Context(), "k", nil, persist.VersionedData{SeqNo: 1, Data: []byte("kept")})
	if err != nil || !ok {
		t.Fatalf("CAS = %v, %v; want committed", ok, err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the file is not at the path given: %v", err)
	}
	c = mustOpenClosed(t, Config{Path: path})
	head, err := c.Head(t.Context(), "k")
	if err != nil || head == nil || string(head.Data) != "kept" {
		t.Fatalf("Head after reopen = %v, %v; want v1 %q", head, err, "kept")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string // substring of the error; "" for valid
	}{
		{Config{Path: "x.db"}, ""},
		{Config{Path: "x.db", BusyTimeout: time.Second, MaxReaders: 1}, ""},
		{Config{}, "Path"},
		{Config{Path: "x.db", BusyTimeout: -time.Second}, "BusyTimeout"},
		{Config{Path: "x.db", BusyTimeout: time.Microsecond}, "BusyTimeout"},
		{Config{Path: "x.db", MaxReaders: -1}, "MaxReaders"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v.Validate() = %v, want an error naming %q", tt.cfg, err, tt.want)
		}
	}
}

func TestOpenDirectoryFails(t *testing.T) {
	if c, err := Open(t.Context(), Config{Path: t.TempDir()}); err == nil {
		c.Close()
		t.Fatal("Open(a directory): no error")
	}
}

// TestBusyIsDeterminate holds the write lock from another connection, as
// another process would, until the CAS's busy timeout runs out.
func TestBusyIsDeterminate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "consensus.db")
	c := mustOpen(t, Config{Path: path, BusyTimeout: 100 * time.Millisecond})
	release := holdWriteLock(t, path)
	defer release()

	ok, err := c.CompareAndSet(t.Context(), "k", nil, persist.VersionedData{SeqNo: 1})
	if ok || err == nil || persist.IsIndeterminate(err) {
		t.Fatalf("CAS while locked = %v, %v; want a determinate error", ok, err)
	}
	if !strings.Contains(err.Error(), "locked") && !strings.Contains(err.Error(), "busy") {
		t.Errorf("CAS while locked: %v; want it to say the database is locked", err)
	}
	if _, err := c.Truncate(t.Context(), "k", 0); err == nil || persist.IsIndeterminate(err) {
		t.Errorf("Truncate while locked = %v; want a determinate error", err)
	}
	release()
	if head, err := c.Head(t.Context(), "k"); err != nil || head != nil {
		t.Fatalf("Head after the failed CAS = %v, %v; want nil", head, err)
	}
	if ok, err := c.CompareAndSet(t.Context(), "k", nil, persist.VersionedData{SeqNo: 1}); err != nil || !ok {
		t.Fatalf("CAS after release = %v, %v; want committed", ok, err)
	}
}

// TestCancelMidStatement cancels a CAS while it waits for another
// process's lock: the statement runs on and its outcome is reported, and a
// second CAS still queued for the writer connection fails determinately.
func TestCancelMidStatement(t *testing.T) {
	path := filepath.Join(t.TempDir(), "consensus.db")
	c := mustOpen(t, Config{Path: path, BusyTimeout: 10 * time.Second})
	release := holdWriteLock(t, path)

	type result struct {
		ok  bool
		err error
	}
	first := make(chan result, 1)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		ok, err := c.CompareAndSet(ctx, "k", nil, persist.VersionedData{SeqNo: 1, Data: []byte("first")})
		first <- result{ok, err}
	}()
	time.Sleep(100 * time.Millisecond) // let it take the writer connection

	queued, stop := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer stop()
	ok, err := c.CompareAndSet(queued, "k", nil, persist.VersionedData{SeqNo: 1, Data: []byte("second")})
	if ok || !errors.Is(err, context.DeadlineExceeded) || persist.IsIndeterminate(err) {
		t.Errorf("queued CAS = %v, %v; want a determinate DeadlineExceeded", ok, err)
	}

	cancel()
	time.Sleep(50 * time.Millisecond)
	release()
	r := <-first
	if r.err != nil || !r.ok {
		t.Fatalf("canceled CAS = %v, %v; want it to finish and commit", r.ok, r.err)
	}
	head, err := c.Head(t.Context(), "k")
	if err != nil || head == nil || string(head.Data) != "first" {
		t.Fatalf("Head = %v, %v; want the first CAS's version", head, err)
	}
}

func TestClosed(t *testing.T) {
	c := mustOpen(t, Config{Path: filepath.Join(t.TempDir(), "consensus.db")})
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.CompareAndSet(t.Context(), "k", nil, persist.VersionedData{SeqNo: 1}); err == nil || persist.IsIndeterminate(err) {
		t.Errorf("CAS after Close = %v; want a determinate error", err)
	}
	if _, err := c.Head(t.Context(), "k"); err == nil || persist.IsIndeterminate(err) {
		t.Errorf("Head after Close = %v; want a determinate error", err)
	}
	if _, err := c.Watch(t.Context()); err == nil {
		t.Error("Watch after Close: no error")
	}
}

func BenchmarkCAS(b *testing.B) {
	c, err := Open(b.Context(), Config{Path: filepath.Join(b.TempDir(), "consensus.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	persisttest.BenchmarkConsensusCompareAndSet(b, c)
}

// BenchmarkHead is the read a new snapshot cursor makes (its shard's
// latest state), on a key with a few versions.
func BenchmarkHead(b *testing.B) {
	c := benchConsensus(b, 4)
	b.ReportAllocs()
	for b.Loop() {
		if v, err := c.Head(b.Context(), "k"); err != nil || v == nil {
			b.Fatalf("Head: %v, %v", v, err)
		}
	}
}

// benchConsensus returns a Consensus in a temporary file whose key "k"
// holds versions 1 to n (512 bytes each); it is closed after b.
func benchConsensus(b *testing.B, n persist.SeqNo) *Consensus {
	c, err := Open(b.Context(), Config{Path: filepath.Join(b.TempDir(), "consensus.db")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	var prev *persist.SeqNo
	for i := range n {
		if ok, err := c.CompareAndSet(b.Context(), "k", prev, persist.VersionedData{SeqNo: i + 1, Data: make([]byte, 512)}); err != nil || !ok {
			b.Fatalf("CompareAndSet: %v, %v", ok, err)
		}
		prev = new(i + 1)
	}
	return c
}

// mustOpen opens a Consensus the test closes itself.
func mustOpen(t *testing.T, cfg Config) *Consensus {
	t.Helper()
	c, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return c
}

// mustOpenClosed opens a Consensus closed at the end of the test.
func mustOpenClosed(t *testing.T, cfg Config) *Consensus {
	t.Helper()
	c := mustOpen(t, cfg)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// holdWriteLock takes path's write lock through a connection of its own
// and returns the function that releases it (idempotent).
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("BEGIN IMMEDIATE: %v", err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Errorf("ROLLBACK: %v", err)
		}
		conn.Close()
		db.Close()
	}
	t.Cleanup(release)
	return release
}

// BenchmarkScan is the read behind a linearizable read of a shard's state
// (its versions after the cached one), with the from and limit of each
// call changing as they do in a server.
func BenchmarkScan(b *testing.B) {
	c := benchConsensus(b, 16)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		from, limit := persist.SeqNo(13+i%2), 10+i%3
		i++
		if v, err := c.Scan(b.Context(), "k", from, limit); err != nil || len(v) != int(17-from) {
			b.Fatalf("Scan(%d, %d): %d versions, %v", from, limit, len(v), err)
		}
	}
}
