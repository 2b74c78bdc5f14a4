package tail

import (
	"sync"
	"testing"

	"github.com/shardtail/shardtail/formatter"
)

// TestShapeCache: a shape is formatted once however many subscribers ask
// for it at once, and each shape separately.
func TestShapeCache(t *testing.T) {
	var c shapeCache[int]
	var calls sync.Map // shape key -> *int of format calls
	get := func(opts *formatter.Options, v int) int {
		return c.get(outputKey(nil, opts), func() int {
			n, _ := calls.LoadOrStore(opts.ShapeKey(), new(int))
			*n.(*int)++ // under the cache's lock
			return v
		})
	}
	plain, progress := &formatter.Options{}, &formatter.Options{Progress: true}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { get(plain, 1) })
		wg.Go(func() { get(progress, 2) })
	}
	wg.Wait()
	if got, want := get(plain, 99), 1; got != want {
		t.Errorf("plain shape: got %d, want %d (the first value)", got, want)
	}
	if got, want := get(&formatter.Options{Progress: true}, 99), 2; got != want {
		t.Errorf("progress shape (equal options, another value): got %d, want %d", got, want)
	}
	for _, opts := range []*formatter.Options{plain, progress} {
		got := 0
		if n, ok := calls.Load(opts.ShapeKey()); ok {
			got = *n.(*int)
		}
		if got != 1 {
			t.Errorf("shape %q formatted %d times, want 1", opts.ShapeKey(), got)
		}
	}
}
