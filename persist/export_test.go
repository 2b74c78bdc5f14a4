package persist

import "context"

// LiveKeys exposes, for tests, the blobs the sweep keeps: those some state
// version still in consensus references.
func LiveKeys(ctx context.Context, c *Client, shard string) (map[string]bool, error) {
	m, err := c.machine(ctx, shard)
	if err != nil {
		return nil, err
	}
	return c.liveKeys(ctx, m)
}
