package tail

import (
	"sync"

	"github.com/shardtail/shardtail/formatter"
)

// shapeCache holds data shared by every subscriber (a listen batch, a
// snapshot piece) formatted into output rows once per output shape
// (formatter.Options.ShapeKey): subscribers with the same options share the
// formatting work and the rows. The zero value is empty and ready.
type shapeCache[T any] struct {
	mu     sync.Mutex
	shapes map[string]T // mu
}

// get returns the value for opts's shape, computing it with format on
// first use. format runs under the cache's lock, so that subscribers of a
// shape that arrive together format it once, not once each. Its rows must
// be marked formatter.Shared: their encodings are then computed once too,
// and no subscriber may modify them.
func (c *shapeCache[T]) get(opts *formatter.Options, format func() T) T {
	key := opts.ShapeKey()
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.shapes[key]; ok {
		return v
	}
	if c.shapes == nil {
		c.shapes = map[string]T{}
	}
	v := format()
	c.shapes[key] = v
	return v
}
