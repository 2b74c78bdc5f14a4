package consumer_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/consumer/checkpointtest"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

func TestMemoryCheckpoint(t *testing.T) {
	var mu sync.Mutex
	shared := map[string]*consumer.MemoryCheckpoint{}
	checkpointtest.Run(t, func(t *testing.T, key string) consumer.Checkpoint {
		mu.Lock()
		defer mu.Unlock()
		if shared[key] == nil {
			shared[key] = &consumer.MemoryCheckpoint{}
		}
		return shared[key]
	})
}

func TestFileCheckpoint(t *testing.T) {
	dir := t.TempDir()
	checkpointtest.Run(t, func(t *testing.T, key string) consumer.Checkpoint {
		return &consumer.FileCheckpoint{Path: filepath.Join(dir, key+".json")}
	})
}

func TestTableCheckpoint(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	checkpointtest.Run(t, func(t *testing.T, key string) consumer.Checkpoint {
		cp := &consumer.TableCheckpoint{URL: srv.URL(), Name: key}
		t.Cleanup(func() { cp.Close(context.Background()) })
		return cp
	})
}
