package adapter_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// TestSubscriptionsProgressColumns checks that mz_internal.mz_subscriptions
// reports delivered_frontier and queued_bytes for a running subscribe on
// either path: both implement one subscription contract, which has them.
func TestSubscriptionsProgressColumns(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(map[bool]string{true: "FastPath", false: "Dataflow"}[fast], func(t *testing.T) {
			s := testserver.Start(t, testserver.Options{})
			c, other := connect(t, s), connect(t, s)
			mustExec(t, c, fmt.Sprintf("SET enable_subscribe_persist_fast_path = %v", fast),
				"CREATE TABLE t (k int8)", "INSERT INTO t VALUES (1), (2), (3)",
				"BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE t", "FETCH 1 c")
			wantPath := map[bool]string{true: "fast", false: "dataflow"}[fast]
			ctx := context.Background()
			err := waitFor(10*time.Second, func() error {
				var path string
				var asOf, frontier *string
				var queued *int64
				if err := other.QueryRow(ctx, "SELECT path, as_of, delivered_frontier, queued_bytes FROM mz_internal.mz_subscriptions").
					Scan(&path, &asOf, &frontier, &queued); err != nil {
					return err
				}
				if path != wantPath {
					t.Fatalf("path = %q, want %q", path, wantPath)
				}
				if frontier == nil || queued == nil {
					return fmt.Errorf("delivered_frontier = %v, queued_bytes = %v, want both set", frontier, queued)
				}
				a, _ := strconv.ParseUint(*asOf, 10, 64)
				f, err := strconv.ParseUint(*frontier, 10, 64)
				if err != nil || f < a {
					return fmt.Errorf("delivered_frontier = %s, want at or past as_of %d", *frontier, a)
				}
				if *queued < 0 {
					return fmt.Errorf("queued_bytes = %d, want >= 0", *queued)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
