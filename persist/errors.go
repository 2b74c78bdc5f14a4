package persist

import (
	"errors"
	"fmt"
	"io"
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

// PartError is returned by reads when a part that the shard's state
// references is missing from blob or does not decode (a failed checksum, a
// truncated or foreign object): the shard's data is corrupt. Key names the
// part, for the operator. errors.Is(err, ErrCorruptState) holds, so
// IsPermanent does too: reading again will not help.
type PartError struct {
	Key string
	// Err is ErrNotFound for a missing part, or the decoder's error.
	Err error
}

func (e *PartError) Error() string {
	if errors.Is(e.Err, ErrNotFound) {
		return fmt.Sprintf("part %s referenced by state is missing", e.Key)
	}
	return fmt.Sprintf("decode part %s: %v", e.Key, e.Err)
}

// Unwrap makes errors.Is hold for ErrCorruptState and for Err's chain.
func (e *PartError) Unwrap() []error { return []error{ErrCorruptState, e.Err} }

// notEOF returns err, unless its chain holds io.EOF: then an error with the
// same message and classification (errors.Is and errors.As see through it,
// IsPermanent and IsIndeterminate hold as for err) for which errors.Is(e,
// io.EOF) is false. Reads end with io.EOF (Cursor.Next), and their callers
// stop at errors.Is(err, io.EOF); a storage failure can wrap io.EOF — an
// HTTP GET whose connection closed before the response fails with
// `Get "...": EOF` — and would read as the end of the data: a snapshot
// ending early, a SELECT or a subscribe's snapshot missing rows.
func notEOF(err error) error {
	if err == nil || !errors.Is(err, io.EOF) {
		return err
	}
	return &eofHidden{err: err}
}

// eofHidden is a failure whose chain holds io.EOF, hidden from errors.Is
// (see notEOF).
type eofHidden struct{ err error }

func (e *eofHidden) Error() string { return e.err.Error() }

// Is reports what err's chain matches, io.EOF aside.
func (e *eofHidden) Is(target error) bool { return target != io.EOF && errors.Is(e.err, target) }

// As finds a target in err's chain (a *PartError, a *SinceError).
func (e *eofHidden) As(target any) bool { return errors.As(e.err, target) }
