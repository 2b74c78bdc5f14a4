package persist

import "errors"

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
