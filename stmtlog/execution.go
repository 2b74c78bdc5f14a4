package stmtlog

import (
	"errors"
	"slices"
	"sync"
)

// Execution is a statement's record while it runs. Its methods are safe
// for concurrent use, and do nothing on a nil *Execution (a statement not
// sampled), so callers need no checks.
type Execution struct {
	log *Log

	mu       sync.Mutex
	rec      Record // mu
	refs     int    // mu: the record is written when it drops to 0
	finished bool   // mu: an outcome was set
	// handedOff: a holder (a cursor) decides the outcome; the statement's
	// own Finish no longer does.
	handedOff bool // mu
}

// Hold takes another reference, for a part of the statement that outlives
// it (a subscription): the record is written once every reference is
// released. It returns e.
func (e *Execution) Hold() *Execution {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	e.refs++
	e.mu.Unlock()
	return e
}

// Handoff takes a reference for a holder that decides the outcome (a
// cursor, whose DECLARE completes before its subscription ends): from now
// on Finish is ignored and only End sets the outcome. It returns e.
func (e *Execution) Handoff() *Execution {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	e.refs++
	e.handedOff = true
	e.mu.Unlock()
	return e
}

// Release drops a reference; the last one finishes the record (as a
// success unless an outcome was set) and hands it to the log.
func (e *Execution) Release() {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.refs--
	if e.refs != 0 {
		e.mu.Unlock()
		return
	}
	if !e.finished {
		e.rec.Status, e.finished = StatusSuccess, true
	}
	e.rec.FinishedAt = e.log.cfg.Now()
	rec := e.rec
	e.mu.Unlock()
	e.log.add(rec)
}

// Finish sets the statement's outcome, unless it was set already or handed
// off: the first outcome set wins, since the part closest to the cause (a
// subscription's end) sets it first.
func (e *Execution) Finish(status, message string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.handedOff {
		e.finish(status, message)
	}
}

// End sets the outcome as a holder (a subscription) sees it, unless it was
// set already.
func (e *Execution) End(status, message string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.finish(status, message)
}

// Finished reports whether an outcome was set (false for nil).
func (e *Execution) Finished() bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.finished
}

// HandedOff reports whether a holder decides the outcome (false for nil).
func (e *Execution) HandedOff() bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.handedOff
}

// finish sets the outcome unless set. e.mu must be held.
func (e *Execution) finish(status, message string) {
	if !e.finished {
		e.rec.Status, e.rec.ErrorMessage, e.finished = status, message, true
	}
}

// AddResult counts rows and wire bytes returned to the client.
func (e *Execution) AddResult(rows, bytes int64) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rec.Returned = true
	e.rec.RowsReturned += rows
	e.rec.ResultSize += bytes
}

// SetStrategy records the execution strategy of a query.
func (e *Execution) SetStrategy(strategy string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rec.ExecutionStrategy = strategy
}

// StartSubscribe records that the statement's subscription started on
// path, reading collection from asOf.
func (e *Execution) StartSubscribe(path, collection string, asOf uint64) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rec.Subscribe = &Subscribe{Path: path, Collection: collection, AsOf: asOf, Frontier: asOf}
}

// EndSubscribe records how the statement's subscription ended.
func (e *Execution) EndSubscribe(reason string, frontier uint64, detaches, resumes int64) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if sub := e.rec.Subscribe; sub != nil {
		sub.EndReason, sub.Frontier, sub.Detaches, sub.Resumes = reason, frontier, detaches, resumes
	}
}

// Outcome is the status and message of a statement that ended with err:
// success for nil, canceled for a 57014, error otherwise. A disconnect
// (aborted) is the caller's to tell, from its context.
func Outcome(err error) (status, message string) {
	if err == nil {
		return StatusSuccess, ""
	}
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) && coded.SQLState() == "57014" {
		return StatusCanceled, err.Error()
	}
	return StatusError, err.Error()
}

// sortRecords orders records by when they began.
func sortRecords(rs []Record) {
	slices.SortStableFunc(rs, func(a, b Record) int { return a.BeganAt.Compare(b.BeganAt) })
}
