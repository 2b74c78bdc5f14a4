//go:build unix

package file

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/blob/internal/blobkey"
)

var _ persist.BlobLender = (*Blob)(nil)

// Lend implements persist.BlobLender: it maps the file of key read-only
// instead of reading it, so that a part's reader pays for the pages it
// touches (the footer and the record batch it decodes first) rather than
// for a zeroed allocation and a copy of the whole file before its first
// row. Files are never written after their rename, and one that a Delete
// unlinks stays mapped until release, so the bytes cannot change under
// the reader.
func (b *Blob) Lend(ctx context.Context, key string) ([]byte, func(), error) {
	if err := blobkey.Check(key); err != nil {
		return nil, nil, fmt.Errorf("file blob: lend: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	f, err := os.Open(b.path(key))
	if isNotExist(err) {
		return nil, nil, fmt.Errorf("file blob: lend %s: %w", key, persist.ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("file blob: lend %s: %w", key, err)
	}
	defer f.Close() // the mapping outlives the descriptor
	info, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("file blob: lend %s: %w", key, err)
	}
	if !info.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("file blob: lend %s: %w", key, persist.ErrNotFound)
	}
	size := info.Size()
	if size == 0 || size != int64(int(size)) {
		// Nothing to map (mmap refuses a length of 0), or more than this
		// platform can map: read it.
		value, err := b.Get(ctx, key)
		return value, func() {}, err
	}
	value, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("file blob: lend %s: mmap: %w", key, err)
	}
	var once sync.Once
	return value, func() { once.Do(func() { _ = syscall.Munmap(value) }) }, nil
}
