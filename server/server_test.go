package server_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/leakcheck"
	"github.com/shardtail/shardtail/server"
)

// TestServerServesAndCloses starts a server from URLs, runs a statement
// over pgwire, reads /healthz, closes it, and checks that Close reports no
// error and that no goroutine of the server outlives it.
func TestServerServesAndCloses(t *testing.T) {
	ctx := context.Background()
	before := runtime.NumGoroutine()
	s, err := server.New(ctx, server.Config{BlobURL: "mem://", ConsensusURL: "mem://", HTTPListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}

	conn, err := pgx.Connect(ctx, "postgres://materialize@"+s.Addr().String()+"/materialize?sslmode=disable")
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	var got int
	if err := conn.QueryRow(ctx, "SELECT 1 + 1").Scan(&got); err != nil || got != 2 {
		t.Errorf("SELECT 1 + 1 = %d, %v; want 2", got, err)
	}
	conn.Close(ctx)

	resp, err := http.Get("http://" + s.HTTPAddr().String() + "/healthz")
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("/healthz = %d %q, want 200 \"ok\"", resp.StatusCode, body)
	}
	http.DefaultClient.CloseIdleConnections()

	if err := s.Close(); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	leakcheck.Check(t, before, "after Close")
}

// TestNewFailureClosesWhatItOpened makes New fail at its last step (the
// pgwire address is taken) and checks that the error comes back and that
// nothing New had started is left running.
func TestNewFailureClosesWhatItOpened(t *testing.T) {
	ctx := context.Background()
	first, err := server.New(ctx, server.Config{BlobURL: "mem://", ConsensusURL: "mem://"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	before := leakcheck.Settle(runtime.NumGoroutine())
	s, err := server.New(ctx, server.Config{BlobURL: "mem://", ConsensusURL: "mem://", Listen: first.Addr().String()})
	if err == nil {
		s.Close()
		t.Fatal("New on a taken address succeeded, want an error")
	}
	leakcheck.Check(t, before, "after a failed New")
}

// TestConfigValidate names the missing storage.
func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  server.Config
		want string
	}{
		{"NoBlob", server.Config{ConsensusURL: "mem://"}, "Blob"},
		{"NoConsensus", server.Config{BlobURL: "mem://"}, "Consensus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestMemoryBudgetMetrics: /metrics exports the budget and every holder,
// pgwire's own gauge and the budget's counters side by side under one
// metric name, and the budget counts pgwire in its total.
func TestMemoryBudgetMetrics(t *testing.T) {
	ctx := context.Background()
	s, err := server.New(ctx, server.Config{BlobURL: "mem://", ConsensusURL: "mem://", HTTPListen: "127.0.0.1:0", MemoryBudget: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get("http://" + s.HTTPAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	for _, want := range []string{
		`shardtail_memory_budget_bytes 1.048576e+06`,
		`shardtail_memory_bytes{holder="pgwire"}`,
		`shardtail_memory_bytes{holder="tail_window"}`,
		`shardtail_memory_bytes{holder="tail_queues"}`,
		`shardtail_memory_bytes{holder="ordered"}`,
		`shardtail_memory_bytes{holder="part_cache"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if _, ok := s.Budget().Bytes()["pgwire"]; !ok {
		t.Errorf("budget holders %v lack pgwire", s.Budget().Bytes())
	}
}
