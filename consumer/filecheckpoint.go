package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// FileCheckpoint is a Checkpoint in a JSON file, replaced atomically
// (write to a temporary file, fsync, rename, fsync the directory). It gives
// at least once: the data is written before the position. The
// compare-and-set holds between the goroutines of one process; two
// processes on one file are not fenced (use a database checkpoint for that).
type FileCheckpoint struct {
	// Path is the file; its directory must exist.
	Path string

	mu sync.Mutex
}

// Load reads the position; a missing file is the zero Position.
func (f *FileCheckpoint) Load(context.Context) (Position, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.load()
}

func (f *FileCheckpoint) load() (Position, error) {
	data, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return Position{}, nil
	}
	if err != nil {
		return Position{}, fmt.Errorf("read checkpoint: %w", err)
	}
	var p Position
	if err := json.Unmarshal(data, &p); err != nil {
		return Position{}, fmt.Errorf("decode checkpoint %s: %w", f.Path, err)
	}
	return p, nil
}

// Commit writes next if the file holds expected.
func (f *FileCheckpoint) Commit(_ context.Context, expected, next Position) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, err := f.load()
	if err != nil {
		return err
	}
	if !cur.Equal(expected) {
		return fenced(cur, expected)
	}
	data, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	dir := filepath.Dir(f.Path)
	tmp, err := os.CreateTemp(dir, filepath.Base(f.Path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return fmt.Errorf("replace checkpoint: %w", err)
	}
	// The rename is durable only once the directory is synced.
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync checkpoint dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync checkpoint dir: %w", err)
	}
	return nil
}

func fenced(stored, expected Position) error {
	return fmt.Errorf("%w: stored frontier %d generation %d, expected frontier %d generation %d",
		ErrFenced, stored.Frontier, stored.Generation, expected.Frontier, expected.Generation)
}
