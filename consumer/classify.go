package consumer

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Class is what the consumer does about an error from the source.
type Class int

const (
	// ClassStall is an error the consumer cannot classify: it stops and
	// reports rather than guess.
	ClassStall Class = iota
	// ClassTransient is a lost connection, a server restart or storage
	// that is briefly unavailable: retry with backoff, resume from the
	// checkpoint.
	ClassTransient
	// ClassFellBehind is the 53200 "fell behind" error: the position is
	// still retained, so resume at once.
	ClassFellBehind
	// ClassHistoryLost is a resume position below the collection's since:
	// the policy decides (by default a new snapshot in a new generation).
	ClassHistoryLost
	// ClassDropped is a dropped collection (42704): stop.
	ClassDropped
)

// String names the class for logs and metrics.
func (c Class) String() string {
	switch c {
	case ClassTransient:
		return "transient"
	case ClassFellBehind:
		return "fell_behind"
	case ClassHistoryLost:
		return "history_lost"
	case ClassDropped:
		return "dropped"
	}
	return "stall"
}

// The DETAIL prefixes by which shardtail tells the two 53200 errors apart
// (see the README's error table): the message is for people and may change,
// the detail prefix is the contract.
const (
	detailFellBehind  = "fell behind:"
	detailHistoryLost = "history lost:"
)

// Classify sorts an error of a fetch from the source into a Class.
func Classify(err error) Class {
	if err == nil {
		return ClassStall
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Detail, detailHistoryLost):
			return ClassHistoryLost
		case pe.Code == "53200" && strings.HasPrefix(pe.Detail, detailFellBehind):
			return ClassFellBehind
		case pe.Code == "53200" && strings.HasPrefix(pe.Message, "SUBSCRIBE fell behind"):
			// A server without the detail: the message is all there is.
			return ClassFellBehind
		case pe.Code == "XX000" && strings.HasPrefix(pe.Message, "Timestamp (") &&
			strings.Contains(pe.Message, "is not valid for all inputs"):
			// AS OF below since on a server without the detail.
			return ClassHistoryLost
		case pe.Code == "42704":
			return ClassDropped
		case pe.Code == "42P01" && strings.HasPrefix(pe.Message, "unknown catalog item 'u"):
			// A subscribe by id whose object is gone (dropped between
			// the lookup and the DECLARE).
			return ClassDropped
		case strings.HasPrefix(pe.Code, "08"), pe.Code == "57P01", pe.Code == "57P02",
			pe.Code == "57P03", pe.Code == "58000", pe.Code == "53300":
			return ClassTransient
		}
		return ClassStall
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// An attempt's own deadline (the caller's context is checked
		// before classifying).
		return ClassTransient
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return ClassTransient
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return ClassTransient
	}
	if strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "unexpected EOF") {
		return ClassTransient
	}
	return ClassStall
}
