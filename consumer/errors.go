package consumer

import "errors"

// ErrNoOpeningProgress reports a stream whose first row is not a progress
// row: the subscribe was not issued WITH (PROGRESS), so the core cannot
// tell where the stream begins and must not trust any frontier in it.
var ErrNoOpeningProgress = errors.New("consumer: first row of the subscribe is not a progress row")

// ErrUnexpectedOpening reports an opening progress row at another time than
// the resume statement's AS OF: resuming there would leave a gap or repeat
// updates.
var ErrUnexpectedOpening = errors.New("consumer: opening progress row is not at the requested AS OF")

// ErrOutOfOrder reports a row below the frontier already reached (a data
// row under a progress row, or progress moving backwards): the server broke
// the SUBSCRIBE contract and the batch being built cannot be trusted.
var ErrOutOfOrder = errors.New("consumer: row below the frontier already reached")

// ErrFenced is returned by Checkpoint.Commit when the stored position is not
// the expected one: another worker moved it, so this one lost its place and
// must stop writing.
var ErrFenced = errors.New("consumer: checkpoint moved by another writer (fenced)")

// ErrHistoryLost reports a resume position below the collection's since:
// the updates between the checkpoint and the since are gone, so the target
// can only be rebuilt from a new snapshot.
var ErrHistoryLost = errors.New("consumer: resume position is no longer retained (history lost)")

// ErrDropped reports that a subscribed collection was dropped (42704).
var ErrDropped = errors.New("consumer: subscribed collection was dropped")

// ErrObjectReplaced reports that the name of a subscribed collection now
// refers to another object than the one recorded with the checkpoint (it was
// dropped and recreated).
var ErrObjectReplaced = errors.New("consumer: collection was replaced by another object under the same name")

// ErrRetriesExhausted wraps the last transient error once the retry budget
// is spent.
var ErrRetriesExhausted = errors.New("consumer: retries exhausted")

// ErrStalled wraps an error the consumer cannot classify: it stops rather
// than guess, and the caller reports it.
var ErrStalled = errors.New("consumer: stalled on an unclassified error")
