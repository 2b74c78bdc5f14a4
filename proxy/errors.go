package proxy

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/pgwire"
)

// SQLSTATE codes of the proxy's own errors.
const (
	codeConnectionFailure = "08006"
	codeFeatureNotSupp    = "0A000"
	codeInternal          = "XX000"
)

// hintStillServing tells a client whose upstream is gone what still works.
const hintStillServing = "fast-path SUBSCRIBEs are still served by this tail process"

var (
	// ErrLostInBlock is the error of a statement that needs the upstream
	// after the connection was lost inside the session's transaction
	// block: the upstream rolled its part of the block back, and a new
	// connection must not carry on as if the block were whole.
	ErrLostInBlock = pgwire.Errorf(codeConnectionFailure,
		"the connection to the upstream server was lost inside this transaction block, which it rolled back").
		WithHint("ROLLBACK, then run the transaction again.")

	// ErrBusy is the error of a statement that needs the upstream while a
	// suspended portal of the session still streams from it: one
	// connection runs one statement at a time.
	ErrBusy = pgwire.Errorf(codeFeatureNotSupp,
		"a tail process runs one upstream statement per session at a time, and a suspended portal is still reading").
		WithHint("Fetch the portal to its end or close it first.")
)

// errUnavailable wraps a failure to reach the upstream at addr, with a
// clear message.
func errUnavailable(addr string, err error) error {
	return pgwire.Errorf(codeConnectionFailure, "upstream server %s is unavailable: %v", addr, err).WithHint(hintStillServing)
}

// upstreamError turns an upstream error into the client's error, keeping
// its SQLSTATE and fields.
func upstreamError(err error) error { return upstreamErrorFrom("the upstream server", err) }

// upstreamErrorFrom turns an error of the upstream server who into the
// client's error. A statement's error keeps its SQLSTATE and fields. The
// loss of the connection, and a FATAL or PANIC error that ends it (57P01
// at the upstream's shutdown), are 08006: they end the proxy's connection
// to the upstream, not the client's to the proxy, and the client must not
// take them for its own.
func upstreamErrorFrom(who string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if pe.Severity == "FATAL" || pe.Severity == "PANIC" {
			return pgwire.Errorf(codeConnectionFailure, "%s closed the connection: %s", who, pe.Message).WithHint(hintStillServing)
		}
		return pgwire.Errorf(pe.Code, "%s", pe.Message).WithDetail(pe.Detail).WithHint(pe.Hint)
	}
	if errors.Is(err, context.Canceled) {
		return pgwire.ErrQueryCanceled
	}
	return pgwire.Errorf(codeConnectionFailure, "lost the connection to %s: %v", who, err).WithHint(hintStillServing)
}
