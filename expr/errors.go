package expr

import (
	"errors"
	"fmt"
)

// SQLSTATE codes of the errors this package returns.
const (
	// CodeFeatureNotSupported: aggregates, window functions, subqueries,
	// array types and other syntax the parser accepts but expr does not
	// evaluate.
	CodeFeatureNotSupported = "0A000"
	// CodeSyntaxError: a type modifier on a type that takes none.
	CodeSyntaxError = "42601"
	// CodeUndefinedColumn: `column "x" does not exist`.
	CodeUndefinedColumn = "42703"
	// CodeAmbiguousColumn: `column reference "x" is ambiguous`.
	CodeAmbiguousColumn = "42702"
	// CodeUndefinedTable: `missing FROM-clause entry for table "t"`.
	CodeUndefinedTable = "42P01"
	// CodeUndefinedParameter: `there is no parameter $0`.
	CodeUndefinedParameter = "42P02"
	// CodeDatatypeMismatch: an argument of the wrong type where no operator
	// or function is involved (WHERE, AND, CASE arms).
	CodeDatatypeMismatch = "42804"
	// CodeUndefinedFunction: `operator does not exist: integer + text`,
	// `function foo(integer) does not exist`.
	CodeUndefinedFunction = "42883"
	// CodeAmbiguousFunction: `operator is not unique: unknown + unknown`.
	CodeAmbiguousFunction = "42725"
	// CodeCannotCoerce: `cannot cast type integer to date`.
	CodeCannotCoerce = "42846"
	// CodeUndefinedObject: `type "foo" does not exist`.
	CodeUndefinedObject = "42704"
	// CodeWrongObjectType: DISTINCT or * on a function that is not an
	// aggregate.
	CodeWrongObjectType = "42809"
	// CodeInvalidTextRepresentation: 'abc'::int.
	CodeInvalidTextRepresentation = "22P02"
	// CodeDivisionByZero: 1/0.
	CodeDivisionByZero = "22012"
	// CodeNumericValueOutOfRange: integer, float and numeric overflow.
	CodeNumericValueOutOfRange = "22003"
	// CodeDatetimeFieldOverflow: timestamp or interval arithmetic out of range.
	CodeDatetimeFieldOverflow = "22008"
	// CodeInvalidParameterValue: a bad unit name or function argument.
	CodeInvalidParameterValue = "22023"
	// CodeInvalidEscapeSequence: a LIKE pattern ending in a backslash.
	CodeInvalidEscapeSequence = "22025"
	// CodeInvalidRegularExpression: a malformed ~ pattern.
	CodeInvalidRegularExpression = "2201B"
	// CodeInvalidArgumentForPowerFunction: sqrt(-1), ln(0).
	CodeInvalidArgumentForPowerFunction = "2201F"
	// CodeInvalidDatetimeFormat: an interval that does not parse.
	CodeInvalidDatetimeFormat = "22007"
	// CodeInternal: a bug or a row that does not match the schema.
	CodeInternal = "XX000"
)

// Error is an error a client sees: a SQLSTATE and a message in Postgres'
// wording, with an optional hint. pgwire reports it through SQLState; the
// errors of pgrepr (invalid text input) are returned unchanged, and carry
// their own SQLState.
type Error struct {
	code string
	msg  string
	hint string
}

// Error returns the message alone, as Postgres prints it.
func (e *Error) Error() string { return e.msg }

// SQLState returns the five-character SQLSTATE code.
func (e *Error) SQLState() string { return e.code }

// Hint returns the HINT line, "" for none.
func (e *Error) Hint() string { return e.hint }

func errf(code, format string, args ...any) *Error {
	return &Error{code: code, msg: fmt.Sprintf(format, args...)}
}

// ErrNoTimestamp is the error of now(), current_timestamp and mz_now()
// evaluated without a query timestamp (EvalContext.Now is zero).
var ErrNoTimestamp = &Error{code: CodeFeatureNotSupported, msg: "now() is not available here: the query has no timestamp"}

// Errors shared by many operators, in Postgres' words.
var (
	errDivisionByZero = &Error{code: CodeDivisionByZero, msg: "division by zero"}
	errInt2Range      = &Error{code: CodeNumericValueOutOfRange, msg: "smallint out of range"}
	errInt4Range      = &Error{code: CodeNumericValueOutOfRange, msg: "integer out of range"}
	errInt8Range      = &Error{code: CodeNumericValueOutOfRange, msg: "bigint out of range"}
	errFloatOverflow  = &Error{code: CodeNumericValueOutOfRange, msg: "value out of range: overflow"}
	errFloatUnderflow = &Error{code: CodeNumericValueOutOfRange, msg: "value out of range: underflow"}
	errNumericRange   = &Error{code: CodeNumericValueOutOfRange, msg: "value overflows numeric format"}
	errTimestampRange = &Error{code: CodeDatetimeFieldOverflow, msg: "timestamp out of range"}
	errDateRange      = &Error{code: CodeDatetimeFieldOverflow, msg: "date out of range"}
	errIntervalRange  = &Error{code: CodeDatetimeFieldOverflow, msg: "interval out of range"}
	errMzTsRange      = &Error{code: CodeDatetimeFieldOverflow, msg: "mz_timestamp out of range"}
	errLikeEscape     = &Error{code: CodeInvalidEscapeSequence, msg: "LIKE pattern must not end with escape character"}
	errTooLarge       = &Error{code: "54000", msg: "requested length too large"} // repeat, lpad beyond maxStringBytes
)

// errOperator is 42883 `operator does not exist: integer + text`.
func errOperator(op string, l, r Type) *Error {
	var msg string
	if l == TypeInvalid {
		msg = fmt.Sprintf("operator does not exist: %s %s", op, r)
	} else {
		msg = fmt.Sprintf("operator does not exist: %s %s %s", l, op, r)
	}
	return &Error{code: CodeUndefinedFunction, msg: msg,
		hint: "No operator matches the given name and argument types. You might need to add explicit type casts."}
}

// errMismatch is 42804 `argument of WHERE must be type boolean, not type integer`.
func errMismatch(what string, want, got Type) *Error {
	return errf(CodeDatatypeMismatch, "argument of %s must be type %s, not type %s", what, want, got)
}

// errCannotCast is 42846 `cannot cast type integer to date`.
func errCannotCast(from, to Type) *Error {
	return errf(CodeCannotCoerce, "cannot cast type %s to %s", from, to)
}

// sqlStater is the behaviour pgwire matches errors on.
type sqlStater interface{ SQLState() string }

// sqlState returns err's SQLSTATE, or "" when it has none.
func sqlState(err error) string {
	var s sqlStater
	if errors.As(err, &s) {
		return s.SQLState()
	}
	return ""
}
