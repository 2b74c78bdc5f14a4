package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/blob/internal/blobkey"
)

const (
	// tempPrefix starts every temporary file's name. Keys cannot have a
	// segment starting with '.', so a temporary file is never a key.
	tempPrefix = ".tmp-"
	// StaleTempAge is how old a temporary file must be for Open to remove
	// it. A younger one may belong to a Set in progress in another process
	// sharing the root.
	StaleTempAge = time.Hour
	// setAttempts bounds Set's retries when a concurrent Delete prunes the
	// directory it has just created.
	setAttempts = 10

	dirPerm  = 0o755
	filePerm = 0o644
)

// Blob is a persist.Blob that stores each key as a file under a root
// directory. It holds no state besides the root, so it is safe for
// concurrent use, also by several processes.
type Blob struct {
	root string // absolute and clean
}

var _ persist.Blob = (*Blob)(nil)

// Open returns a Blob rooted at dir, creating dir if needed, and removes
// temporary files older than StaleTempAge that a crashed Set left behind.
// The cleanup walks the whole tree once, like a List of every key.
func Open(ctx context.Context, dir string) (*Blob, error) {
	if dir == "" {
		return nil, errors.New("file blob: open: empty directory")
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file blob: open %s: %w", dir, err)
	}
	if err := os.MkdirAll(root, dirPerm); err != nil {
		return nil, fmt.Errorf("file blob: open %s: %w", dir, err)
	}
	// The root itself must survive a crash too.
	if err := syncDir(filepath.Dir(root)); err != nil {
		return nil, fmt.Errorf("file blob: open %s: %w", dir, err)
	}
	b := &Blob{root: root}
	if err := b.removeStaleTemps(ctx, time.Now().Add(-StaleTempAge)); err != nil {
		return nil, fmt.Errorf("file blob: open %s: %w", dir, err)
	}
	return b, nil
}

// Root returns the absolute directory b stores its files under.
func (b *Blob) Root() string { return b.root }

// Get returns the value stored at key, or persist.ErrNotFound.
func (b *Blob) Get(ctx context.Context, key string) ([]byte, error) {
	if err := blobkey.Check(key); err != nil {
		return nil, fmt.Errorf("file blob: get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(b.path(key))
	if isNotExist(err) {
		return nil, fmt.Errorf("file blob: get %s: %w", key, persist.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("file blob: get %s: %w", key, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("file blob: get %s: %w", key, err)
	}
	if !info.Mode().IsRegular() {
		// A directory of other keys, not a key.
		return nil, fmt.Errorf("file blob: get %s: %w", key, persist.ErrNotFound)
	}
	// The file is never written after its rename, so its size is final.
	value := make([]byte, info.Size())
	if _, err := io.ReadFull(f, value); err != nil {
		return nil, fmt.Errorf("file blob: get %s: %w", key, err)
	}
	return value, nil
}

// Set stores value at key atomically and durably (see the package doc).
func (b *Blob) Set(ctx context.Context, key string, value []byte) error {
	if err := blobkey.Check(key); err != nil {
		return fmt.Errorf("file blob: set: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	path := b.path(key)
	dir := filepath.Dir(path)
	tmp, err := b.createTemp(dir)
	if err != nil {
		return fmt.Errorf("file blob: set %s: %w", key, err)
	}
	if err := writeSyncClose(tmp, value); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("file blob: set %s: %w", key, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("file blob: set %s: %w", key, err)
	}
	// Sync every directory up to the root, not only the new name's: one of
	// them may have been created by this Set or by a concurrent one that has
	// not synced its parent yet. Syncing an unchanged directory is cheap.
	for d := dir; ; d = filepath.Dir(d) {
		if err := syncDir(d); err != nil {
			return fmt.Errorf("%w: file blob: set %s: %v", persist.ErrIndeterminate, key, err)
		}
		if d == b.root {
			return nil
		}
	}
}

// Delete removes key, reports whether it existed, and removes the
// directories it leaves empty. A deleted file may reappear after a crash: it
// is unreferenced garbage then, and deleting it again is harmless, so Delete
// does not pay for a directory fsync.
func (b *Blob) Delete(ctx context.Context, key string) (bool, error) {
	if err := blobkey.Check(key); err != nil {
		return false, fmt.Errorf("file blob: delete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	path := b.path(key)
	info, err := os.Lstat(path)
	if isNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("file blob: delete %s: %w", key, err)
	}
	if info.IsDir() {
		return false, nil // a directory of other keys, not a key
	}
	if err := os.Remove(path); isNotExist(err) {
		return false, nil // a concurrent Delete won
	} else if err != nil {
		return false, fmt.Errorf("file blob: delete %s: %w", key, err)
	}
	b.prune(filepath.Dir(path))
	return true, nil
}

// List calls fn for every key with the prefix, in lexical order of the
// path. It walks only the directory the prefix's complete segments name.
// Keys set or deleted during List may or may not be reported.
func (b *Blob) List(ctx context.Context, prefix string, fn func(persist.BlobMeta) error) error {
	if err := blobkey.CheckPrefix(prefix); err != nil {
		return fmt.Errorf("file blob: list: %w", err)
	}
	start := b.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = b.path(prefix[:i])
	}
	// fnErr carries fn's error out of WalkDir untouched: fn returning
	// fs.SkipDir must not be taken as an instruction to the walk.
	var fnErr error
	errStop := errors.New("stop")
	err := filepath.WalkDir(start, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if isNotExist(err) {
				return nil // pruned by a concurrent Delete, or no such prefix
			}
			return err
		}
		if path == start {
			return nil // a file here is a key that is not a directory: nothing under it
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // a temporary file
		}
		rel, err := filepath.Rel(b.root, path)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if dirKey := key + "/"; !strings.HasPrefix(dirKey, prefix) && !strings.HasPrefix(prefix, dirKey) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if isNotExist(err) {
			return nil // deleted since the directory was read
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(persist.BlobMeta{Key: key, Size: info.Size(), Modified: info.ModTime()}); err != nil {
			fnErr = err
			return errStop
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("file blob: list %q: %w", prefix, err)
	}
	return nil
}

// Close does nothing: b holds no open files between calls.
func (b *Blob) Close() error { return nil }

// path maps a valid key to its file.
func (b *Blob) path(key string) string {
	return filepath.Join(b.root, filepath.FromSlash(key))
}

// createTemp creates a temporary file in dir, creating dir first. A
// concurrent Delete may prune dir between the two steps; then it retries.
func (b *Blob) createTemp(dir string) (*os.File, error) {
	var err error
	for range setAttempts {
		// Only ENOENT means "pruned meanwhile"; ENOTDIR (a key "a" exists and
		// this is "a/b") will not go away by retrying.
		if err = os.MkdirAll(dir, dirPerm); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if err == nil {
			var f *os.File
			if f, err = os.CreateTemp(dir, tempPrefix+"*"); err == nil {
				return f, nil
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
	}
	return nil, err
}

// prune removes dir and its parents, up to but not including the root, for
// as long as they are empty. Failing to remove one ends it: the directory
// is not empty (or a concurrent Set just filled it), which is fine.
func (b *Blob) prune(dir string) {
	for dir != b.root && strings.HasPrefix(dir, b.root) {
		if err := os.Remove(dir); err != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// removeStaleTemps deletes temporary files last modified before cutoff.
func (b *Blob) removeStaleTemps(ctx context.Context, cutoff time.Time) error {
	return filepath.WalkDir(b.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if isNotExist(err) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		info, err := d.Info()
		if isNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if info.ModTime().Before(cutoff) {
			if err := os.Remove(path); err != nil && !isNotExist(err) {
				return err
			}
		}
		return nil
	})
}

// writeSyncClose writes value to f, fsyncs and closes it.
func writeSyncClose(f *os.File, value []byte) error {
	_, err := f.Write(value)
	if err == nil {
		err = f.Chmod(filePerm) // CreateTemp makes 0600
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir fsyncs a directory, making the names in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// isNotExist reports whether err means a path does not exist, including
// ENOTDIR: a key "a/b" when "a" is a file.
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
