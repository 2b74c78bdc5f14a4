package pgrepr

import (
	"errors"
	"fmt"
	"strconv"
)

// The error families. Every error this package returns is an *Error that
// errors.Is matches against exactly one of these, so that callers can branch
// on the kind of failure without parsing messages or SQLSTATEs.
var (
	// ErrSyntax is the family of malformed text input (22P02 invalid input
	// syntax, 22007 invalid datetime format, 22023 bad hex data).
	ErrSyntax = errors.New("pgrepr: invalid input syntax")

	// ErrOutOfRange is the family of well-formed input whose value the type
	// cannot hold (22003 numeric out of range, 22008 datetime field overflow,
	// 22009 time zone displacement out of range).
	ErrOutOfRange = errors.New("pgrepr: value out of range")

	// ErrBinary is the family of malformed binary-format values (22P03).
	ErrBinary = errors.New("pgrepr: invalid binary representation")

	// ErrEncoding is the family of text that is not valid UTF-8 or contains a
	// NUL byte (22021), which Postgres never stores in text.
	ErrEncoding = errors.New("pgrepr: invalid byte sequence")

	// ErrCopy is the family of malformed COPY data streams (22P04
	// bad_copy_file_format) and invalid COPY options (22023, 0A000).
	ErrCopy = errors.New("pgrepr: bad COPY data")
)

// Error is a conversion error carrying what Postgres would report: a
// SQLSTATE, the primary message in Postgres' exact wording, and optional
// detail, hint and context ("where") lines. pgwire sends it as an
// ErrorResponse through its SQLState method.
type Error struct {
	code   string
	msg    string
	detail string
	hint   string
	where  string
	family error
}

// Error returns the primary message, as Postgres words it.
func (e *Error) Error() string { return e.msg }

// SQLState returns the five-character SQLSTATE code.
func (e *Error) SQLState() string { return e.code }

// Detail returns the optional DETAIL line ("" for none).
func (e *Error) Detail() string { return e.detail }

// Hint returns the optional HINT line ("" for none).
func (e *Error) Hint() string { return e.hint }

// Where returns the optional CONTEXT line ("" for none), such as the COPY
// line and column an input error came from.
func (e *Error) Where() string { return e.where }

// Unwrap returns the error's family (ErrSyntax, ErrOutOfRange, ...).
func (e *Error) Unwrap() error { return e.family }

func newError(family error, code, msg string) *Error {
	return &Error{code: code, msg: msg, family: family}
}

func (e *Error) withDetail(d string) *Error { e.detail = d; return e }
func (e *Error) withHint(h string) *Error   { e.hint = h; return e }

// quoteInput quotes user input the way Postgres' error messages do: plain
// double quotes around the raw text, no escaping. Go's %q would escape
// non-ASCII and control characters and no longer match Postgres' text.
func quoteInput(s string) string { return `"` + s + `"` }

// errSyntax is 22P02 "invalid input syntax for type <typ>: "<s>"".
func errSyntax(typ, s string) *Error {
	return newError(ErrSyntax, "22P02", "invalid input syntax for type "+typ+": "+quoteInput(s))
}

// errIntRange is 22003 "value "<s>" is out of range for type <typ>".
func errIntRange(typ, s string) *Error {
	return newError(ErrOutOfRange, "22003", "value "+quoteInput(s)+" is out of range for type "+typ)
}

// errFloatRange is 22003 ""<s>" is out of range for type <typ>" (float
// input words it differently from integer input).
func errFloatRange(typ, s string) *Error {
	return newError(ErrOutOfRange, "22003", quoteInput(s)+" is out of range for type "+typ)
}

// errNumericOverflow is 22003 "value overflows numeric format".
func errNumericOverflow() *Error {
	return newError(ErrOutOfRange, "22003", "value overflows numeric format")
}

// errDatetimeSyntax is 22007 "invalid input syntax for type <typ>: "<s>"".
func errDatetimeSyntax(typ, s string) *Error {
	return newError(ErrSyntax, "22007", "invalid input syntax for type "+typ+": "+quoteInput(s))
}

// errDatetimeField is 22008 "date/time field value out of range: "<s>"".
func errDatetimeField(s string) *Error {
	return newError(ErrOutOfRange, "22008", "date/time field value out of range: "+quoteInput(s))
}

// errDatetimeRange is 22008 "<what> out of range: "<s>"" (what is
// "timestamp" or "date").
func errDatetimeRange(what, s string) *Error {
	return newError(ErrOutOfRange, "22008", what+" out of range: "+quoteInput(s))
}

// errTZDisplacement is 22009 "time zone displacement out of range: "<s>"".
func errTZDisplacement(s string) *Error {
	return newError(ErrOutOfRange, "22009", "time zone displacement out of range: "+quoteInput(s))
}

// errJSON is 22P02 "invalid input syntax for type json" with a detail that
// says which token was wrong, as Postgres' JSON parser reports it.
func errJSON(detail string) *Error {
	return newError(ErrSyntax, "22P02", "invalid input syntax for type json").withDetail(detail)
}

// errEncoding is 22021 for a byte sequence that is not valid UTF-8 (or NUL).
func errEncoding(b []byte) *Error {
	msg := "invalid byte sequence for encoding \"UTF8\":"
	for _, c := range b {
		msg += fmt.Sprintf(" 0x%02x", c)
	}
	return newError(ErrEncoding, "22021", msg)
}

// errBinary is 22P03 for a malformed binary value.
func errBinary(format string, args ...any) *Error {
	return newError(ErrBinary, "22P03", fmt.Sprintf(format, args...))
}

// errBinaryLength is 22P03 for a fixed-width binary value of the wrong size.
func errBinaryLength(typ string, want, got int) *Error {
	return errBinary("incorrect binary data format for type %s: expected %d bytes, got %d", typ, want, got)
}

// errCopy is 22P04 bad_copy_file_format.
func errCopy(format string, args ...any) *Error {
	return newError(ErrCopy, "22P04", fmt.Sprintf(format, args...))
}

// errCopyOption is an invalid COPY option (code 22023 or 0A000, as Postgres
// uses them).
func errCopyOption(code, msg string) *Error {
	return newError(ErrCopy, code, msg)
}

// withWhere returns a copy of err (an *Error, or any error wrapped into one)
// with a CONTEXT line.
func withWhere(err error, where string) error {
	var pe *Error
	if errors.As(err, &pe) {
		c := *pe
		c.where = where
		return &c
	}
	// Another package's error keeps its SQLSTATE (the client's CopyFail
	// or disconnect, from the reader), else it is internal.
	code := "XX000"
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) {
		code = coded.SQLState()
	}
	return &Error{code: code, msg: err.Error(), where: where, family: err}
}

// copyContext formats the CONTEXT line of a COPY FROM error the way
// Postgres does: "COPY t, line 3", to which the caller appends the raw line
// or the column ("COPY t, line 3, column b: "x"").
func copyContext(table string, line int) string {
	s := "COPY"
	if table != "" {
		s += " " + table
	}
	return s + ", line " + strconv.Itoa(line)
}
