package persist

import (
	"context"
	"fmt"
	"time"
)

// SeqNo is the version number of one entry in a Consensus log. The first
// version of a key is SeqNo 1 and each later version is its predecessor + 1.
// Implementations restrict SeqNos to [0, math.MaxInt64] so that SQL backends
// can store them in a bigint.
type SeqNo uint64

// String renders a SeqNo the way persist logs and blob keys show it: v<n>.
func (s SeqNo) String() string { return fmt.Sprintf("v%d", uint64(s)) }

// VersionedData is one entry of a Consensus log: the bytes stored at SeqNo.
type VersionedData struct {
	SeqNo SeqNo
	Data  []byte
}

// Consensus is a linearizable log of versioned values per key. persist keeps
// each shard's state (as diffs) in one key of it, and the catalog in another.
//
// Contract, pinned by persisttest.TestConsensus:
//   - Every operation is linearizable.
//   - Head returns (nil, nil) for a key with no versions.
//   - CompareAndSet writes new iff the key's current head SeqNo equals
//     *expected (or the key has no versions and expected is nil) and
//     new.SeqNo > that head. It returns (false, nil) on an expectation
//     mismatch, and never writes in that case.
//   - Scan returns up to limit versions with SeqNo >= from in ascending
//     order; an empty slice if there are none.
//   - Truncate deletes every version with SeqNo < seqno and returns how many
//     it deleted. It is an error (ErrTruncateBeyondHead) if seqno is greater
//     than the head or the key has no versions; the head is never deleted.
//   - Errors are classified: errors.Is(err, ErrIndeterminate) means the
//     operation may have taken effect (e.g. a timeout after sending a CAS);
//     any other error means it definitely did not. Use IsIndeterminate.
type Consensus interface {
	Head(ctx context.Context, key string) (*VersionedData, error)
	CompareAndSet(ctx context.Context, key string, expected *SeqNo, new VersionedData) (bool, error)
	Scan(ctx context.Context, key string, from SeqNo, limit int) ([]VersionedData, error)
	Truncate(ctx context.Context, key string, seqno SeqNo) (int, error)
	// ListKeys returns every key that has ever been written and not fully
	// removed, in no particular order.
	ListKeys(ctx context.Context) ([]string, error)
	// Close releases the backend's resources.
	Close() error
}

// BlobMeta describes one object returned by Blob.List.
type BlobMeta struct {
	Key  string
	Size int64
	// Modified is when the object was last Set, by the store's clock (a
	// file's mtime, S3's LastModified, to the second). The sweep of orphaned
	// blobs compares it with a grace period, so it must never be later than
	// the Set really was by more than the clocks' skew.
	Modified time.Time
}

// Blob is a key-value store of immutable objects; in production an object
// store such as S3. persist writes each key at most once with given content
// ("write-once, modify-never"), so Set never needs to be read-modify-write.
//
// Contract, pinned by persisttest.TestBlob:
//   - Get returns (nil, ErrNotFound) — matched with errors.Is — for a
//     missing key.
//   - Set is atomic: a concurrent or later Get sees the old value or the
//     whole new one, never a part; a crash during Set leaves the old value
//     (or no value). Set of the same key with the same bytes is idempotent.
//   - Delete of a missing key is not an error; it reports whether the key
//     existed.
//   - List calls fn for every key with the prefix, in no particular order,
//     with its size and a non-zero modification time no earlier than the
//     start of the Set that wrote it (minus a store's rounding to the
//     second).
//   - Every operation is linearizable: a Get after a Set returned sees it.
type Blob interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Set(ctx context.Context, key string, value []byte) error
	Delete(ctx context.Context, key string) (existed bool, err error)
	List(ctx context.Context, prefix string, fn func(BlobMeta) error) error
	// Close releases the backend's resources.
	Close() error
}

// BlobLender is implemented by a Blob that can lend a value's bytes
// instead of copying them out (the file blob maps its file read-only):
// reading a part then costs the pages its decoder touches, not an
// allocation and a copy of the whole part before its first row. Lend
// fails as Get does (ErrNotFound for a missing key). The bytes stay valid,
// and must not be modified, until release is called; release must be
// called exactly once, after the last use of the bytes. Parts are read
// this way (decoded updates never alias a part's bytes); Get remains the
// way to read a value for keeps.
type BlobLender interface {
	Lend(ctx context.Context, key string) (value []byte, release func(), err error)
}
