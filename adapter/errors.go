package adapter

import (
	"fmt"
)

// Error is a client-visible SQL error with its SQLSTATE.
type Error struct {
	Code    string
	Message string
	Detail_ string
	Hint_   string
	// Pos is the 1-based character position of the error in the query.
	Pos int
}

// Position returns the error's position in the query, or 0.
func (e *Error) Position() int { return e.Pos }

func (e *Error) Error() string { return e.Message }

// SQLState returns the SQLSTATE code.
func (e *Error) SQLState() string { return e.Code }

// Detail returns the DETAIL field.
func (e *Error) Detail() string { return e.Detail_ }

// Hint returns the HINT field.
func (e *Error) Hint() string { return e.Hint_ }

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
)

func errUnknownRelation(name string) *Error {
	return errorf(codeUndefinedTable, "unknown catalog item '%s'", name)
}

func errNotSupported(what string) *Error {
	return errorf(codeFeatureNotSupp, "%s not yet supported", what)
}

func errReadOnly(it *Item) *Error {
	return errorf(codeWrongObjectType, "cannot mutate %s '%s'", it.Kind, qualified(it.Name))
}

// qualified returns Materialize's fully qualified name of an item.
func qualified(name string) string { return "materialize.public." + name }
