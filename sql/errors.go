package sql

import "errors"

// SQLSTATE codes carried by a *ParseError.
const (
	// CodeSyntaxError (syntax_error) is the code of every malformed statement.
	CodeSyntaxError = "42601"
	// CodeFeatureNotSupported (feature_not_supported) marks syntax that Postgres or
	// Materialize accept but shardtail does not implement.
	CodeFeatureNotSupported = "0A000"
	// CodeStatementTooComplex (statement_too_complex) is reported when a tree
	// would be deeper than MaxDepth, or the text nests too deeply to parse.
	CodeStatementTooComplex = "54001"
	// CodeCharacterNotInRepertoire (character_not_in_repertoire) is reported for
	// input, or an E'...' escape, that is not valid UTF-8 or contains NUL.
	CodeCharacterNotInRepertoire = "22021"
	// CodeInvalidEscapeSequence (invalid_escape_sequence) is reported for a bad
	// \u or \U escape in an E'...' string.
	CodeInvalidEscapeSequence = "22025"
	// CodeInvalidParameterValue (invalid_parameter_value) is reported by the
	// Option helpers when an option's value has the wrong shape.
	CodeInvalidParameterValue = "22023"
)

// ErrEmptyStatement is returned by Parse when the text holds no statement, only
// whitespace, comments and semicolons. ParseAll returns no statements and no
// error instead, which is what the simple query protocol needs to answer with
// EmptyQueryResponse.
var ErrEmptyStatement = errors.New("empty statement")

// ParseError is an error found in the SQL text: a syntax error, recognised but
// unsupported syntax, or a malformed literal. pgwire turns it into an
// ErrorResponse with SQLState() as the code and Position as the cursor position.
type ParseError struct {
	// Code is the SQLSTATE; empty means CodeSyntaxError.
	Code string
	// Message is the client-facing text, in Postgres's wording where Postgres
	// has one: `syntax error at or near "x"`, `syntax error at end of input`.
	Message string
	// Position is the 1-based character (not byte) offset into the whole string
	// given to ParseAll, as Postgres reports in ErrorResponse; 0 when the error
	// has no single position.
	Position int
}

// Error returns the message alone, so that callers which print err.Error() to
// a client show the same text as a Postgres server would.
func (e *ParseError) Error() string { return e.Message }

// SQLState returns the error's SQLSTATE code, "42601" unless Code says otherwise.
func (e *ParseError) SQLState() string {
	if e.Code == "" {
		return CodeSyntaxError
	}
	return e.Code
}
