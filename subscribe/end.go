package subscribe

import (
	"context"
	"errors"
	"io"
)

// End reasons: why a subscription ended, as the statement log records it
// (mz_internal.mz_statement_execution_history's end_reason). Both paths end
// with the same errors, so one classification serves both.
const (
	// EndClientClosed: the client closed it (closed the cursor or the
	// portal, ended the transaction, disconnected).
	EndClientClosed = "client closed"
	// EndUpTo: progress reached UP TO.
	EndUpTo = "up to reached"
	// EndFellBehind: the client's backlog passed its budget (53200).
	EndFellBehind = "fell behind"
	// EndHistoryLost: the fast path detached the client and the shard no
	// longer retained the position it had reached (53200).
	EndHistoryLost = "history lost"
	// EndDropped: the collection was dropped (42704).
	EndDropped = "dropped relation"
	// EndCanceled: the statement was canceled (57014).
	EndCanceled = "canceled"
	// EndError: any other error (storage, result size).
	EndError = "error"
)

// EndReason classifies an error returned by Subscription.Next that ends
// the subscription. It reports false for an error that does not end it: a
// context ending, which the caller classifies (a cancel, a FETCH timeout,
// a disconnect).
func EndReason(err error) (string, bool) {
	var be *BufferError
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "", false
	case errors.Is(err, io.EOF):
		return EndUpTo, true
	case errors.As(err, &be) && be.HistoryLost:
		return EndHistoryLost, true
	case be != nil:
		return EndFellBehind, true
	case errors.Is(Dropped(err), ErrDropped):
		return EndDropped, true
	}
	return EndError, true
}

// Counters is implemented by subscriptions that can detach a client and
// resume it (the fast path): how often each happened so far. Safe from any
// goroutine.
type Counters interface {
	Detaches() int64
	Resumes() int64
}
