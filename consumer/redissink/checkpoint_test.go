package redissink

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/consumer/checkpointtest"
	"github.com/shardtail/shardtail/internal/testsupport/redistest"
)

// TestCheckpointAcceptance runs the consumer's Checkpoint suite on the
// Sink: one Redis, a namespace per key, a Sink per worker.
func TestCheckpointAcceptance(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	checkpointtest.Run(t, func(t *testing.T, key string) consumer.Checkpoint {
		s, err := New(context.Background(), Config{Client: rdb, Namespace: key + ":", Key: []string{"k"}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
