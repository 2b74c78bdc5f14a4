package adapter

import (
	"context"

	"github.com/shardtail/shardtail/stmtlog"
)

// FinalizeDropped runs one pass of the finalizer now and returns how many
// dropped shards it finished with (tests and tools; the coordinator runs
// it every second).
func (c *Coordinator) FinalizeDropped(ctx context.Context) (int, error) {
	return c.finalizer.Pass(ctx, c.liveShards)
}

// liveShards returns the shards the catalog names, read under c.ddl so
// that no drop of this process is between listing and committing.
func (c *Coordinator) liveShards(ctx context.Context) (map[string]bool, error) {
	c.ddl.Lock()
	defer c.ddl.Unlock()
	if err := c.catalog.Refresh(ctx); err != nil {
		return nil, err
	}
	// The statement log's shard is named by no item, and never dropped.
	live := map[string]bool{stmtlog.ShardID: true}
	for _, it := range c.catalog.State().Items {
		if it.Shard != "" {
			live[it.Shard] = true
		}
	}
	return live, nil
}
