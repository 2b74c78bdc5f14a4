package stmtlog_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/stmtlog"
)

// countingConsensus counts the compare-and-sets on the log's shard.
type countingConsensus struct {
	persist.Consensus
	writes atomic.Int64
}

func (c *countingConsensus) CompareAndSet(ctx context.Context, key string, expected *persist.SeqNo, v persist.VersionedData) (bool, error) {
	if key == stmtlog.ShardID {
		c.writes.Add(1)
	}
	return c.Consensus.CompareAndSet(ctx, key, expected, v)
}

// storage is one blob and consensus that several processes share.
type storage struct {
	blob persist.Blob
	cons *countingConsensus
}

func newStorage() *storage {
	return &storage{blob: blobmem.New(), cons: &countingConsensus{Consensus: consmem.New()}}
}

// open opens a log on st as a new process would (its own persist client).
func (st *storage) open(t *testing.T, cfg stmtlog.Config) *stmtlog.Log {
	t.Helper()
	p, err := persist.NewClient(st.blob, st.cons, persist.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = -1 // the test flushes
	}
	l, err := stmtlog.Open(context.Background(), p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			t.Errorf("close log: %v", err)
		}
		p.Close()
	})
	return l
}

func record(l *stmtlog.Log, sql string) {
	e := l.Begin(1, stmtlog.Record{SessionID: uuid.New(), User: "materialize", SQL: sql, StatementType: "select"})
	e.AddResult(1, 10)
	e.Release()
}

func mustRecords(t *testing.T, l *stmtlog.Log) []stmtlog.Record {
	t.Helper()
	recs, err := l.Records(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func sqls(recs []stmtlog.Record) map[string]int {
	out := map[string]int{}
	for _, r := range recs {
		out[r.SQL]++
	}
	return out
}

// TestBatchedAppend: many statements cost one append (one consensus write),
// and their records read back from another process.
func TestBatchedAppend(t *testing.T) {
	st := newStorage()
	a := st.open(t, stmtlog.Config{})
	before := st.cons.writes.Load()
	const n = 500
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); record(a, fmt.Sprintf("SELECT %d", i)) }()
	}
	wg.Wait()
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := st.cons.writes.Load() - before; got != 1 {
		t.Errorf("consensus writes for %d statements: got %d, want 1", n, got)
	}
	b := st.open(t, stmtlog.Config{})
	recs := mustRecords(t, b)
	if got := len(recs); got != n {
		t.Fatalf("records seen by another process: got %d, want %d", got, n)
	}
	r := recs[0]
	if r.Status != stmtlog.StatusSuccess || !r.Returned || r.RowsReturned != 1 || r.ResultSize != 10 || r.FinishedAt.Before(r.BeganAt) {
		t.Errorf("record: got %+v", r)
	}
}

// TestProcessesShareLog: two processes append concurrently to the one log;
// each sees every statement, its own unflushed ones included.
func TestProcessesShareLog(t *testing.T) {
	st := newStorage()
	a, b := st.open(t, stmtlog.Config{}), st.open(t, stmtlog.Config{})
	record(a, "from a")
	if got := sqls(mustRecords(t, a))["from a"]; got != 1 {
		t.Errorf("a's unflushed statement seen by a: got %d, want 1", got)
	}
	var wg sync.WaitGroup
	for _, l := range []*stmtlog.Log{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				record(l, fmt.Sprintf("round %d", i))
				if err := l.Flush(context.Background()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	for name, l := range map[string]*stmtlog.Log{"a": a, "b": b} {
		got := sqls(mustRecords(t, l))
		for i := range 5 {
			if n := got[fmt.Sprintf("round %d", i)]; n != 2 {
				t.Errorf("%s sees round %d %d times, want 2", name, i, n)
			}
		}
		if got["from a"] != 1 {
			t.Errorf("%s sees a's first statement %d times, want 1", name, got["from a"])
		}
	}
}

// TestSampleRateZero: rate 0 records nothing.
func TestSampleRateZero(t *testing.T) {
	st := newStorage()
	l := st.open(t, stmtlog.Config{})
	for range 100 {
		e := l.Begin(0, stmtlog.Record{SQL: "SELECT 1"})
		if e != nil {
			t.Fatal("Begin at rate 0 returned an execution")
		}
		e.Finish(stmtlog.StatusSuccess, "") // no-ops on nil
		e.Release()
	}
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := mustRecords(t, l); len(got) != 0 {
		t.Errorf("records at rate 0: got %d, want 0", len(got))
	}
}

// TestRetention: a sweeping process retracts records older than the
// retention, and keeps the rest, across a restart.
func TestRetention(t *testing.T) {
	st := newStorage()
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	cfg := stmtlog.Config{Retention: time.Hour, Sweep: true, Now: clock}
	l := st.open(t, cfg)
	record(l, "old")
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	now.Add((2 * time.Hour).Milliseconds())
	record(l, "new")
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := sqls(mustRecords(t, st.open(t, cfg)))
	if got["old"] != 0 || got["new"] != 1 {
		t.Errorf("after the sweep: got %v, want only new", got)
	}
}

// TestOutcome: statuses from errors.
func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, stmtlog.StatusSuccess},
		{coded("57014"), stmtlog.StatusCanceled},
		{coded("53200"), stmtlog.StatusError},
		{fmt.Errorf("plain"), stmtlog.StatusError},
	} {
		if got, _ := stmtlog.Outcome(tc.err); got != tc.want {
			t.Errorf("Outcome(%v): got %q, want %q", tc.err, got, tc.want)
		}
	}
}

type coded string

func (c coded) Error() string    { return "error " + string(c) }
func (c coded) SQLState() string { return string(c) }

// gauge reads the named gauge from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestBufferedGauge: the buffered gauge counts the records waiting for an
// append (what a benchmark waits on before it reads the log's counters),
// and an append empties it.
func TestBufferedGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	l := newStorage().open(t, stmtlog.Config{Registerer: reg})
	const name = "shardtail_statement_log_buffered"
	for i := range 3 {
		record(l, fmt.Sprintf("SELECT %d", i))
	}
	if got := gauge(t, reg, name); got != 3 {
		t.Errorf("%s after 3 statements: got %v, want 3", name, got)
	}
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, reg, name); got != 0 {
		t.Errorf("%s after a flush: got %v, want 0", name, got)
	}
}

// TestInvalidTextLogged: a record whose text is not UTF-8 (an
// application_name a client sent) is logged with U+FFFD in place of the
// bad bytes, and does not hold up the records of other sessions.
func TestInvalidTextLogged(t *testing.T) {
	st := newStorage()
	l := st.open(t, stmtlog.Config{})
	e := l.Begin(1, stmtlog.Record{SessionID: uuid.New(), ApplicationName: "ev\xffil", User: "materialize", SQL: "SELECT '\xfe'", StatementType: "select"})
	e.Release()
	record(l, "SELECT 'other session'")
	if err := l.Flush(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
	got := sqls(mustRecords(t, st.open(t, stmtlog.Config{})))
	if got["SELECT '\uFFFD'"] != 1 || got["SELECT 'other session'"] != 1 {
		t.Errorf("records read back: %v; want both, the bad bytes replaced", got)
	}
}
