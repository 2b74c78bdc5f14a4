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
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/internal/testsupport/testbin"
)

var crashTxnKills = flag.Int("crash-txn-kills", 15, "TestCrashTxns: how many times to kill the server (the issue's full run is 100)")

// crashTxnTables are the tables TestCrashTxns writes.
const crashTxnTables = 5

// TestCrashTxns runs the real binary on the embedded default storage,
// commits random transactions over 2 to 5 tables (INSERTs, UPDATEs and
// DELETEs, in BEGIN ... COMMIT blocks and multi-statement queries), and kills the server with SIGKILL: at random moments, and —
// through the test hook SHARDTAIL_TEST_KILL_AFTER_TXN_COMMIT — right after
// a commit reached the txns shard and before it was applied to any table,
// the moment a random kill would rarely hit. After every restart on the
// same data dir:
//
//   - every table holds exactly what the acknowledged transactions left
//     (each is visible in full), and the one in flight at the kill is
//     applied to all of its tables or to none;
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

	m := newTxnModel()
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
			m.checkOneTimestamp(t, c, resumeAt, now, iteration)
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
		if m.stepErr != nil {
			t.Fatalf("iteration %d: %v", iteration, m.stepErr)
		}
		c.Close(context.Background())
	}
	srv := startBinary(t, bin, dataDir)
	c := srv.connect(t)
	m.verify(t, c, -1)
	m.checkOneTimestamp(t, c, resumeAt, latestTime(t, c), -1)
	c.Close(context.Background())
	srv.kill(t)
	t.Logf("%d kills (%d by the hook after a commit, %d at random); %d transactions acknowledged; in flight at a kill: %d found applied, %d lost",
		hookKills+timerKills, hookKills, timerKills, m.acked, m.pendingApplied, m.pendingLost)
	if hookKills == 0 {
		t.Error("no kill came between a commit and its applies: the test did not exercise them")
	}
	if m.acked < 10 {
		t.Errorf("only %d transactions were acknowledged: the test exercised little", m.acked)
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

// txnModel is what the client knows was acknowledged: every table's
// contents, rows (id, txn) with unique ids, where txn is the transaction
// that inserted or last updated the row.
type txnModel struct {
	nextTxn int64
	// tables is each table's contents (id -> txn) after the acknowledged
	// transactions.
	tables [crashTxnTables]map[int64]int64
	// acked counts acknowledged transactions.
	acked int
	// retractedBy maps a row retracted by an UPDATE or DELETE to the
	// acknowledged transaction that retracted it (checkOneTimestamp).
	retractedBy map[retraction]int64
	// pending is the transaction whose COMMIT a kill cut off, or nil.
	pending *txnStep
	// stepErr is an error the server answered a transaction with: no
	// transaction of the test may fail but by a kill.
	stepErr                     error
	pendingApplied, pendingLost int
}

// retraction names a row of a table removed by an UPDATE or DELETE.
type retraction struct {
	table   int
	id, txn int64
}

// txnStep is one transaction: the tables it writes and their contents
// after it, and the rows it retracts.
type txnStep struct {
	k       int64
	tables  []int
	after   map[int]map[int64]int64
	retract []retraction
}

func newTxnModel() *txnModel {
	m := &txnModel{retractedBy: map[retraction]int64{}}
	for i := range m.tables {
		m.tables[i] = map[int64]int64{}
	}
	return m
}

// step commits one random transaction over 2..5 tables, each written by
// one or two random statements (INSERT, UPDATE or DELETE, a later one
// seeing the earlier one's writes), and reports whether the server
// answered. Half are blocks (BEGIN ... COMMIT), half multi-statement
// queries (an implicit transaction).
func (m *txnModel) step(c *pgx.Conn, rng *rand.Rand) bool {
	m.nextTxn++
	k := m.nextTxn
	st := &txnStep{k: k, tables: rng.Perm(crashTxnTables)[:2+rng.IntN(crashTxnTables-1)], after: map[int]map[int64]int64{}}
	slices.Sort(st.tables)
	var b strings.Builder
	block := rng.IntN(2) == 0
	if block {
		b.WriteString("BEGIN;")
	}
	for _, tb := range st.tables {
		rows := maps.Clone(m.tables[tb])
		for op := range 1 + rng.IntN(2) {
			switch r := rng.IntN(4); {
			case r < 2: // INSERT
				n := 1 + rng.IntN(20)
				fmt.Fprintf(&b, " INSERT INTO t%d VALUES ", tb)
				for i := range n {
					if i > 0 {
						b.WriteString(", ")
					}
					id := k*1000 + int64(op*100+i)
					fmt.Fprintf(&b, "(%d, %d)", id, k)
					rows[id] = k
				}
				b.WriteString(";")
			default: // UPDATE or DELETE of the rows with id % mod = rem
				mod := int64(2 + rng.IntN(4))
				rem := rng.Int64N(mod)
				update := r == 2
				if update {
					fmt.Fprintf(&b, " UPDATE t%d SET txn = %d WHERE id %% %d = %d;", tb, k, mod, rem)
				} else {
					fmt.Fprintf(&b, " DELETE FROM t%d WHERE id %% %d = %d;", tb, mod, rem)
				}
				for id, txn := range rows {
					if id%mod != rem {
						continue
					}
					if txn != k {
						// A row this transaction wrote itself is no
						// retraction of anybody's: it never reaches
						// the table.
						st.retract = append(st.retract, retraction{tb, id, txn})
					}
					if update {
						rows[id] = k
					} else {
						delete(rows, id)
					}
				}
			}
		}
		st.after[tb] = rows
	}
	if block {
		b.WriteString(" COMMIT")
	}
	m.pending = st
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, b.String()); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			m.stepErr = fmt.Errorf("transaction %d: %s: %w", k, b.String(), err)
		}
		return false // the kill; pending stays unknown
	}
	m.apply(st)
	m.pending = nil
	return true
}

// apply records st as acknowledged.
func (m *txnModel) apply(st *txnStep) {
	for tb, rows := range st.after {
		m.tables[tb] = rows
	}
	for _, r := range st.retract {
		m.retractedBy[r] = st.k
	}
	m.acked++
}

// verify reads every table and compares it with the model, resolving the
// pending transaction from what it finds: each table must hold what the
// acknowledged transactions left, but for the tables of the transaction
// in flight at the kill, which must all hold what it left or all what
// was there before it.
func (m *txnModel) verify(t *testing.T, c *pgx.Conn, iteration int) {
	t.Helper()
	var got [crashTxnTables]map[int64]int64
	for tb := range crashTxnTables {
		rows, err := c.Query(context.Background(), fmt.Sprintf("SELECT id, txn FROM t%d", tb))
		if err != nil {
			t.Fatalf("iteration %d: read t%d: %v", iteration, tb, err)
		}
		got[tb] = map[int64]int64{}
		var id, txn int64
		_, err = pgx.ForEachRow(rows, []any{&id, &txn}, func() error {
			if prev, dup := got[tb][id]; dup {
				return fmt.Errorf("id %d twice, in transactions %d and %d", id, prev, txn)
			}
			got[tb][id] = txn
			return nil
		})
		if err != nil {
			t.Fatalf("iteration %d: read t%d: %v", iteration, tb, err)
		}
	}
	if st := m.pending; st != nil {
		m.pending = nil
		applied, lost := 0, 0
		for _, tb := range st.tables {
			if maps.Equal(got[tb], st.after[tb]) {
				applied++
			}
			if maps.Equal(got[tb], m.tables[tb]) {
				lost++
			}
		}
		switch {
		case applied == len(st.tables):
			m.apply(st)
			m.pendingApplied++
		case lost == len(st.tables):
			m.pendingLost++
		default:
			t.Fatalf("iteration %d: transaction %d in flight at the kill is applied in %d of its %d tables %v and absent from %d: half a transaction",
				iteration, st.k, applied, len(st.tables), st.tables, lost)
		}
	}
	for tb := range crashTxnTables {
		if !maps.Equal(got[tb], m.tables[tb]) {
			t.Fatalf("iteration %d: t%d is not what the acknowledged transactions left: %s",
				iteration, tb, diffRows(got[tb], m.tables[tb]))
		}
	}
}

// diffRows describes how got differs from want.
func diffRows(got, want map[int64]int64) string {
	var extra, missing, changed []string
	for id, txn := range got {
		w, ok := want[id]
		switch {
		case !ok:
			extra = append(extra, fmt.Sprintf("(%d, %d)", id, txn))
		case w != txn:
			changed = append(changed, fmt.Sprintf("(%d, %d) for (%d, %d)", id, txn, id, w))
		}
	}
	for id, txn := range want {
		if _, ok := got[id]; !ok {
			missing = append(missing, fmt.Sprintf("(%d, %d)", id, txn))
		}
	}
	return fmt.Sprintf("extra rows %v, missing rows %v, changed rows %v", extra, missing, changed)
}

// latestTime is the time a SUBSCRIBE without AS OF starts at now, once
// the tick has taken the tables to the oracle's times.
func latestTime(t *testing.T, c *pgx.Conn) uint64 {
	t.Helper()
	floor := uint64(time.Now().Add(-time.Hour).UnixMilli())
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
			// Tables just created show their registration's small time
			// until the first tick takes them to the oracle's (wall-clock
			// milliseconds), past which their since then moves: a
			// resume at that small time would be below the since.
			if r.progressed && r.ts >= floor {
				return r.ts
			}
		}
	}
}

// subRow is a row of SUBSCRIBE ... WITH (PROGRESS) over (id, txn).
type subRow struct {
	ts         uint64
	progressed bool
	diff       int64
	id, txn    int64
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
			for i, p := range []*int64{&r.diff, &r.id, &r.txn} {
				if *p, err = strconv.ParseInt(string(v[2+i]), 10, 64); err != nil {
					return nil, err
				}
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// checkOneTimestamp resumes a subscriber on every table at from (as a
// client resumes AS OF its last progress minus one, without a snapshot)
// and reads until to; every transaction it sees must carry one timestamp
// in every table: its insertions (rows carrying its number) and its
// retractions (rows it updated or deleted, from retractedBy).
func (m *txnModel) checkOneTimestamp(t *testing.T, c *pgx.Conn, from, to uint64, iteration int) {
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
				k := r.txn
				if r.diff < 0 {
					var ok bool
					if k, ok = m.retractedBy[retraction{tb, r.id, r.txn}]; !ok {
						t.Fatalf("iteration %d: t%d retracts (%d, %d) at %d, which no acknowledged transaction did", iteration, tb, r.id, r.txn, r.ts)
					}
				}
				if ts, ok := at[k]; ok && ts != r.ts {
					t.Fatalf("iteration %d: transaction %d at %d in t%d but at %d elsewhere", iteration, k, r.ts, tb, ts)
				}
				at[k] = r.ts
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
