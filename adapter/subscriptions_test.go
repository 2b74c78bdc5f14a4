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

// TestShapeSubscriptions: with the fast path on, a SUBSCRIBE of a query or
// view over one collection (a shape) runs on the fast path, and
// mz_internal.mz_subscriptions names the collection it reads; one that
// reads no collection (VALUES) or now() stays on the dataflow path.
func TestShapeSubscriptions(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	admin := connect(t, s)
	mustExec(t, admin, "CREATE TABLE t (k int8, u int8)", "INSERT INTO t VALUES (1, 10), (2, 20)",
		"CREATE VIEW v AS SELECT k FROM t WHERE u = 10", "CREATE VIEW vv AS SELECT k + 1 AS k1 FROM v")
	cases := []struct {
		query            string
		path, collection string
	}{
		{"SUBSCRIBE (SELECT k FROM t WHERE u = 20)", "fast", "t"},
		{"SUBSCRIBE v", "fast", "t"},
		{"SUBSCRIBE (SELECT k1 FROM vv WHERE k1 > 0)", "fast", "t"},
		{"SUBSCRIBE (SELECT * FROM t)", "fast", "t"},
		{"SUBSCRIBE (VALUES (1))", "dataflow", ""},
		{"SUBSCRIBE (SELECT k FROM t WHERE now() IS NOT NULL)", "dataflow", "t"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			c := connect(t, s)
			mustExec(t, c, "BEGIN", "DECLARE c CURSOR FOR "+tc.query, "FETCH 1 c")
			var path, collection string
			if err := admin.QueryRow(context.Background(), "SELECT path, collection FROM mz_internal.mz_subscriptions").Scan(&path, &collection); err != nil {
				t.Fatal(err)
			}
			if path != tc.path || collection != tc.collection {
				t.Errorf("path, collection = %q, %q; want %q, %q", path, collection, tc.path, tc.collection)
			}
			mustExec(t, c, "ROLLBACK")
			if err := waitFor(10*time.Second, func() error {
				if ids, err := tryQueryRows(admin, "SELECT id FROM mz_internal.mz_subscriptions"); err != nil || len(ids) != 0 {
					return fmt.Errorf("subscriptions still running: %q, %v", ids, err)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestShapeSharedByQueryAndView: a view of a filter and the same filter as
// a query are one shape of the collection's shared tail.
func TestShapeSharedByQueryAndView(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	admin := connect(t, s)
	mustExec(t, admin, "CREATE TABLE t (k int8, u int8)", "INSERT INTO t VALUES (1, 10), (2, 20)",
		"CREATE VIEW v AS SELECT k FROM t WHERE u = 10")
	for _, q := range []string{"SUBSCRIBE v", "SUBSCRIBE (SELECT * FROM v)", "SUBSCRIBE (SELECT k FROM t WHERE u = 10)"} {
		c := connect(t, s)
		mustExec(t, c, "BEGIN", "DECLARE c CURSOR FOR "+q, "FETCH 1 c")
	}
	if got := gaugeValue(t, s, "shardtail_tail_shapes"); got != 1 {
		t.Errorf("shapes: %v, want 1", got)
	}
}

// gaugeValue is the sum of a gauge's series on server s.
func gaugeValue(t *testing.T, s *testserver.Server, name string) float64 {
	t.Helper()
	mfs, err := s.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}
