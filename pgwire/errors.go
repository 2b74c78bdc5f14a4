package pgwire

import (
	"errors"
	"fmt"
)

// Error is an error with a SQLSTATE. pgwire sends any error that has a
// SQLState method as an ErrorResponse with that code; Error is the one pgwire
// itself uses and that backends may use too.
type Error struct {
	code     string
	msg      string
	detail   string
	hint     string
	position int
	wrapped  error
}

// Errorf returns an Error with the SQLSTATE code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{code: code, msg: fmt.Sprintf(format, args...)}
}

// Error returns the message the client sees.
func (e *Error) Error() string { return e.msg }

// SQLState returns the five-character SQLSTATE code.
func (e *Error) SQLState() string { return e.code }

// Detail returns the optional detail line ("" for none).
func (e *Error) Detail() string { return e.detail }

// Hint returns the optional hint line ("" for none).
func (e *Error) Hint() string { return e.hint }

// Position returns the 1-based character position of the error in the query
// text, or 0 for none.
func (e *Error) Position() int { return e.position }

// Unwrap returns the sentinel the error belongs to, if any, so that
// errors.Is(err, ErrProtocolViolation) works for every protocol violation.
func (e *Error) Unwrap() error { return e.wrapped }

// WithDetail returns a copy of e with a detail line.
func (e *Error) WithDetail(detail string) *Error {
	c := *e
	c.detail = detail
	return &c
}

// WithHint returns a copy of e with a hint line.
func (e *Error) WithHint(hint string) *Error {
	c := *e
	c.hint = hint
	return &c
}

// WithPosition returns a copy of e pointing at the 1-based character position
// pos of the query text.
func (e *Error) WithPosition(pos int) *Error {
	c := *e
	c.position = pos
	return &c
}

// in returns a copy of e that errors.Is matches against the sentinel base.
func (e *Error) in(base error) *Error {
	c := *e
	c.wrapped = base
	return &c
}

var (
	// ErrQueryCanceled is the cause of a statement context canceled by a
	// CancelRequest; the client sees 57014 "canceling statement due to user
	// request" whatever error the session returns after the cancel.
	ErrQueryCanceled = Errorf("57014", "canceling statement due to user request")

	// ErrServerClosed is returned by Serve after Close, and is the cause of the
	// connection contexts that Close cancels; those clients see FATAL 57P01.
	ErrServerClosed = Errorf("57P01", "terminating connection due to administrator command")

	// ErrClientGone is the cause of a connection context canceled because the
	// client disconnected (or a write to it failed).
	ErrClientGone = Errorf("08006", "client disconnected")

	// ErrUnknownRole is what Backend.Role returns (possibly wrapped) when the
	// user does not exist. pgwire then fails authentication exactly like a bad
	// password, so that clients cannot probe which roles exist.
	ErrUnknownRole = errors.New("pgwire: unknown role")

	// ErrAuthFailed is the family of authentication failures (28P01
	// "password authentication failed for user ..."); match with errors.Is.
	ErrAuthFailed = Errorf("28P01", "password authentication failed")

	// ErrProtocolViolation is the family of errors for a client that breaks
	// the protocol (08P01); match with errors.Is.
	ErrProtocolViolation = Errorf("08P01", "protocol violation")

	// ErrMessageTooLarge is the family of protocol violations for a message
	// over its size limit; the connection is closed.
	ErrMessageTooLarge = Errorf("08P01", "message too large").in(ErrProtocolViolation)

	// ErrTooManyConnections is the FATAL 53300 a connection gets, after its
	// startup message, when the server already holds Config.MaxConnections
	// connections: Postgres's answer past max_connections.
	ErrTooManyConnections = Errorf("53300", "sorry, too many clients already")

	// ErrAuthThrottled is the FATAL an authentication attempt gets when the
	// wait AuthThrottle imposes on its address would outlast AuthTimeout.
	ErrAuthThrottled = Errorf("28000", "too many failed authentication attempts from this address; try again later")

	// ErrCopyFailed is the family of errors a COPY FROM STDIN reader returns
	// when the client sends CopyFail (57014 "COPY from stdin failed: <msg>").
	ErrCopyFailed = Errorf("57014", "COPY from stdin failed")

	// errMalformedResult is a Result's element that is not a well-framed
	// message (or, for ResultCopyOut, run of CopyData messages): a bug in
	// the producer, reported instead of sending a corrupt stream.
	errMalformedResult = errors.New("pgwire: result produced a malformed message")
)

// protocolErrorf returns a protocol violation (08P01) with a specific message.
func protocolErrorf(format string, args ...any) *Error {
	return Errorf("08P01", format, args...).in(ErrProtocolViolation)
}

// authFailed returns the 28P01 error for user. Postgres quotes the user name
// with plain double quotes, and so do we: clients match on this text.
func authFailed(user string) *Error {
	return Errorf("28P01", "password authentication failed for user \"%s\"", user).in(ErrAuthFailed)
}
