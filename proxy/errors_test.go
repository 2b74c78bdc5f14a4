package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/pgwire"
)

// TestUpstreamError: an upstream statement's error keeps its SQLSTATE and
// fields; the loss of the connection and a FATAL are the proxy's 08006,
// not the client's own; a cancel is 57014.
func TestUpstreamError(t *testing.T) {
	for _, tc := range []struct {
		name              string
		err               error
		code, msg, detail string
	}{
		{"Statement", &pgconn.PgError{Severity: "ERROR", Code: "42P01", Message: "unknown catalog item 'x'", Detail: "d"},
			"42P01", "unknown catalog item 'x'", "d"},
		{"Fatal", &pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"},
			"08006", "upstream server u:1 closed the connection: terminating connection due to administrator command", ""},
		{"Lost", fmt.Errorf("read: %w", io.ErrUnexpectedEOF),
			"08006", "lost the connection to upstream server u:1: read: unexpected EOF", ""},
		{"Canceled", fmt.Errorf("wait: %w", context.Canceled), "57014", "canceling statement due to user request", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (&Conn{addr: "u:1"}).error(tc.err)
			var pe *pgwire.Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %T %v, want a *pgwire.Error", err, err)
			}
			if pe.SQLState() != tc.code || pe.Error() != tc.msg || pe.Detail() != tc.detail {
				t.Errorf("got %s %q detail %q, want %s %q detail %q", pe.SQLState(), pe.Error(), pe.Detail(), tc.code, tc.msg, tc.detail)
			}
		})
	}
}
