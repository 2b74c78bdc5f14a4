package consumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/subscribe"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		{"FellBehindDetail", &pgconn.PgError{Code: "53200", Message: "SUBSCRIBE fell behind: …", Detail: subscribe.DetailFellBehind}, ClassFellBehind},
		{"HistoryLostDetail", &pgconn.PgError{Code: "53200", Message: "SUBSCRIBE fell behind: …", Detail: subscribe.DetailHistoryLost}, ClassHistoryLost},
		{"BelowSinceDetail", &pgconn.PgError{Code: "XX000", Message: "Timestamp (5) is not valid for all inputs: [Antichain { elements: [9] }]", Detail: subscribe.DetailHistoryLost}, ClassHistoryLost},
		{"BelowSinceNoDetail", &pgconn.PgError{Code: "XX000", Message: "Timestamp (5) is not valid for all inputs: [Antichain { elements: [9] }]"}, ClassHistoryLost},
		{"FellBehindNoDetail", &pgconn.PgError{Code: "53200", Message: "SUBSCRIBE fell behind: the client did not read results fast enough"}, ClassFellBehind},
		{"ResultTooLarge", &pgconn.PgError{Code: "53200", Message: "result exceeds max size of 64 KiB"}, ClassStall},
		{"Dropped", &pgconn.PgError{Code: "42704", Message: "relation 'materialize.public.t' was dropped"}, ClassDropped},
		{"UnknownID", &pgconn.PgError{Code: "42P01", Message: "unknown catalog item 'u12'"}, ClassDropped},
		{"UnknownName", &pgconn.PgError{Code: "42P01", Message: "unknown catalog item 'orders'"}, ClassStall},
		{"AdminShutdown", &pgconn.PgError{Code: "57P01"}, ClassTransient},
		{"ConnectionFailure", &pgconn.PgError{Code: "08006"}, ClassTransient},
		{"StorageUnavailable", &pgconn.PgError{Code: "58000"}, ClassTransient},
		{"Syntax", &pgconn.PgError{Code: "42601"}, ClassStall},
		{"EOF", fmt.Errorf("fetch: %w", io.ErrUnexpectedEOF), ClassTransient},
		{"AttemptDeadline", fmt.Errorf("fetch: %w", context.DeadlineExceeded), ClassTransient},
		{"Unknown", errors.New("something else"), ClassStall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(fmt.Errorf("wrapped: %w", tc.err)); got != tc.want {
				t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
