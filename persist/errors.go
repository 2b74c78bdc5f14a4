package persist

import (
	"errors"
	"fmt"
)

// ErrNotFound is returned by Blob.Get for a key that does not exist.
var ErrNotFound = errors.New("not found")

// ErrIndeterminate marks a location error after which the operation may or
// may not have taken effect (a timeout, a lost connection after sending).
// Backends wrap it: fmt.Errorf("%w: cas: %v", persist.ErrIndeterminate, err).
// Callers retry idempotently (see Writer.CompareAndAppend's write token).
var ErrIndeterminate = errors.New("indeterminate")

// ErrTruncateBeyondHead is returned by Consensus.Truncate when asked to
// truncate past the current head, or on a key with no versions.
var ErrTruncateBeyondHead = errors.New("truncate beyond head")

// IsIndeterminate reports whether err means the operation may have taken
// effect. Every other error is determinate: it definitely did not.
func IsIndeterminate(err error) bool { return errors.Is(err, ErrIndeterminate) }

// IsPermanent reports whether a read that failed with err cannot succeed by
// trying again: the shard or the reader is gone, the time is compacted
// away, a part is missing or the state is corrupt. Other errors (a storage
// outage, a timeout) may pass, and long-lived readers retry them; a caller
// whose own context ended knows to stop without asking.
func IsPermanent(err error) bool {
	for _, p := range []error{ErrShardTombstoned, ErrReaderExpired, ErrSinceAdvanced, ErrClosed, ErrCorruptState,
		ErrShardNotFound, ErrNotFound} {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}

// ErrShardTombstoned is returned for writes to and reads of a dropped shard.
var ErrShardTombstoned = errors.New("shard is tombstoned")

// ErrReaderExpired is returned when a reader's lease ran out and it was
// removed from the shard's state; its holds are gone.
var ErrReaderExpired = errors.New("reader lease expired")

// ErrSinceAdvanced is returned by a read at a time the shard has compacted
// past: as_of < since. Wrapped with the times in a *SinceError.
var ErrSinceAdvanced = errors.New("as_of is before the shard's since")

// ErrClosed is returned by operations on a closed Client, Reader or Writer.
var ErrClosed = errors.New("closed")

// ErrUploadExpired is returned by an append (and kept by compaction and
// rollups) whose blobs were uploaded more than half of Config.OrphanGrace
// before the commit: by then the sweep may take them for orphans, so they
// must not be committed. The error also matches ErrIndeterminate, because an
// earlier attempt of the same append may have committed; retrying the call
// is safe.
var ErrUploadExpired = errors.New("uploaded blobs are too old to commit")

// errPartMissing marks a part that state referenced but blob no longer
// holds (always with ErrCorruptState, unless the shard was finalized).
var errPartMissing = errors.New("part is missing")

// errMergeStale means a compaction's inputs changed before it committed; the
// output is discarded.
var errMergeStale = errors.New("merge inputs changed")

// UpperMismatchError is returned by CompareAndAppend when the shard's upper
// is not the expected one. Current is the shard's upper.
type UpperMismatchError struct {
	Expected, Current uint64
}

func (e *UpperMismatchError) Error() string {
	return fmt.Sprintf("upper mismatch: expected %d, shard upper is %d", e.Expected, e.Current)
}

// SinceError is returned by reads at a time before the shard's since.
type SinceError struct {
	AsOf, Since uint64
}

func (e *SinceError) Error() string {
	return fmt.Sprintf("as_of %d is before since %d", e.AsOf, e.Since)
}

// Unwrap makes errors.Is(err, ErrSinceAdvanced) hold.
func (e *SinceError) Unwrap() error { return ErrSinceAdvanced }

// ErrCorruptState means the shard's state in consensus or a rollup does not
// decode or does not follow from its predecessor.
var ErrCorruptState = errors.New("corrupt shard state")

// ErrShardNotFound is returned when a shard has no state in consensus.
var ErrShardNotFound = errors.New("shard not found")
