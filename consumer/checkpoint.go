package consumer

import (
	"context"
	"slices"
	"sync"
)

// Position is what a checkpoint stores: how far the target holds the feed.
type Position struct {
	// Frontier is the upper of the last committed batch: the target holds
	// every update below it. Zero means nothing committed (start with a
	// snapshot).
	Frontier Frontier `json:"frontier"`
	// Generation counts re-snapshots; a target rebuilt from a new
	// snapshot after a history loss is a new generation.
	Generation int64 `json:"generation"`
	// Objects are the catalog ids of the sources, in Config.Sources
	// order, when known: a resume that finds another id under a name
	// reports ErrObjectReplaced.
	Objects []string `json:"objects,omitempty"`
}

// Equal reports whether p and q are the same position.
func (p Position) Equal(q Position) bool {
	return p.Frontier == q.Frontier && p.Generation == q.Generation && slices.Equal(p.Objects, q.Objects)
}

// Checkpoint stores a Position with compare-and-set semantics.
//
// Load returns the stored position, or the zero Position when none was ever
// committed. Commit replaces expected with next and fails with ErrFenced
// (wrapped) when the stored position is not expected: a stale worker that
// lost its place cannot overwrite a newer position, and a position never
// moves backwards through a correct caller. A Commit that returns another
// error may or may not have happened; the caller reloads before retrying.
//
// Guarantees depend on where the position lives relative to the data: in the
// target's own transaction (the PostgreSQL sink) a batch lands exactly once;
// anywhere else (a file, a table in shardtail) the data is written before the
// position, so a crash between the two replays the batch: at least once.
type Checkpoint interface {
	Load(ctx context.Context) (Position, error)
	Commit(ctx context.Context, expected, next Position) error
}

// MemoryCheckpoint is a Checkpoint in memory, for tests and for consumers
// that always start from a snapshot. The zero value is ready to use.
type MemoryCheckpoint struct {
	mu  sync.Mutex
	pos Position
}

// Load returns the stored position.
func (m *MemoryCheckpoint) Load(context.Context) (Position, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return clonePosition(m.pos), nil
}

// Commit sets the position to next if it is expected.
func (m *MemoryCheckpoint) Commit(_ context.Context, expected, next Position) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.pos.Equal(expected) {
		return fenced(m.pos, expected)
	}
	m.pos = clonePosition(next)
	return nil
}

func clonePosition(p Position) Position {
	p.Objects = slices.Clone(p.Objects)
	return p
}
