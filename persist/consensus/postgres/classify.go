package postgres

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/persist"
)

// SQLSTATEs the backend tells apart.
const (
	codeUniqueViolation            = "23505"
	codeDuplicateTable             = "42P07"
	codeSerializationFailure       = "40001"
	codeDeadlockDetected           = "40P01"
	codeStatementCompletionUnknown = "40003" // CockroachDB: result is ambiguous
)

// acquireError is a failure to get a connection from the pool: no
// statement was sent.
type acquireError struct{ err error }

func (e *acquireError) Error() string { return "acquire connection: " + e.err.Error() }
func (e *acquireError) Unwrap() error { return e.err }

// retryable reports whether a statement that failed with err certainly
// did not take effect and is worth running again at once: the server
// rolled it back because of a concurrent transaction, or it was never
// sent.
func retryable(err error) bool {
	var acq *acquireError
	if errors.As(err, &acq) {
		return false // the pool already retried connecting
	}
	return isCode(err, codeSerializationFailure) || isCode(err, codeDeadlockDetected) || pgconn.SafeToRetry(err)
}

// determinate reports whether a write that failed with err certainly did
// not take effect. The reasoning is in "Errors" in doc.go.
func determinate(err error) bool {
	var acq *acquireError
	if errors.As(err, &acq) || pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false // lost connection, timeout, cancellation after sending
	}
	if pgErr.Code == codeStatementCompletionUnknown {
		return false
	}
	severity := pgErr.SeverityUnlocalized // PostgreSQL 9.6+
	if severity == "" {
		severity = pgErr.Severity
	}
	return strings.EqualFold(severity, "ERROR")
}

// writeError wraps the error of a CompareAndSet or Truncate, marking it
// persist.ErrIndeterminate unless it is determinate.
func writeError(op, key string, err error) error {
	if determinate(err) {
		return fmt.Errorf("postgres consensus: %s %q: %w", op, key, err)
	}
	return fmt.Errorf("%w: postgres consensus: %s %q: %w", persist.ErrIndeterminate, op, key, err)
}

// readError wraps the error of an operation that had no effect: a read,
// or a write refused before anything was sent.
func readError(op, key string, err error) error {
	if key == "" {
		return fmt.Errorf("postgres consensus: %s: %w", op, err)
	}
	return fmt.Errorf("postgres consensus: %s %q: %w", op, key, err)
}

func isCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}
