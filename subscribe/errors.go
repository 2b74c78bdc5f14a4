package subscribe

import (
	"errors"
	"fmt"

	"github.com/shardtail/shardtail/persist"
)

// ErrDropped ends a subscription whose collection was dropped; the session
// reports it with the relation's name (42704).
var ErrDropped = errors.New("subscribed collection was dropped")

// BufferError ends a subscription whose client fell behind. It is the one
// history-loss error of both paths: on the fast path the subscriber was
// detached over its budget and the shard no longer retains the position
// it had reached; on the dataflow path, whose private reader holds
// history, the backlog itself passed the budget.
type BufferError struct {
	// Buffered is the backlog that passed the budget; Max is the budget.
	Buffered, Max int64
	// HistoryLost reports the fast path's case: the subscriber was
	// detached and the shard no longer retains its position. The client
	// sees the same error; the statement log tells the two apart.
	HistoryLost bool
}

func (e *BufferError) Error() string {
	return fmt.Sprintf("SUBSCRIBE fell behind: the client did not read results fast enough, so its backlog reached %d bytes, exceeding the %d byte budget", e.Buffered, e.Max)
}

// SQLState is 53200 (out_of_memory), as Materialize reports it.
func (e *BufferError) SQLState() string { return "53200" }

// Dropped returns ErrDropped for a read of a tombstoned shard and err
// otherwise: a collection dropped under a running subscription ends it the
// same way on both paths.
func Dropped(err error) error {
	if errors.Is(err, persist.ErrShardTombstoned) {
		return ErrDropped
	}
	return err
}
