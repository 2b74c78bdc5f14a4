package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/persist"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/tail"
)

// slowConsensus adds latency to reads, as a networked consensus has; it
// makes concurrent subscribes overlap the way they do in production.
type slowConsensus struct {
	persist.Consensus
	delay time.Duration
}

func (s slowConsensus) Head(ctx context.Context, key string) (*persist.VersionedData, error) {
	time.Sleep(s.delay)
	return s.Consensus.Head(ctx, key)
}

func (s slowConsensus) Scan(ctx context.Context, key string, from persist.SeqNo, limit int) ([]persist.VersionedData, error) {
	time.Sleep(s.delay)
	return s.Consensus.Scan(ctx, key, from, limit)
}

func execAll(t *testing.T, c *pgx.Conn, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := c.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// fetchSnapshot declares a cursor and fetches until the first progress
// row after the snapshot; it returns the snapshot's data rows.
func fetchSnapshot(ctx context.Context, c *pgx.Conn, query string) ([]string, error) {
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		return nil, err
	}
	if _, err := c.Exec(ctx, "DECLARE c CURSOR FOR "+query); err != nil {
		return nil, err
	}
	var out []string
	var asOf string
	for {
		rows, err := c.Query(ctx, "FETCH ALL c", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return nil, err
		}
		done := false
		for rows.Next() {
			vals := rows.RawValues()
			ts, progressed := string(vals[0]), string(vals[1]) == "t"
			switch {
			case progressed && asOf == "":
				asOf = ts
			case progressed:
				done = true
			default:
				out = append(out, string(vals[3]))
			}
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if done {
			break
		}
	}
	_, err := c.Exec(ctx, "COMMIT")
	return out, err
}

// TestStormSharesReaders: 500 concurrent fast-path subscribes to one table
// register at most two readers on its shard, and cost a handful of
// consensus reads, not one per subscribe.
func TestStormSharesReaders(t *testing.T) {
	const n = 500
	s := testserver.Start(t, testserver.Options{Consensus: slowConsensus{consmem.New(), 5 * time.Millisecond}})
	admin := connect(t, s)
	execAll(t, admin, "CREATE TABLE t (a int8 NOT NULL)", "INSERT INTO t VALUES (1), (2), (3)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conns := make([]*pgx.Conn, n)
	for i := range conns {
		conns[i] = connect(t, s)
	}
	persistMetrics := prometheus.NewRegistry()
	if err := s.Persist.Metrics().Register(persistMetrics); err != nil {
		t.Fatal(err)
	}
	before := counter(t, persistMetrics, "shardtail_persist_state_refreshes_total")
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rows, err := fetchSnapshot(ctx, c, "SUBSCRIBE t WITH (PROGRESS)")
			if err == nil && len(rows) != 3 {
				err = fmt.Errorf("snapshot has %d rows, want 3", len(rows))
			}
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	refreshes := counter(t, persistMetrics, "shardtail_persist_state_refreshes_total") - before
	shard := shardOf(t, s, "t")
	st, err := s.Persist.State(ctx, shard)
	if err != nil {
		t.Fatal(err)
	}
	leased := 0
	for _, r := range st.Readers {
		if r.LeaseMs > 0 {
			leased++
		}
	}
	t.Logf("%d subscribes: %d leased readers on the shard, %v state reads", n, leased, refreshes)
	if leased > 2 {
		t.Fatalf("%d readers registered for %d fast-path subscribes, want at most 2", leased, n)
	}
	if refreshes > n/10 {
		t.Fatalf("%v consensus state reads for %d subscribes: not batched", refreshes, n)
	}
}

// shardOf returns the shard of a catalog item.
func shardOf(t *testing.T, s *testserver.Server, name string) string {
	t.Helper()
	it := s.Coordinator.Catalog().State().Items[name]
	if it == nil {
		t.Fatalf("no item %s", name)
	}
	return it.Shard
}

// TestReadYourWrites: a write acknowledged before a SUBSCRIBE starts is in
// its snapshot, on both paths.
func TestReadYourWrites(t *testing.T) {
	for _, path := range []string{"on", "off"} {
		t.Run("FastPath"+strings.ToUpper(path[:1])+path[1:], func(t *testing.T) {
			s := testserver.Start(t, testserver.Options{})
			w, r := connect(t, s), connect(t, s)
			execAll(t, w, "CREATE TABLE t (a int8 NOT NULL)")
			execAll(t, r, "SET enable_subscribe_persist_fast_path = "+path)
			ctx := context.Background()
			for i := range 30 {
				execAll(t, w, fmt.Sprintf("INSERT INTO t VALUES (%d)", i))
				rows, err := fetchSnapshot(ctx, r, "SUBSCRIBE t WITH (PROGRESS)")
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) != i+1 {
					t.Fatalf("iteration %d: snapshot has %d rows, want %d", i, len(rows), i+1)
				}
			}
		})
	}
}

// TestSlowCursorClient: a client that stops fetching while its backlog
// passes subscribe_max_buffered_bytes is detached and resumed on the fast
// path — its stream equals a steady client's — and fails with 53200 on the
// dataflow path.
//
// The table retains an hour of history: a detached client resumes from its
// delivered frontier only while the shard retains it, and with the default
// one-second window a loaded machine spends longer than that on the 40
// writes, so the fast path would rightly fail with the history-loss 53200
// (tail's TestHistoryLoss covers that case).
func TestSlowCursorClient(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("Fast%v", fast), func(t *testing.T) {
			s := testserver.Start(t, testserver.Options{Tail: testserverWindow(1)})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			w, steady, slow := connect(t, s), connect(t, s), connect(t, s)
			execAll(t, w, "CREATE TABLE t (a int8 NOT NULL, b text)", "ALTER TABLE t SET (RETAIN HISTORY FOR '1h')",
				"INSERT INTO t VALUES (0, 'zero')")
			flag := map[bool]string{true: "on", false: "off"}[fast]
			// Both streams start at the steady client's AS OF: a time chosen
			// for each would differ when an upper advanced between them.
			declare := func(c *pgx.Conn, asOf string) {
				execAll(t, c, "SET enable_subscribe_persist_fast_path = "+flag, "SET subscribe_max_buffered_bytes = 2000",
					"BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE t"+asOf)
			}
			var steadyRows, slowRows []string
			declare(steady, "")
			steadyRows = append(steadyRows, fetch(t, ctx, steady, "FETCH ALL c")...)
			declare(slow, " AS OF "+strings.Fields(steadyRows[0])[0])
			slowRows = append(slowRows, fetch(t, ctx, slow, "FETCH ALL c")...)
			for i := 1; i <= 40; i++ {
				execAll(t, w, fmt.Sprintf("INSERT INTO t VALUES (%d, '%s')", i, strings.Repeat("x", 100)))
				steadyRows = append(steadyRows, fetchUntil(t, ctx, steady, i)...)
			}
			// The slow client reads on. FETCH without a timeout blocks until
			// a row is ready, so how long the resume takes does not matter;
			// a stream that stalls fails at ctx's deadline.
			var err error
			for len(slowRows) < len(steadyRows) && err == nil {
				var rows []string
				rows, err = fetchErr(ctx, slow, "FETCH ALL c")
				slowRows = append(slowRows, rows...)
			}
			if !fast {
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != "53200" {
					t.Fatalf("dataflow path: got %v, want 53200", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(slowRows)
			sort.Strings(steadyRows)
			if strings.Join(slowRows, "\n") != strings.Join(steadyRows, "\n") {
				t.Fatalf("slow client's stream differs:\n got %v\nwant %v", slowRows, steadyRows)
			}
			if counter(t, s.Registry, "shardtail_tail_detaches_total") == 0 {
				t.Fatal("the slow client was never detached")
			}
		})
	}
}

// testserverWindow is a fast-path config with a tiny retained window, so
// that resumes come from the shard, and with only the subscriber's queue
// budget (subscribe_max_buffered_bytes) to detach it: a slow machine may
// leave a test's slow client without a take for longer than the stall
// timeout.
func testserverWindow(bytes int64) tail.Config {
	return tail.Config{WindowBytes: bytes, DetachStalledAfter: -1}
}

func fetch(t *testing.T, ctx context.Context, c *pgx.Conn, q string) []string {
	t.Helper()
	rows, err := fetchErr(ctx, c, q)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// fetchErr runs a FETCH and renders rows as "time diff a b".
func fetchErr(ctx context.Context, c *pgx.Conn, q string) ([]string, error) {
	rows, err := c.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		v := rows.RawValues()
		out = append(out, fmt.Sprintf("%s %s %s %s", v[0], v[1], v[2], v[3]))
	}
	return out, rows.Err()
}

// fetchUntil fetches until the row with a = want arrives.
func fetchUntil(t *testing.T, ctx context.Context, c *pgx.Conn, want int) []string {
	t.Helper()
	var out []string
	for {
		rows := fetch(t, ctx, c, "FETCH ALL c")
		out = append(out, rows...)
		for _, r := range rows {
			if strings.Fields(r)[2] == fmt.Sprint(want) {
				return out
			}
		}
	}
}

// counter reads the counter name from g, as a scrape would: the black-box
// tests see the metrics only through a registry.
func counter(t testing.TB, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			var sum float64
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestPastSameOnBothPaths: a subscribe of the past (AS OF and UP TO below
// now) gets the same rows on both paths, progress rows included, while a
// live subscriber keeps the collection's shared tail, whose window holds
// every tick since: below the time a subscribe began, progress is per
// timestamp, not per batch (formatter.Batcher.SetLive).
func TestPastSameOnBothPaths(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, "CREATE TABLE h (a int) WITH (RETAIN HISTORY FOR '10m')",
		"CREATE MATERIALIZED VIEW hm WITH (RETAIN HISTORY FOR '10m') AS SELECT a FROM h WHERE a > 0")
	for _, rel := range []string{"h", "hm"} {
		live := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
		mustExec(t, live, "BEGIN", "DECLARE x CURSOR FOR SUBSCRIBE "+rel, "FETCH 1 x WITH (TIMEOUT = '0s')")
	}
	now := func() uint64 {
		var ts string
		if err := c.QueryRow(ctx, "SELECT mz_now()::text").Scan(&ts); err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseUint(ts, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	from := now()
	time.Sleep(20 * time.Millisecond) // the first row is written after from
	mustExec(t, c, "INSERT INTO h VALUES (1)")
	time.Sleep(5 * 100 * time.Millisecond) // five of the test server's ticks
	mustExec(t, c, "INSERT INTO h VALUES (2)")
	time.Sleep(200 * time.Millisecond)
	to := now() + 1
	for _, rel := range []string{"h", "hm"} {
		q := fmt.Sprintf("SUBSCRIBE %s WITH (PROGRESS) AS OF %d UP TO %d", rel, from, to)
		got := map[string][]string{}
		for _, path := range []string{"on", "off"} {
			p := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
			mustExec(t, p, "SET enable_subscribe_persist_fast_path = "+path)
			got[path] = queryRows(t, p, q)
		}
		if !reflect.DeepEqual(got["on"], got["off"]) {
			t.Errorf("%s:\nfast path     %q\ndataflow path %q", q, got["on"], got["off"])
		}
		// The progress at AS OF and AS OF + 1, the two rows and a progress
		// row after each.
		if len(got["off"]) != 6 {
			t.Errorf("%s: %d rows %q, want 6", q, len(got["off"]), got["off"])
		}
	}
}
