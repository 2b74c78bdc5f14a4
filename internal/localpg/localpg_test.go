package localpg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestStartStop(t *testing.T) {
	s, err := Start(t.Context(), Options{MaxConnections: 42})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s.Stop()
		}
	})
	if s.PID <= 0 || s.Version == "" {
		t.Errorf("PID %d, Version %q; want both set", s.PID, s.Version)
	}
	conn, err := pgx.Connect(t.Context(), s.URL)
	if err != nil {
		t.Fatalf("connect %s: %v", s.URL, err)
	}
	var got string
	err = conn.QueryRow(t.Context(), "SHOW max_connections").Scan(&got)
	conn.Close(context.Background())
	if err != nil || got != "42" {
		t.Errorf("max_connections = %q (err %v); want 42", got, err)
	}
	if b, err := os.ReadFile(filepath.Join(s.dir, ownerFile)); err != nil || string(b) != strconv.Itoa(os.Getpid()) {
		t.Errorf("owner file holds %q (err %v); want this pid", b, err)
	}

	stopped = true
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(s.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster directory after Stop: %v; want it removed", err)
	}
	if processAlive(s.PID) {
		t.Errorf("postmaster %d alive after Stop", s.PID)
	}
}

func TestRemoveStale(t *testing.T) {
	base := t.TempDir()
	mk := func(owner string) string {
		dir, err := os.MkdirTemp(base, dirPattern)
		if err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	// A pid above the kernel's pid_max (at most 2^22) names no process.
	dead, live, settingUp := mk("99999999"), mk(strconv.Itoa(os.Getpid())), mk("")
	removeStale(base)
	for _, c := range []struct {
		dir  string
		want bool
	}{{dead, false}, {live, true}, {settingUp, true}} {
		_, err := os.Stat(c.dir)
		if got := err == nil; got != c.want {
			t.Errorf("%s exists = %v; want %v", filepath.Base(c.dir), got, c.want)
		}
	}
}
