package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/shardtail/shardtail/catalog"
	"github.com/shardtail/shardtail/persist"
)

// Error is a client-visible SQL error with its SQLSTATE. pgwire reads its
// optional fields through the Detail, Hint and Position methods.
type Error struct {
	Code    string
	Message string
	// Pos is the 1-based character position of the error in the query.
	Pos int

	detail string // the DETAIL field, or empty
	hint   string // the HINT field, or empty
	// historyLost marks an AS OF below the collection's since (HistoryLost).
	historyLost bool
}

// pgwire sends an error's optional fields through these methods (it
// asserts each interface on the error it is given): keep them in step.
var _ interface {
	SQLState() string
	Detail() string
	Hint() string
	Position() int
} = (*Error)(nil)

// Position returns the error's position in the query, or 0.
func (e *Error) Position() int { return e.Pos }

func (e *Error) Error() string { return e.Message }

// SQLState returns the SQLSTATE code.
func (e *Error) SQLState() string { return e.Code }

// Detail returns the DETAIL field.
func (e *Error) Detail() string { return e.detail }

// Hint returns the HINT field.
func (e *Error) Hint() string { return e.hint }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// SQLSTATE codes used by the adapter.
const (
	codeSyntax            = "42601"
	codeUndefinedTable    = "42P01"
	codeUndefinedColumn   = "42703"
	codeUndefinedObject   = "42704"
	codeDuplicateTable    = "42P07"
	codeDuplicateObject   = "42710"
	codeReservedName      = "42939"
	codeDuplicateCursor   = "42P03"
	codeInvalidCursor     = "34000"
	codeDatatypeMismatch  = "42804"
	codeWrongObjectType   = "42809"
	codeInsufficientPriv  = "42501"
	codeFeatureNotSupp    = "0A000"
	codeSystemError       = "58000"
	codeInvalidParamValue = "22023"
	codeNoActiveSQLTx     = "25P01"
	codeInvalidTxState    = "25000"
	codeInFailedTx        = "25P02"
	codeReadOnlyTx        = "25006"
	codeDependentObjects  = "2BP01"
	codeInternal          = "XX000"
	codeDataCorrupted     = "XX001"
	codeDataException     = "22000"
	codeOutOfMemory       = "53200"
	codeTooManyConns      = "53300"
	codeNotNullViolation  = "23502"
	codeUndefinedParam    = "42704"
	codeCantChangeRuntime = "55P02"
	codeQueryCanceled     = "57014"
	codeInvalidPassword   = "28P01"
	codeUndefinedFunction = "42883"
	codeCardinality       = "21000"
	codeProgramLimit      = "54000"
	codeSerialization     = "40001"
)

// errSerialization fails the COMMIT of a transaction whose UPDATE or
// DELETE read a table that another commit wrote since: applying it would
// lose that write, as PostgreSQL's SERIALIZABLE would.
var errSerialization = errorf(codeSerialization, "could not serialize access due to concurrent update")

// errWriteOnlyTx fails a SUBSCRIBE after a write in its transaction
// block, and errReadOnlyTx a write after a SUBSCRIBE: Materialize's
// transactions either read or write, and a subscribe could not show the
// block's writes, which wait for COMMIT.
var (
	errWriteOnlyTx = errorf(codeInvalidTxState, "transaction in write-only mode")
	errReadOnlyTx  = errorf(codeReadOnlyTx, "transaction in read-only mode")
)

func errUnknownRelation(name string) *Error {
	return errorf(codeUndefinedTable, "unknown catalog item '%s'", name)
}

func errReadOnly(it *catalog.Item) *Error {
	return errorf(codeWrongObjectType, "cannot mutate %s '%s'", it.Kind, qualified(it.Name))
}

// qualified returns Materialize's fully qualified name of an item.
func qualified(name string) string { return "materialize.public." + name }

// storageError gives a storage fault one SQLSTATE whatever the statement
// met it (SELECT, SUBSCRIBE on either path, INSERT, COPY, DDL):
//
//   - XX001 "data corrupted" for a part that is missing or does not decode,
//     with the part's key in DETAIL, and for shard or catalog state that
//     does not decode: reading again will not help;
//   - 58000 "shared storage unavailable" for a blob store or consensus that
//     failed or is unreachable: it may pass.
//
// Errors that already carry a SQLSTATE, end-of-stream and the caller's own
// cancellation pass through unchanged, and so do persist's other permanent
// errors (a dropped shard, an expired reader), which callers map with more
// context (mapPersistErr).
func storageError(err error) error {
	var coded interface{ SQLState() string }
	var part *persist.PartError
	switch {
	case err == nil, errors.As(err, &coded), errors.Is(err, io.EOF),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &part):
		return &Error{Code: codeDataCorrupted, Message: "data corrupted", detail: part.Error(),
			hint: "A part of the collection's data is gone or damaged in the blob store; restore it from a backup."}
	case errors.Is(err, persist.ErrCorruptState):
		return &Error{Code: codeDataCorrupted, Message: "data corrupted", detail: err.Error()}
	case !persist.IsPermanent(err):
		// The blob store or consensus failed (unreachable, timed out):
		// it may pass, unlike the errors above.
		return &Error{Code: codeSystemError, Message: fmt.Sprintf("shared storage unavailable: %v", err),
			hint: "Running subscribes continue when it returns; try again."}
	}
	return err
}
