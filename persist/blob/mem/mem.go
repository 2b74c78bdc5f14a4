package mem

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/blob/internal/blobkey"
)

// Blob is an in-memory persist.Blob. The zero value is not usable; call New.
type Blob struct {
	mu      sync.RWMutex
	objects map[string]object // guarded by mu
}

// object is a stored value and when it was set.
type object struct {
	value    []byte // never mutated
	modified time.Time
}

var _ persist.Blob = (*Blob)(nil)

// New returns an empty in-memory Blob.
func New() *Blob {
	return &Blob{objects: make(map[string]object)}
}

// Get returns a copy of the value stored at key, or persist.ErrNotFound.
func (b *Blob) Get(ctx context.Context, key string) ([]byte, error) {
	if err := check(ctx, "get", key); err != nil {
		return nil, err
	}
	b.mu.RLock()
	obj, ok := b.objects[key]
	b.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("mem blob: get %s: %w", key, persist.ErrNotFound)
	}
	// Stored values are never mutated, so the copy can be made unlocked.
	return append([]byte{}, obj.value...), nil
}

// Set stores a copy of value at key, modified now.
func (b *Blob) Set(ctx context.Context, key string, value []byte) error {
	if err := check(ctx, "set", key); err != nil {
		return err
	}
	value = append([]byte{}, value...)
	b.mu.Lock()
	b.objects[key] = object{value: value, modified: time.Now()}
	b.mu.Unlock()
	return nil
}

// Delete removes key and reports whether it existed.
func (b *Blob) Delete(ctx context.Context, key string) (bool, error) {
	if err := check(ctx, "delete", key); err != nil {
		return false, err
	}
	b.mu.Lock()
	_, existed := b.objects[key]
	delete(b.objects, key)
	b.mu.Unlock()
	return existed, nil
}

// List calls fn for every key with the prefix, in no particular order. It
// lists the keys present when it is called; fn runs without the lock and may
// call any method of b.
func (b *Blob) List(ctx context.Context, prefix string, fn func(persist.BlobMeta) error) error {
	if err := blobkey.CheckPrefix(prefix); err != nil {
		return fmt.Errorf("mem blob: list %q: %w", prefix, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var metas []persist.BlobMeta
	b.mu.RLock()
	for key, obj := range b.objects {
		if strings.HasPrefix(key, prefix) {
			metas = append(metas, persist.BlobMeta{Key: key, Size: int64(len(obj.value)), Modified: obj.modified})
		}
	}
	b.mu.RUnlock()
	for _, m := range metas {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

// Close does nothing: the objects live as long as b is referenced.
func (b *Blob) Close() error { return nil }

// check validates key and fails fast on a done ctx, so that mem behaves like
// the backends whose calls can block.
func check(ctx context.Context, op, key string) error {
	if err := blobkey.Check(key); err != nil {
		return fmt.Errorf("mem blob: %s: %w", op, err)
	}
	return ctx.Err()
}
