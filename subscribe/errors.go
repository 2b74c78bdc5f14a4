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

// The DETAIL of the two 53200 errors of a subscribe that fell behind.
// Both share Materialize's code and message; the detail is the contract a
// client matches (by its prefix up to the colon) to tell a resumable
// condition from a fatal one. DetailHistoryLost also marks an AS OF below
// the collection's since (XX000), which is the same condition met at the
// start of a resume.
const (
	// DetailFellBehind: the client's position is still retained, so it
	// can resubscribe AS OF its last progress minus one without a gap.
	DetailFellBehind = "fell behind: the position is still retained; resubscribe AS OF the last progress minus one"
	// DetailHistoryLost: the position is below the collection's since;
	// only a new snapshot can continue.
	DetailHistoryLost = "history lost: the position is below the collection's since; only a new snapshot can continue"
)

// BufferError ends a subscription whose client fell behind, on both paths:
// on the fast path the subscriber was detached over its budget and the
// shard no longer retains the position it had reached (HistoryLost); on the
// dataflow path, whose private reader holds history, the backlog itself
// passed the budget and the position is still retained.
type BufferError struct {
	// Buffered is the backlog that passed the budget; Max is the budget.
	Buffered, Max int64
	// HistoryLost reports that the client's position is no longer
	// retained, so resuming from it is impossible.
	HistoryLost bool
}

func (e *BufferError) Error() string {
	return fmt.Sprintf("SUBSCRIBE fell behind: the client did not read results fast enough, so its backlog reached %d bytes, exceeding the %d byte budget", e.Buffered, e.Max)
}

// SQLState is 53200 (out_of_memory), as Materialize reports it.
func (e *BufferError) SQLState() string { return "53200" }

// Detail tells the resumable case from history loss (DetailFellBehind,
// DetailHistoryLost); pgwire sends it as the DETAIL field.
func (e *BufferError) Detail() string {
	if e.HistoryLost {
		return DetailHistoryLost
	}
	return DetailFellBehind
}

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

// Detail is DetailFellBehind: the position is still retained, so a client
// resumes from its last progress.
func (e *MemoryBudgetError) Detail() string { return DetailFellBehind }

// Dropped returns ErrDropped for a read of a tombstoned shard and err
// otherwise: a collection dropped under a running subscription ends it the
// same way on both paths.
func Dropped(err error) error {
	if errors.Is(err, persist.ErrShardTombstoned) {
		return ErrDropped
	}
	return err
}
