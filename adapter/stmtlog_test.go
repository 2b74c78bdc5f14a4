package adapter_test

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/stmtlog"
	"github.com/shardtail/shardtail/subscribe"
)

// logRecord is a row of mz_internal.mz_statement_execution_history.
type logRecord struct {
	sql, typ, status, errMsg, reason, path, strategy string
	detaches, resumes, rows                          int64
}

// logRecords reads the statement log through c.
func logRecords(ctx context.Context, c *pgx.Conn) ([]logRecord, error) {
	rows, err := c.Query(ctx, "SELECT sql, statement_type, finished_status, error_message, end_reason, path, execution_strategy, detaches, resumes, rows_returned FROM mz_internal.mz_statement_execution_history",
		pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []logRecord
	for rows.Next() {
		v := rows.RawValues()
		r := logRecord{sql: string(v[0]), typ: string(v[1]), status: string(v[2]), errMsg: string(v[3]), reason: string(v[4]),
			path: string(v[5]), strategy: string(v[6])}
		r.detaches, _ = strconv.ParseInt(string(v[7]), 10, 64)
		r.resumes, _ = strconv.ParseInt(string(v[8]), 10, 64)
		r.rows, _ = strconv.ParseInt(string(v[9]), 10, 64)
		out = append(out, r)
	}
	return out, rows.Err()
}

// waitRecord waits until the log, read through c, holds the record of a
// statement whose text contains key (it appears once the statement ended,
// and in another process once that process flushed), and returns it.
func waitRecord(t *testing.T, ctx context.Context, c *pgx.Conn, key string) logRecord {
	t.Helper()
	for {
		recs, err := logRecords(ctx, c)
		if err != nil {
			t.Fatalf("read the statement log: %v", err)
		}
		for _, r := range recs {
			if strings.Contains(r.sql, key) && r.typ != "select" {
				return r
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no record of %q in the statement log", key)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logTarget is where a statement-log case runs: a role-all server or a
// tail process in front of one, with the fast path on or off.
type logTarget struct {
	name string
	s    *testserver.Server // the clients' server
	up   *testserver.Server // the role-all server (its storage)
	flag string
}

// endCase makes a subscribe end one way and says how its record must read.
type endCase struct {
	name string
	// fastOnly / dataflowOnly restrict the case to one path.
	fastOnly, dataflowOnly bool
	// run runs the case on table tbl with client c and writer w, and
	// returns the text identifying the subscribe's statement.
	run func(t *testing.T, ctx context.Context, tg logTarget, c, w *pgx.Conn, tbl string) string
	// want: finished_status and end_reason; detached asks for at least
	// one detach and one resume.
	status, reason string
	detached       bool
	// minRows is the least rows_returned (what the client took).
	minRows int64
}

// fetchUntilErr fetches from cursor c until an error or until the row
// with a = last arrived.
func fetchUntilErr(ctx context.Context, c *pgx.Conn, last int) error {
	for {
		rows, err := fetchErr(ctx, c, "FETCH ALL c")
		if err != nil {
			return err
		}
		for _, r := range rows {
			if strings.Fields(r)[2] == strconv.Itoa(last) {
				return nil
			}
		}
	}
}

// fallBehind declares a cursor with a 2000-byte budget and writes past it
// while the client does not read.
func fallBehind(t *testing.T, ctx context.Context, c, w *pgx.Conn, tbl string) string {
	t.Helper()
	decl := "DECLARE c CURSOR FOR SUBSCRIBE " + tbl
	execAll(t, c, "SET subscribe_max_buffered_bytes = 2000", "BEGIN", decl)
	// Without a timeout: the snapshot's rows, and the subscriber joins the
	// live stream (where it can be detached).
	fetch(t, ctx, c, "FETCH ALL c")
	for i := 1; i <= 40; i++ {
		execAll(t, w, fmt.Sprintf("INSERT INTO %s VALUES (%d, '%s')", tbl, i, strings.Repeat("x", 100)))
	}
	return decl
}

var endCases = []endCase{
	{name: "ClientClosed", status: stmtlog.StatusSuccess, reason: subscribe.EndClientClosed, minRows: 1,
		run: func(t *testing.T, ctx context.Context, _ logTarget, c, _ *pgx.Conn, tbl string) string {
			decl := "DECLARE c CURSOR FOR SUBSCRIBE " + tbl
			execAll(t, c, "BEGIN", decl)
			fetch(t, ctx, c, "FETCH ALL c")
			execAll(t, c, "COMMIT")
			return decl
		}},
	{name: "UpTo", status: stmtlog.StatusSuccess, reason: subscribe.EndUpTo, minRows: 1,
		run: func(t *testing.T, ctx context.Context, _ logTarget, c, _ *pgx.Conn, tbl string) string {
			execAll(t, c, "BEGIN", "DECLARE p CURSOR FOR SUBSCRIBE "+tbl+" WITH (PROGRESS)")
			rows, err := fetchErr(ctx, c, "FETCH 1 p")
			if err != nil || len(rows) == 0 {
				t.Fatalf("FETCH 1 p: %v, %v", rows, err)
			}
			asOf, _ := strconv.ParseUint(strings.Fields(rows[0])[0], 10, 64)
			execAll(t, c, "COMMIT")
			q := fmt.Sprintf("COPY (SUBSCRIBE %s AS OF %d UP TO %d) TO STDOUT", tbl, asOf, asOf+1)
			if _, err := c.PgConn().CopyTo(ctx, io.Discard, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return q
		}},
	{name: "Canceled", status: stmtlog.StatusCanceled, reason: subscribe.EndCanceled,
		run: func(t *testing.T, ctx context.Context, _ logTarget, c, _ *pgx.Conn, tbl string) string {
			q := "SUBSCRIBE " + tbl
			err := runCanceled(t, c, q, true, func() {}, func() { _ = c.PgConn().CancelRequest(ctx) })
			wantCode(t, err, "57014", q)
			return q
		}},
	// Through a tail's proxied (dataflow) path too: the tail passes its
	// client's disappearance upstream as a disconnect, not as a cancel.
	{name: "Aborted", status: stmtlog.StatusAborted, reason: subscribe.EndClientClosed,
		run: func(t *testing.T, ctx context.Context, tg logTarget, _, _ *pgx.Conn, tbl string) string {
			c := connect(t, tg.s)
			execAll(t, c, "SET enable_subscribe_persist_fast_path = "+tg.flag)
			q := "SUBSCRIBE " + tbl
			rows, err := c.Query(ctx, q)
			if err != nil || !rows.Next() {
				t.Fatalf("%s: no first row: %v", q, err)
			}
			// The client goes away without a word.
			c.PgConn().Conn().Close()
			return q
		}},
	{name: "Dropped", status: stmtlog.StatusError, reason: subscribe.EndDropped,
		run: func(t *testing.T, ctx context.Context, _ logTarget, c, w *pgx.Conn, tbl string) string {
			decl := "DECLARE c CURSOR FOR SUBSCRIBE " + tbl
			execAll(t, c, "BEGIN", decl)
			fetch(t, ctx, c, "FETCH ALL c WITH (timeout = '0s')")
			execAll(t, w, "DROP TABLE "+tbl)
			wantCode(t, fetchUntilErr(ctx, c, -1), "42704", "FETCH after DROP")
			execAll(t, c, "ROLLBACK")
			return decl
		}},
	{name: "FellBehind", dataflowOnly: true, status: stmtlog.StatusError, reason: subscribe.EndFellBehind,
		run: func(t *testing.T, ctx context.Context, _ logTarget, c, w *pgx.Conn, tbl string) string {
			decl := fallBehind(t, ctx, c, w, tbl)
			wantCode(t, fetchUntilErr(ctx, c, 40), "53200", "FETCH after falling behind")
			execAll(t, c, "ROLLBACK")
			return decl
		}},
	{name: "DetachedAndResumed", fastOnly: true, status: stmtlog.StatusSuccess, reason: subscribe.EndClientClosed, detached: true,
		run: func(t *testing.T, ctx context.Context, _ logTarget, c, w *pgx.Conn, tbl string) string {
			decl := fallBehind(t, ctx, c, w, tbl)
			if err := fetchUntilErr(ctx, c, 40); err != nil {
				t.Fatalf("a detached client reads on: %v", err)
			}
			execAll(t, c, "COMMIT")
			return decl
		}},
	{name: "HistoryLost", fastOnly: true, status: stmtlog.StatusError, reason: subscribe.EndHistoryLost, detached: true,
		run: func(t *testing.T, ctx context.Context, tg logTarget, c, w *pgx.Conn, tbl string) string {
			execAll(t, w, "ALTER TABLE "+tbl+" SET (RETAIN HISTORY FOR '1ms')")
			decl := fallBehind(t, ctx, c, w, tbl)
			waitCompactedPast(t, ctx, tg, w, tbl)
			wantCode(t, fetchUntilErr(ctx, c, 40), "53200", "FETCH after history was lost")
			execAll(t, c, "ROLLBACK")
			return decl
		}},
	{name: "Error", status: stmtlog.StatusError, reason: subscribe.EndError,
		run: func(t *testing.T, ctx context.Context, _ logTarget, c, w *pgx.Conn, tbl string) string {
			insertSeries(t, w, tbl, 5000)
			decl := "DECLARE c CURSOR FOR SUBSCRIBE " + tbl + " WITH (PROGRESS) WITHIN TIMESTAMP ORDER BY a DESC"
			execAll(t, c, "SET max_result_size = '16kB'", "BEGIN", decl)
			wantCode(t, fetchSnapshotErr(ctx, c), "53200", "ordered snapshot over max_result_size")
			execAll(t, c, "ROLLBACK")
			return decl
		}},
}

// waitCompactedPast waits until tbl's shard has compacted past the
// frontier its (only) subscriber delivered.
func waitCompactedPast(t *testing.T, ctx context.Context, tg logTarget, w *pgx.Conn, tbl string) {
	t.Helper()
	var shard string
	for _, it := range tg.up.Coordinator.Catalog().State().SortedItems() {
		if it.Name == tbl {
			shard = it.Shard
		}
	}
	var text string
	if err := w.QueryRow(ctx, "SELECT delivered_frontier FROM mz_internal.mz_subscriptions WHERE collection = '"+tbl+"'",
		pgx.QueryExecModeSimpleProtocol).Scan(&text); err != nil {
		t.Fatalf("the subscriber's frontier: %v", err)
	}
	frontier, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		t.Fatalf("the subscriber's frontier %q: %v", text, err)
	}
	for {
		st, err := tg.up.Persist.State(ctx, shard)
		if err != nil {
			t.Fatal(err)
		}
		if st.Since > frontier {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never compacted past %d (since %d)", tbl, frontier, st.Since)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestStatementLogEndReasons: each way a subscribe ends gives its record
// the right status and end reason, on both paths, on a role-all server and
// through a tail process (which logs the subscribes it serves itself; the
// upstream logs those it proxies).
func TestStatementLogEndReasons(t *testing.T) {
	opts := testserver.Options{Tail: testserverWindow(1)}
	pair := startProxyPair(t, opts, opts)
	for _, via := range []struct {
		name string
		s    *testserver.Server
	}{{"RoleAll", pair.up}, {"Tail", pair.proxy}} {
		for _, p := range subscribePaths {
			tg := logTarget{name: via.name + p.name, s: via.s, up: pair.up, flag: p.flag}
			for _, tc := range endCases {
				if (tc.fastOnly && p.flag == "off") || (tc.dataflowOnly && p.flag == "on") {
					continue
				}
				t.Run(tg.name+"/"+tc.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					tbl := strings.ToLower(fmt.Sprintf("t_%s_%s", tg.name, tc.name))
					c, w, reader := connect(t, tg.s), connect(t, tg.s), connect(t, tg.s)
					execAll(t, w, "CREATE TABLE "+tbl+" (a int NOT NULL, b text)", "ALTER TABLE "+tbl+" SET (RETAIN HISTORY FOR '1h')",
						"INSERT INTO "+tbl+" VALUES (0, 'zero')")
					execAll(t, c, "SET enable_subscribe_persist_fast_path = "+tg.flag)
					key := tc.run(t, ctx, tg, c, w, tbl)
					got := waitRecord(t, ctx, reader, key)
					wantPath := map[string]string{"on": "fast", "off": "dataflow"}[tg.flag]
					if got.status != tc.status || got.reason != tc.reason || got.path != wantPath {
						t.Errorf("record of %q: got status %q, end reason %q, path %q (error %q); want %q, %q, %q",
							got.sql, got.status, got.reason, got.path, got.errMsg, tc.status, tc.reason, wantPath)
					}
					if (got.status == stmtlog.StatusSuccess) != (got.errMsg == "") {
						t.Errorf("record of %q: status %q with error message %q", got.sql, got.status, got.errMsg)
					}
					if got.rows < tc.minRows {
						t.Errorf("record of %q: rows_returned %d, want at least %d", got.sql, got.rows, tc.minRows)
					}
					if tc.detached && (got.detaches == 0 || (tc.status == stmtlog.StatusSuccess && got.resumes == 0)) {
						t.Errorf("record of %q: got %d detaches, %d resumes; want both counted", got.sql, got.detaches, got.resumes)
					}
				})
			}
		}
	}
}

// TestStatementLogSurvivesRestart: records are durable; a restarted
// server (and a fresh process on the same storage) reads them.
func TestStatementLogSurvivesRestart(t *testing.T) {
	opts := testserver.Options{Blob: blobmem.New(), Consensus: consmem.New()}
	s := testserver.Start(t, opts)
	c := connect(t, s)
	mustExec(t, c, "SELECT 'before the restart' AS marker", "CREATE TABLE restart_t (a int8)")
	s.Stop()
	s = testserver.Start(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := waitRecord(t, ctx, connect(t, s), "restart_t")
	if got.typ != "create_table" || got.status != stmtlog.StatusSuccess {
		t.Errorf("record after the restart: got type %q status %q, want create_table success", got.typ, got.status)
	}
	recs, err := logRecords(ctx, connect(t, s))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range recs {
		if strings.Contains(r.sql, "before the restart") {
			found = r.strategy == "constant" && r.status == stmtlog.StatusSuccess
		}
	}
	if !found {
		t.Errorf("the SELECT before the restart is missing or wrong: %+v", recs)
	}
}

// TestStatementLogSampleRate: statement_logging_sample_rate 0, by SET or
// ALTER SYSTEM, logs nothing; it accepts only numbers in [0, 1].
func TestStatementLogSampleRate(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := connect(t, s)
	mustExec(t, c, "SET statement_logging_sample_rate = 0", "SELECT 'unlogged by set' AS m",
		"SET statement_logging_sample_rate = 1", "SELECT 'logged after reset' AS m")
	_, err := c.Exec(ctx, "SET statement_logging_sample_rate = 2")
	wantCode(t, err, "22023", "SET statement_logging_sample_rate = 2")
	mustExec(t, c, "ALTER SYSTEM SET statement_logging_sample_rate = 0")
	quiet := connect(t, s)
	mustExec(t, quiet, "SELECT 'unlogged by alter system' AS m")
	mustExec(t, c, "ALTER SYSTEM RESET statement_logging_sample_rate")
	if err := s.Coordinator.StatementLog().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := logRecords(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	var sqls []string
	for _, r := range recs {
		sqls = append(sqls, r.sql)
	}
	all := strings.Join(sqls, "\n")
	if strings.Contains(all, "unlogged") {
		t.Errorf("statements at sample rate 0 were logged:\n%s", all)
	}
	if !strings.Contains(all, "logged after reset") {
		t.Errorf("the statement at rate 1 is missing:\n%s", all)
	}
}

// countingConsensus counts compare-and-sets on the statement log's shard.
type countingConsensus struct {
	persist.Consensus
	logWrites atomic.Int64
}

func (c *countingConsensus) CompareAndSet(ctx context.Context, key string, expected *persist.SeqNo, v persist.VersionedData) (bool, error) {
	if key == stmtlog.ShardID {
		c.logWrites.Add(1)
	}
	return c.Consensus.CompareAndSet(ctx, key, expected, v)
}

// TestStatementLogStormWrites: a storm of subscribes costs the log a few
// consensus writes, not one per statement: records are batched per flush.
// The flush interval is long enough that the storm fits in a few.
func TestStatementLogStormWrites(t *testing.T) {
	cons := &countingConsensus{Consensus: consmem.New()}
	s := testserver.Start(t, testserver.Options{Consensus: cons, Adapter: func(c *adapter.Config) {
		c.StatementLog.FlushInterval = 10 * time.Second
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := connect(t, s)
	mustExec(t, c, "CREATE TABLE storm (a int8)", "INSERT INTO storm VALUES (1)")
	if err := s.Coordinator.StatementLog().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	before := cons.logWrites.Load()
	const clients = 128
	errs := make(chan error, clients)
	for range clients {
		go func() {
			cc, err := pgx.Connect(ctx, s.URL())
			if err != nil {
				errs <- err
				return
			}
			defer cc.Close(ctx)
			_, err = cc.Exec(ctx, "BEGIN; DECLARE c CURSOR FOR SUBSCRIBE storm; FETCH ALL c WITH (timeout = '0s'); COMMIT")
			errs <- err
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Coordinator.StatementLog().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	writes := cons.logWrites.Load() - before
	recs, err := logRecords(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	subscribes := 0
	for _, r := range recs {
		if r.path != "" && strings.Contains(r.sql, "SUBSCRIBE storm") {
			subscribes++
		}
	}
	if subscribes != clients {
		t.Errorf("subscribe records: got %d, want %d", subscribes, clients)
	}
	// At most one append per flush interval during the storm, plus the
	// final flush.
	if writes > 8 {
		t.Errorf("consensus writes to the statement log for %d subscribes (%d statements): got %d, want at most 8", clients, 4*clients, writes)
	}
	t.Logf("%d statements, %d consensus writes to the statement log", 4*clients, writes)
}

// TestStatementLogVisibility: a non-superuser sees only its own statements;
// a superuser sees everyone's, whichever process ran them.
func TestStatementLogVisibility(t *testing.T) {
	p := startPasswordServers(t, privSetup...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	own, nobody := login(t, p.up, privOwner, privOwner+"-pw"), login(t, p.proxy, privNone, privNone+"-pw")
	mustExec(t, own, "CREATE TABLE own_marker (a int8)")
	mustExec(t, nobody, "SET application_name = 'nobody_marker'")
	if err := p.proxy.Coordinator.StatementLog().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.up.Coordinator.StatementLog().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	boss := login(t, p.proxy, privSuper, privSuper+"-pw")
	waitRecord(t, ctx, boss, "own_marker")
	for _, tc := range []struct {
		who       string
		c         *pgx.Conn
		sees, not string
	}{{"own", own, "own_marker", "SET application_name"}, {"nobody", nobody, "", "own_marker"}} {
		recs, err := logRecords(ctx, tc.c)
		if err != nil {
			t.Fatal(err)
		}
		var seen []string
		for _, r := range recs {
			seen = append(seen, r.sql)
		}
		all := strings.Join(seen, "\n")
		if tc.sees != "" && !strings.Contains(all, tc.sees) {
			t.Errorf("%s does not see its own %q:\n%s", tc.who, tc.sees, all)
		}
		if strings.Contains(all, tc.not) {
			t.Errorf("%s sees another role's %q:\n%s", tc.who, tc.not, all)
		}
	}
	if _, err := nobody.Exec(ctx, "SUBSCRIBE mz_internal.mz_statement_execution_history"); pgCode(err) == "" {
		t.Errorf("SUBSCRIBE of the statement log: got %v, want an error", err)
	}
}

// TestStatementLogRedactsPasswords: a role statement that sets a password
// is logged with the password redacted, from a role-all server and through
// a tail process: the log is on the shared storage and superusers read it,
// and only a password's verifier may be stored.
func TestStatementLogRedactsPasswords(t *testing.T) {
	p := startPasswordServers(t, privSetup...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, s := range []*testserver.Server{p.up, p.proxy} {
		boss := login(t, s, privSuper, privSuper+"-pw")
		mustExec(t, boss, "CREATE ROLE pw_marker LOGIN PASSWORD 'hunter2'",
			"ALTER ROLE pw_marker WITH PASSWORD 'hunter3' LOGIN", "DROP ROLE pw_marker")
		for _, srv := range []*testserver.Server{p.proxy, p.up} {
			if err := srv.Coordinator.StatementLog().Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if r := waitRecord(t, ctx, boss, "ALTER ROLE pw_marker"); r.sql != "ALTER ROLE pw_marker PASSWORD '<REDACTED>' LOGIN" {
			t.Errorf("logged ALTER ROLE: %q", r.sql)
		}
		recs, err := logRecords(ctx, boss)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if strings.Contains(r.sql, "hunter") {
				t.Errorf("a password in the statement log: %q", r.sql)
			}
		}
	}
}
