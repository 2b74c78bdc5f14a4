package subscribe

import (
	"errors"
	"fmt"

	"github.com/shardtail/shardtail/membudget"
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
}

func (e *BufferError) Error() string {
	return fmt.Sprintf("SUBSCRIBE fell behind: the client did not read results fast enough, so its backlog reached %d bytes, exceeding the %d byte budget", e.Buffered, e.Max)
}

// SQLState is 53200 (out_of_memory), as Materialize reports it.
func (e *BufferError) SQLState() string { return "53200" }

// MemoryBudgetError ends a dataflow-path subscription that the process's
// memory budget (--memory-budget) chose as its last resort: the process
// stayed over the budget after the fast path shed what it could, and this
// subscription held the most. The dataflow path has no detach; the client
// resubscribes AS OF the last progress it received.
type MemoryBudgetError struct {
	// Held is what the subscription held (results not yet read, read
	// ahead, held back to be ordered); Limit is the budget.
	Held, Limit int64
}

func (e *MemoryBudgetError) Error() string {
	return fmt.Sprintf("SUBSCRIBE ended: the server is over its memory budget of %s (--memory-budget) and this subscribe held the most memory (%d bytes of results not yet read); resubscribe AS OF the last progress received",
		membudget.FormatSize(e.Limit), e.Held)
}

// SQLState is 53200 (out_of_memory).
func (e *MemoryBudgetError) SQLState() string { return "53200" }

// Dropped returns ErrDropped for a read of a tombstoned shard and err
// otherwise: a collection dropped under a running subscription ends it the
// same way on both paths.
func Dropped(err error) error {
	if errors.Is(err, persist.ErrShardTombstoned) {
		return ErrDropped
	}
	return err
}
