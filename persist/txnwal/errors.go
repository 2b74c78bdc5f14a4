package txnwal

import (
	"errors"
	"fmt"
)

// ErrNotRegistered is returned by a commit that writes a data shard the
// txns shard does not know (never registered, or forgotten by a DROP).
var ErrNotRegistered = errors.New("data shard not registered in the txns shard")

// ErrConflict is returned by a commit whose read-modify-write read a data
// shard that another commit wrote since: the caller reads again.
var ErrConflict = errors.New("data shard written since it was read")

// ErrCorruptState is returned when the txns shard's stored state cannot
// be decoded or breaks its invariants.
var ErrCorruptState = errors.New("corrupt txns shard state")

// ErrClosed is returned by operations on a closed Txns.
var ErrClosed = errors.New("txns closed")

// errNoOp is returned by a transition that would change nothing.
var errNoOp = errors.New("no-op transition")

// TimestampError is a commit, registration or tick at a time the txns
// shard's progress has passed: another commit came first. The caller
// retries at a time at or above Progress.
type TimestampError struct {
	TS, Progress uint64
}

func (e *TimestampError) Error() string {
	return fmt.Sprintf("txns: time %d below progress %d", e.TS, e.Progress)
}
