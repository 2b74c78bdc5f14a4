package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/persist/txnwal"
)

// dyingCommits is an AfterTxnCommit hook that, once armed, ends the
// committing goroutine after the txns shard's compare-and-set and before
// any apply, as a process killed there would stop; died is closed then.
type dyingCommits struct {
	armed atomic.Bool
	once  sync.Once
	died  chan struct{}
}

func (d *dyingCommits) hook() {
	if d.armed.Load() {
		d.once.Do(func() { close(d.died) })
		runtime.Goexit()
	}
}

// execDying runs sql on w, whose session dies with the commit
// (dyingCommits), on a goroutine: the statement never returns, so it ends
// when its context does, which the test's cleanup cancels before w's
// cleanup closes the connection under it (a data race in pgx otherwise).
func execDying(t *testing.T, w *pgx.Conn, sql string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Exec(ctx, sql)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// listedCommits is how many commits the txns shard lists (not yet
// tidied), read by a process of its own.
func listedCommits(t *testing.T, blob persist.Blob, cons persist.Consensus) int {
	t.Helper()
	ctx := context.Background()
	p, err := persist.NewClient(blob, cons, persist.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tx, err := txnwal.Open(ctx, p, txnwal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	st, err := tx.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return len(st.Commits)
}

// TestTxnCommitCompletedAfterCrash: a transaction over two tables whose
// writer dies between its commit to the txns shard and the applies is
// visible in full — to the next reader in the same process, and after a
// restart — and never in part.
func TestTxnCommitCompletedAfterCrash(t *testing.T) {
	for _, completer := range []string{"NextReader", "Restart"} {
		t.Run(completer, func(t *testing.T) {
			blob, cons := blobmem.New(), consmem.New()
			d := &dyingCommits{died: make(chan struct{})}
			// No tick: the tick would complete the commit too.
			s := testserver.Start(t, testserver.Options{Blob: blob, Consensus: cons, Tick: -1,
				Adapter: func(c *adapter.Config) { c.AfterTxnCommit = d.hook }})
			c := connect(t, s)
			mustExec(t, c, "CREATE TABLE a (n int)", "CREATE TABLE b (n int)", "INSERT INTO a VALUES (0)")
			d.armed.Store(true)
			execDying(t, connect(t, s), "BEGIN; INSERT INTO a VALUES (1); INSERT INTO b VALUES (1), (2); COMMIT")
			select {
			case <-d.died:
			case <-time.After(30 * time.Second):
				t.Fatal("the commit never reached the txns shard")
			}
			d.armed.Store(false)
			if n := listedCommits(t, blob, cons); n != 1 {
				t.Fatalf("txns shard lists %d commits after the writer died, want the 1 unapplied", n)
			}
			reader := c
			if completer == "Restart" {
				s.Stop()
				s = testserver.Start(t, testserver.Options{Blob: blob, Consensus: cons, Tick: -1})
				reader = connect(t, s)
				if n := listedCommits(t, blob, cons); n != 0 {
					t.Fatalf("txns shard lists %d commits after the restart, want them applied and tidied", n)
				}
			}
			if got, want := queryRows(t, reader, "SELECT * FROM b"), []string{"1", "2"}; !slices.Equal(got, want) {
				t.Errorf("b = %v, want %v", got, want)
			}
			if got, want := queryRows(t, reader, "SELECT * FROM a"), []string{"0", "1"}; !slices.Equal(got, want) {
				t.Errorf("a = %v, want %v", got, want)
			}
		})
	}
}

// TestTxnIdleTablesTickWithOneWrite: however many tables there are, a
// tick is one compare-and-set (of the txns shard), and an idle table's
// subscribers still see progress.
func TestTxnIdleTablesTickWithOneWrite(t *testing.T) {
	s := testserver.Start(t, testserver.Options{Tick: -1})
	c := connect(t, s)
	const tables = 50
	for i := range tables {
		// No history window: the first tick moves each since to its cap,
		// the table's physical upper, at once (with the default 1 s it
		// would climb toward it over the ticks of that second).
		mustExec(t, c, fmt.Sprintf("CREATE TABLE t%d (n int) WITH (RETAIN HISTORY FOR '0s')", i))
	}
	// Each table is read once, as a subscriber would at its start: that
	// read may advance the table's shard once.
	for i := range tables {
		queryRows(t, c, fmt.Sprintf("SELECT * FROM t%d", i))
	}
	cas := func() float64 {
		mfs, err := s.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var n float64
		for _, mf := range mfs {
			switch mf.GetName() {
			case "shardtail_persist_cas_attempts_total", "shardtail_txnwal_cas_attempts_total":
				n += mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return n
	}
	// The first tick after those reads moves each table's retention since
	// up to its new physical upper, once.
	s.Coordinator.Tick(context.Background())
	before := cas()
	const ticks = 5
	for range ticks {
		s.Coordinator.Tick(context.Background())
	}
	if got := cas() - before; got > ticks {
		t.Errorf("%d ticks over %d idle tables made %v compare-and-sets, want at most %d", ticks, tables, got, ticks)
	}
	// An idle table's subscribers, on either path, see its progress move
	// with the ticks, though nobody writes it.
	for _, fast := range []string{"on", "off"} {
		t.Run("FastPath"+fast, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sc := connect(t, s)
			execAll(t, sc, "SET enable_subscribe_persist_fast_path = "+fast, "BEGIN",
				"DECLARE c CURSOR FOR SUBSCRIBE t1 WITH (PROGRESS)")
			first := lastProgress(t, fetch(t, ctx, sc, "FETCH ALL c WITH (timeout = '1s')"))
			if first == 0 {
				t.Fatal("no progress row after the snapshot")
			}
			s.Coordinator.Tick(ctx)
			for {
				if p := lastProgress(t, fetch(t, ctx, sc, "FETCH ALL c WITH (timeout = '1s')")); p > first {
					break
				}
				s.Coordinator.Tick(ctx)
			}
		})
	}
}

// lastProgress is the timestamp of the last progress row in rows (as
// fetchErr renders them), or 0.
func lastProgress(t *testing.T, rows []string) uint64 {
	t.Helper()
	var last uint64
	for _, r := range rows {
		f := strings.Fields(r)
		if len(f) > 1 && f[1] == "t" {
			ts, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			last = ts
		}
	}
	return last
}

// TestTxnTailProcessSeesOneTimestamp: fast-path subscribers in a tail
// process, which reads tables through the txns shard, see a transaction
// over two tables at one timestamp — even one whose writer upstream died
// between its commit and the applies, which the tail's reads complete.
func TestTxnTailProcessSeesOneTimestamp(t *testing.T) {
	d := &dyingCommits{died: make(chan struct{})}
	// No tick upstream: it would complete the commit itself.
	p := startProxyPair(t, testserver.Options{Tick: -1, Adapter: func(c *adapter.Config) { c.AfterTxnCommit = d.hook }}, testserver.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := connect(t, p.proxy)
	mustExec(t, w, "CREATE TABLE a (n int)", "CREATE TABLE b (n int)")
	subs := map[string]*pgx.Conn{}
	for _, tb := range []string{"a", "b"} {
		c := connect(t, p.proxy)
		execAll(t, c, "BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE "+tb+" WITH (PROGRESS)")
		for lastProgress(t, fetch(t, ctx, c, "FETCH ALL c WITH (timeout = '1s')")) == 0 {
		}
		subs[tb] = c
	}
	if got, want := p.subscribes(t), []string{"proxy:fast", "proxy:fast"}; !slices.Equal(got, want) {
		t.Fatalf("subscribes run at %v, want %v", got, want)
	}
	d.armed.Store(true)
	execDying(t, connect(t, p.proxy), "BEGIN; INSERT INTO a VALUES (1); INSERT INTO b VALUES (2); COMMIT")
	<-d.died
	d.armed.Store(false)
	at := map[string]string{}
	for tb, c := range subs {
		for at[tb] == "" {
			for _, r := range fetch(t, ctx, c, "FETCH ALL c WITH (timeout = '1s')") {
				if f := strings.Fields(r); f[1] != "t" {
					at[tb] = f[0]
				}
			}
		}
	}
	if at["a"] != at["b"] {
		t.Errorf("the transaction reached the tail's subscribers at %s in a and %s in b, want one timestamp", at["a"], at["b"])
	}
}

// TestFreshTablesStartAtTheOracle: on a fresh txns shard, before any tick,
// a new table's logical upper is the oracle's time, not a count of the
// registrations before it (which would give a subscriber AS OF 3 and, a
// tick later, a since an hour past it).
func TestFreshTablesStartAtTheOracle(t *testing.T) {
	s := testserver.Start(t, testserver.Options{Tick: time.Hour})
	c := connect(t, s)
	before := uint64(time.Now().Add(-time.Minute).UnixMilli())
	for i := range 3 {
		execAll(t, c, fmt.Sprintf("CREATE TABLE fresh%d (a int8)", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "DECLARE c CURSOR FOR SUBSCRIBE fresh2 WITH (PROGRESS, SNAPSHOT = false)"); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "FETCH 1 c", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("no progress row: %v", rows.Err())
	}
	ts, err := strconv.ParseUint(string(rows.RawValues()[0]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if ts < before {
		t.Errorf("first progress of a fresh table at %d, want the oracle's time (≥ %d)", ts, before)
	}
}

// TestCommitRacingDrop: a write whose table a concurrent DROP TABLE
// removes fails as a write to a dropped table (42P01, or 42704 once it ran),
// whichever step of the write the DROP lands between: a COMMIT and a
// multi-statement query failed with XX000 "data shard not registered in
// the txns shard" when the DROP landed after the catalog check, a lone
// INSERT or a COPY with 58000 "shared storage unavailable", as if storage
// were down.
func TestCommitRacingDrop(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c, dropper := connect(t, s), connect(t, s)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE base (n int)")
	for i := range 240 {
		name := fmt.Sprintf("d%d", i)
		mustExec(t, c, "CREATE TABLE "+name+" (n int)")
		stmt := "COMMIT"
		switch i % 4 {
		case 0:
			mustExec(t, c, "BEGIN", "INSERT INTO base VALUES (1)", "INSERT INTO "+name+" VALUES (1)")
		case 1:
			stmt = "INSERT INTO " + name + " VALUES (1)"
		case 2:
			stmt = "INSERT INTO base VALUES (1); INSERT INTO " + name + " VALUES (1)"
		case 3:
			stmt = "COPY " + name + " FROM STDIN"
		}
		done := make(chan error, 1)
		go func() {
			_, err := dropper.Exec(ctx, "DROP TABLE "+name)
			done <- err
		}()
		var err error
		if i%4 == 3 {
			_, err = c.PgConn().CopyFrom(ctx, strings.NewReader("1\n2\n"), stmt)
		} else {
			_, err = c.Exec(ctx, stmt)
		}
		if err != nil {
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || (pe.Code != "42P01" && pe.Code != "42704") {
				t.Errorf("%s racing DROP TABLE %s: %v, want 42P01 or 42704", stmt, name, err)
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
