package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/testbin"
)

var crashTxnKills = flag.Int("crash-txn-kills", 15, "TestCrashTxns: how many times to kill the server (the issue's full run is 100)")

// crashTxnTables are the tables TestCrashTxns writes.
const crashTxnTables = 5

// TestCrashTxns runs the real binary on the embedded default storage,
// commits random transactions over 2 to 5 tables (BEGIN; INSERT ...;
// COMMIT), and kills the server with SIGKILL: at random moments, and —
// through the test hook SHARDTAIL_TEST_KILL_AFTER_TXN_COMMIT — right after
// a commit reached the txns shard and before it was applied to any table,
// the moment a random kill would rarely hit. After every restart on the
// same data dir:
//
//   - every acknowledged transaction is in every one of its tables, in
//     full, and the one in flight at the kill is in all of them or in none;
//   - subscribers resuming at the time the previous run started (AS OF,
//     WITH (SNAPSHOT = false)) see each transaction's rows, in every
//     table, at one timestamp.
func TestCrashTxns(t *testing.T) {
	kills := *crashTxnKills
	if testing.Short() {
		kills = 5
	}
	bin := testbin.Build(t)
	dataDir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	t.Setenv(killAfterTxnCommitEnv, "0.15")

	m := &txnModel{acked: map[int64][]int{}}
	var resumeAt uint64 // the time the previous run started at
	hookKills, timerKills := 0, 0
	for iteration := 0; hookKills+timerKills < kills; iteration++ {
		srv := startBinary(t, bin, dataDir)
		c := srv.connect(t)
		if iteration == 0 {
			for i := range crashTxnTables {
				mustExecBin(t, c, fmt.Sprintf("CREATE TABLE t%d (id int8 NOT NULL, txn int8 NOT NULL)", i),
					fmt.Sprintf("ALTER TABLE t%d SET (RETAIN HISTORY FOR '1h')", i))
			}
		}
		m.verify(t, c, iteration)
		now := latestTime(t, c)
		if resumeAt > 0 {
			checkOneTimestamp(t, c, resumeAt, now, iteration)
		}
		resumeAt = now

		done := make(chan struct{})
		opRng := rand.New(rand.NewPCG(rng.Uint64(), 4))
		go func() {
			defer close(done)
			for m.step(c, opRng) {
			}
		}()
		if exitedWithin(srv, time.Duration(200+rng.IntN(1500))*time.Millisecond) {
			hookKills++ // the hook: killed between a commit and its applies
		} else {
			timerKills++
		}
		srv.proc.Kill() // reaps the child the hook killed
		<-done
		c.Close(context.Background())
	}
	srv := startBinary(t, bin, dataDir)
	c := srv.connect(t)
	m.verify(t, c, -1)
	checkOneTimestamp(t, c, resumeAt, latestTime(t, c), -1)
	c.Close(context.Background())
	srv.kill(t)
	t.Logf("%d kills (%d by the hook after a commit, %d at random); %d transactions acknowledged; in flight at a kill: %d found applied, %d lost",
		hookKills+timerKills, hookKills, timerKills, len(m.acked), m.pendingApplied, m.pendingLost)
	if hookKills == 0 {
		t.Error("no kill came between a commit and its applies: the test did not exercise them")
	}
	if len(m.acked) < 10 {
		t.Errorf("only %d transactions were acknowledged: the test exercised little", len(m.acked))
	}
}

// exitedWithin reports whether the server exits (killed by the hook)
// within d.
func exitedWithin(srv *binaryServer, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if exited, _ := srv.proc.Exited(); exited {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// txnModel is what the client knows was acknowledged. Transaction k
// inserts rows (id, k) into each of its tables; ids are unique.
type txnModel struct {
	nextTxn int64
	// acked maps an acknowledged transaction to its tables.
	acked map[int64][]int
	// pending is the transaction whose COMMIT a kill cut off, or 0.
	pending       int64
	pendingTables []int
	// rows is how many rows each transaction inserts per table.
	rows                        map[int64]int
	pendingApplied, pendingLost int
}

// step commits one random transaction over 2..5 tables and reports
// whether the server answered.
func (m *txnModel) step(c *pgx.Conn, rng *rand.Rand) bool {
	m.nextTxn++
	k := m.nextTxn
	tables := rng.Perm(crashTxnTables)[:2+rng.IntN(crashTxnTables-1)]
	slices.Sort(tables)
	n := 1 + rng.IntN(20)
	if m.rows == nil {
		m.rows = map[int64]int{}
	}
	m.rows[k] = n
	m.pending, m.pendingTables = k, tables
	var b strings.Builder
	b.WriteString("BEGIN;")
	for _, tb := range tables {
		fmt.Fprintf(&b, " INSERT INTO t%d VALUES ", tb)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "(%d, %d)", k*1000+int64(i), k)
		}
		b.WriteString(";")
	}
	b.WriteString(" COMMIT")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, b.String()); err != nil {
		return false // the kill; pending stays unknown
	}
	m.acked[k] = tables
	m.pending = 0
	return true
}

// verify reads every table and compares it with the model, resolving the
// pending transaction from what it finds.
func (m *txnModel) verify(t *testing.T, c *pgx.Conn, iteration int) {
	t.Helper()
	// found[k][table] counts transaction k's rows in the table.
	found := map[int64]map[int]int{}
	for tb := range crashTxnTables {
		rows, err := c.Query(context.Background(), fmt.Sprintf("SELECT id, txn FROM t%d", tb))
		if err != nil {
			t.Fatalf("iteration %d: read t%d: %v", iteration, tb, err)
		}
		txns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (int64, error) {
			var id, txn int64
			err := r.Scan(&id, &txn)
			return txn, err
		})
		if err != nil {
			t.Fatalf("iteration %d: read t%d: %v", iteration, tb, err)
		}
		for _, k := range txns {
			if found[k] == nil {
				found[k] = map[int]int{}
			}
			found[k][tb]++
		}
	}
	full := func(k int64, tables []int) bool { // all of k or none, else fail
		present := 0
		for _, tb := range tables {
			switch found[k][tb] {
			case m.rows[k]:
				present++
			case 0:
			default:
				t.Fatalf("iteration %d: transaction %d has %d of its %d rows in t%d", iteration, k, found[k][tb], m.rows[k], tb)
			}
		}
		if present != 0 && present != len(tables) {
			t.Fatalf("iteration %d: transaction %d over tables %v is in %d of them: half a transaction", iteration, k, tables, present)
		}
		return present == len(tables)
	}
	if m.pending != 0 {
		if full(m.pending, m.pendingTables) {
			m.acked[m.pending] = m.pendingTables
			m.pendingApplied++
		} else {
			m.pendingLost++
		}
		m.pending = 0
	}
	for _, k := range slices.Sorted(maps.Keys(m.acked)) {
		if !full(k, m.acked[k]) {
			t.Fatalf("iteration %d: acknowledged transaction %d over tables %v is missing", iteration, k, m.acked[k])
		}
	}
	for k, byTable := range found {
		tables, ok := m.acked[k]
		if !ok {
			t.Fatalf("iteration %d: unacknowledged transaction %d is visible in %v", iteration, k, byTable)
		}
		for tb := range byTable {
			if !slices.Contains(tables, tb) {
				t.Fatalf("iteration %d: transaction %d has rows in t%d, which it did not write", iteration, k, tb)
			}
		}
	}
}

// latestTime is the time a SUBSCRIBE without AS OF starts at now.
func latestTime(t *testing.T, c *pgx.Conn) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "DECLARE c CURSOR FOR SUBSCRIBE t0 WITH (PROGRESS, SNAPSHOT = false)"); err != nil {
		t.Fatal(err)
	}
	for {
		rows, err := fetchRaw(ctx, tx, "FETCH ALL c WITH (timeout = '1s')")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.progressed {
				return r.ts
			}
		}
	}
}

// subRow is a row of SUBSCRIBE ... WITH (PROGRESS) over (id, txn).
type subRow struct {
	ts         uint64
	progressed bool
	txn        int64
}

func fetchRaw(ctx context.Context, tx pgx.Tx, q string) ([]subRow, error) {
	rows, err := tx.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []subRow
	for rows.Next() {
		v := rows.RawValues()
		ts, err := strconv.ParseUint(string(v[0]), 10, 64)
		if err != nil {
			return nil, err
		}
		r := subRow{ts: ts, progressed: string(v[1]) == "t"}
		if !r.progressed {
			if r.txn, err = strconv.ParseInt(string(v[4]), 10, 64); err != nil {
				return nil, err
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// checkOneTimestamp resumes a subscriber on every table at from (as a
// client resumes AS OF its last progress minus one, without a snapshot)
// and reads until to; every transaction it sees must carry one timestamp
// in every table.
func checkOneTimestamp(t *testing.T, c *pgx.Conn, from, to uint64, iteration int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	at := map[int64]uint64{}
	for tb := range crashTxnTables {
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		q := fmt.Sprintf("DECLARE c CURSOR FOR SUBSCRIBE t%d WITH (PROGRESS, SNAPSHOT = false) AS OF %d", tb, from)
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("iteration %d: %s: %v", iteration, q, err)
		}
		for frontier := from; frontier < to; {
			rows, err := fetchRaw(ctx, tx, "FETCH ALL c WITH (timeout = '1s')")
			if errors.Is(err, io.EOF) || err != nil {
				t.Fatalf("iteration %d: resume t%d at %d: %v", iteration, tb, from, err)
			}
			for _, r := range rows {
				if r.progressed {
					frontier = max(frontier, r.ts)
					continue
				}
				if ts, ok := at[r.txn]; ok && ts != r.ts {
					t.Fatalf("iteration %d: transaction %d at %d in t%d but at %d in another table", iteration, r.txn, r.ts, tb, ts)
				}
				at[r.txn] = r.ts
			}
		}
		tx.Rollback(ctx)
	}
}

// mustExecBin runs statements on the binary and fails on an error.
func mustExecBin(t *testing.T, c *pgx.Conn, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := c.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
