package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRestartKeepsAcknowledgedWrites checks what the sink's crash tests
// rely on: a write Redis acknowledged survives a SIGKILL of the server.
func TestRestartKeepsAcknowledgedWrites(t *testing.T) {
	srv := Start(t)
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	if err := client.Set(ctx, "k", "v1", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	srv.Kill(t)
	if err := client.Get(ctx, "k").Err(); err == nil {
		t.Fatalf("GET on a killed server succeeded")
	}
	srv.Restart(t)
	got, err := client.Get(ctx, "k").Result()
	if err != nil || got != "v1" {
		t.Fatalf("GET after restart = %q, %v; want v1", got, err)
	}
}

// TestServersAreIsolated checks that two servers do not share a keyspace.
func TestServersAreIsolated(t *testing.T) {
	a, b := Start(t), Start(t)
	ctx := context.Background()
	ca := redis.NewClient(&redis.Options{Addr: a.Addr})
	defer ca.Close()
	cb := redis.NewClient(&redis.Options{Addr: b.Addr})
	defer cb.Close()
	if err := ca.Set(ctx, "k", "a", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cb.Get(ctx, "k").Err(); err != redis.Nil {
		t.Fatalf("GET k on the second server = %v, want redis.Nil", err)
	}
}
