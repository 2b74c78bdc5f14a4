package adapter_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
)

var mvSeed = flag.Uint64("mv.seed", 0, "seed of TestMaterializedViewModel (0: random)")

// mvRow is a row of the model's table t (a int8 NOT NULL, b int8, s text).
type mvRow struct {
	a int64
	b *int64
	s *string
}

// mvView is a materialized view under test: its definition and what it
// holds for one row of t (the trivially correct model).
type mvView struct {
	name  string
	query string
	model func(r mvRow) (string, bool)
	// created is the step at which the view is created (0: before any write).
	created int
}

func fmtInt(p *int64) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}

func fmtText(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func mvViews() []mvView {
	return []mvView{
		{name: "m_filter", query: "SELECT a, b * 2 AS c FROM t WHERE a % 3 = 1", model: func(r mvRow) (string, bool) {
			if r.a%3 != 1 {
				return "", false
			}
			if r.b == nil {
				return fmt.Sprintf("%d|<nil>", r.a), true
			}
			return fmt.Sprintf("%d|%d", r.a, *r.b*2), true
		}},
		{name: "m_sum", query: "SELECT a + b AS total, s FROM t WHERE b > 10 AND s IS NOT NULL", model: func(r mvRow) (string, bool) {
			if r.b == nil || *r.b <= 10 || r.s == nil {
				return "", false
			}
			return fmt.Sprintf("%d|%s", r.a+*r.b, *r.s), true
		}},
		{name: "m_all", query: "SELECT * FROM t", model: func(r mvRow) (string, bool) {
			return fmt.Sprintf("%d|%s|%s", r.a, fmtInt(r.b), fmtText(r.s)), true
		}},
		{name: "m_text", query: "SELECT s || '!' AS bang, a FROM t WHERE s IS NULL OR a < 10", model: func(r mvRow) (string, bool) {
			if r.s != nil && r.a >= 10 {
				return "", false
			}
			if r.s == nil {
				return fmt.Sprintf("<nil>|%d", r.a), true
			}
			return fmt.Sprintf("%s!|%d", *r.s, r.a), true
		}},
		// Over a view: the view's query is composed into the dataflow.
		{name: "m_over_view", query: "SELECT a, b - a AS d FROM v WHERE a > 5", model: func(r mvRow) (string, bool) {
			if r.b == nil || r.a <= 5 {
				return "", false
			}
			return fmt.Sprintf("%d|%d", r.a, *r.b-r.a), true
		}},
		// Over another materialized view.
		{name: "m_over_mv", query: "SELECT c FROM m_filter WHERE c > 20", model: func(r mvRow) (string, bool) {
			if r.a%3 != 1 || r.b == nil || *r.b*2 <= 20 {
				return "", false
			}
			return fmt.Sprint(*r.b * 2), true
		}},
		// Created on a table that already has data: starts from a snapshot.
		{name: "m_late", query: "SELECT a, s FROM t WHERE b IS NULL", created: 5, model: func(r mvRow) (string, bool) {
			if r.b != nil {
				return "", false
			}
			return fmt.Sprintf("%d|%s", r.a, fmtText(r.s)), true
		}},
	}
}

// mvModel is the model: the multiset of t's rows.
type mvModel struct {
	rows []mvRow
}

func (m *mvModel) eval(f func(mvRow) (string, bool)) []string {
	out := []string{}
	for _, r := range m.rows {
		if s, ok := f(r); ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// mvOp is one random operation: its SQL and its effect on the model.
type mvOp struct {
	stmts []string
	apply func(m *mvModel)
}

func randomRow(rng *rand.Rand) (mvRow, string) {
	r := mvRow{a: rng.Int64N(30)}
	b, s := "NULL", "NULL"
	if rng.IntN(5) > 0 {
		v := rng.Int64N(100) - 50
		r.b, b = &v, fmt.Sprint(v)
	}
	if rng.IntN(4) > 0 {
		v := []string{"x1", "x2", "y1", "it's"}[rng.IntN(4)]
		r.s, s = &v, "'"+strings.ReplaceAll(v, "'", "''")+"'"
	}
	return r, fmt.Sprintf("(%d, %s, %s)", r.a, b, s)
}

func randomOp(rng *rand.Rand) mvOp {
	switch k := rng.IntN(10); {
	case k < 4: // INSERT a batch
		var rows []mvRow
		var vals []string
		for range 1 + rng.IntN(4) {
			r, v := randomRow(rng)
			rows, vals = append(rows, r), append(vals, v)
		}
		return mvOp{stmts: []string{"INSERT INTO t VALUES " + strings.Join(vals, ", ")},
			apply: func(m *mvModel) { m.rows = append(m.rows, rows...) }}
	case k < 6: // UPDATE b
		mod, rem, inc := 2+rng.Int64N(3), rng.Int64N(2), rng.Int64N(21)-10
		return mvOp{stmts: []string{fmt.Sprintf("UPDATE t SET b = b + %d WHERE a %% %d = %d", inc, mod, rem)},
			apply: func(m *mvModel) {
				for i, r := range m.rows {
					if r.a%mod == rem && r.b != nil {
						v := *r.b + inc
						m.rows[i].b = &v
					}
				}
			}}
	case k < 7: // UPDATE s and a
		lim := rng.Int64N(60) - 30
		return mvOp{stmts: []string{fmt.Sprintf("UPDATE t SET s = 'y1', a = a + 1 WHERE b < %d", lim)},
			apply: func(m *mvModel) {
				for i, r := range m.rows {
					if r.b != nil && *r.b < lim {
						v := "y1"
						m.rows[i].s, m.rows[i].a = &v, r.a+1
					}
				}
			}}
	case k < 9: // DELETE
		if rng.IntN(2) == 0 {
			x := rng.Int64N(30)
			return mvOp{stmts: []string{fmt.Sprintf("DELETE FROM t WHERE a = %d", x)},
				apply: func(m *mvModel) {
					m.rows = slices.DeleteFunc(m.rows, func(r mvRow) bool { return r.a == x })
				}}
		}
		x := rng.Int64N(30)
		return mvOp{stmts: []string{fmt.Sprintf("DELETE FROM t WHERE b IS NULL AND a > %d", x)},
			apply: func(m *mvModel) {
				m.rows = slices.DeleteFunc(m.rows, func(r mvRow) bool { return r.b == nil && r.a > x })
			}}
	default: // a transaction, committed or rolled back
		r1, v1 := randomRow(rng)
		r2, v2 := randomRow(rng)
		if rng.IntN(3) == 0 {
			return mvOp{stmts: []string{"BEGIN", "INSERT INTO t VALUES " + v1, "INSERT INTO t VALUES " + v2, "ROLLBACK"},
				apply: func(m *mvModel) {}}
		}
		return mvOp{stmts: []string{"BEGIN", "INSERT INTO t VALUES " + v1, "INSERT INTO t VALUES " + v2, "COMMIT"},
			apply: func(m *mvModel) { m.rows = append(m.rows, r1, r2) }}
	}
}

// TestMaterializedViewModel applies random writes to a table and checks,
// after every step, that each materialized view (1) equals a fresh
// evaluation of its query at the same timestamp and (2) catches up with
// the model of the table. Halfway and at the end the server restarts on
// the same storage: the views resume and keep updating.
func TestMaterializedViewModel(t *testing.T) {
	seed := *mvSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -mv.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	blob, cons := blobmem.New(), consmem.New()
	start := func() (*testserver.Server, *pgx.Conn) {
		s := testserver.Start(t, testserver.Options{Blob: blob, Consensus: cons})
		return s, connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	}
	s, c := start()
	mustExec(t, c, "CREATE TABLE t (a int8 NOT NULL, b int8, s text)",
		"CREATE VIEW v AS SELECT a, b FROM t WHERE b IS NOT NULL")
	views := mvViews()
	created := map[string]bool{}
	create := func(step int) {
		for _, v := range views {
			if v.created == step {
				mustExec(t, c, fmt.Sprintf("CREATE MATERIALIZED VIEW %s AS %s", v.name, v.query))
				created[v.name] = true
			}
		}
	}
	create(0)
	var model mvModel

	check := func(step int, what string) {
		t.Helper()
		want := model.eval(views[2].model) // m_all is t itself
		if got := queryRows(t, c, "SELECT * FROM t"); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d (%s): table t\n got %q\nwant %q", step, what, got, want)
		}
		// (1) Each view equals its query evaluated fresh at the same time.
		// Retry only errors (a time compacted away under a slow run).
		var mismatch string
		err := waitFor(20*time.Second, func() error {
			at := time.Now().UnixMilli()
			for _, v := range views {
				if !created[v.name] {
					continue
				}
				stored, err := tryQueryRows(c, fmt.Sprintf("SELECT * FROM %s AS OF %d", v.name, at))
				if err != nil {
					return err
				}
				fresh, err := tryQueryRows(c, fmt.Sprintf("%s AS OF %d", v.query, at))
				if err != nil {
					return err
				}
				if !reflect.DeepEqual(stored, fresh) {
					mismatch = fmt.Sprintf("%s AS OF %d\n stored %q\n fresh  %q", v.name, at, stored, fresh)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("step %d (%s): reading views AS OF: %v", step, what, err)
		}
		if mismatch != "" {
			t.Fatalf("step %d (%s): view differs from its query: %s", step, what, mismatch)
		}
		// (2) Each view catches up with the model (the latest write).
		for _, v := range views {
			if !created[v.name] {
				continue
			}
			want := model.eval(v.model)
			var got []string
			err := waitFor(20*time.Second, func() error {
				var err error
				if got, err = tryQueryRows(c, "SELECT * FROM "+v.name); err != nil {
					return err
				}
				if !reflect.DeepEqual(got, want) {
					return fmt.Errorf("differs")
				}
				return nil
			})
			if err != nil {
				t.Fatalf("step %d (%s): %s never reached the model: %v\n got %q\nwant %q", step, what, v.name, err, got, want)
			}
		}
	}

	const steps = 36
	for step := 1; step <= steps; step++ {
		op := randomOp(rng)
		for _, q := range op.stmts {
			if _, err := c.Exec(context.Background(), q); err != nil {
				t.Fatalf("step %d: %s: %v", step, q, err)
			}
		}
		op.apply(&model)
		create(step)
		if step == steps/2 || step == steps {
			// Restart before the views absorbed the last write.
			s.Stop()
			s, c = start()
			check(step, "after restart")
			continue
		}
		check(step, strings.Join(op.stmts, "; "))
	}
	if len(model.rows) == 0 {
		t.Log("the model ended empty")
	}
	mustExec(t, c, "INSERT INTO t VALUES (1, 100, 'after')")
	model.rows = append(model.rows, mvRow{a: 1, b: ptr(int64(100)), s: ptr("after")})
	check(steps+1, "write after the last restart")
}

func ptr[T any](v T) *T { return &v }

// TestMaterializedViewDefinitions covers how a view is defined and
// restored: column names, views over views, and a restart after the view
// a materialized view reads was dropped.
func TestMaterializedViewDefinitions(t *testing.T) {
	blob, cons := blobmem.New(), consmem.New()
	s := testserver.Start(t, testserver.Options{Blob: blob, Consensus: cons})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c,
		"CREATE TABLE base (a int8 NOT NULL, b text)",
		"INSERT INTO base VALUES (1, 'one'), (2, 'two'), (3, 'three')",
		"CREATE MATERIALIZED VIEW renamed (x, y) AS SELECT a * 10, upper(b) FROM base WHERE a <> 2",
	)
	want := []string{"10|ONE", "30|THREE"}
	if err := waitFor(20*time.Second, func() error {
		got, err := tryQueryRows(c, "SELECT x, y FROM renamed")
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("got %q, want %q", got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Run("RestartAfterDroppingAViewItReads", func(t *testing.T) {
		mustExec(t, c, "CREATE VIEW vv AS SELECT a FROM base", "CREATE MATERIALIZED VIEW mv_vv AS SELECT a FROM vv")
		_, err := c.Exec(context.Background(), "DROP VIEW vv")
		wantCode(t, err, "2BP01", "DROP VIEW read by a materialized view")
		s.Stop()
		s = testserver.Start(t, testserver.Options{Blob: blob, Consensus: cons})
		c = connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
		if got := queryRows(t, c, "SHOW MATERIALIZED VIEWS"); len(got) != 2 {
			t.Errorf("after restart: %q", got)
		}
	})
}

// TestMaterializedViewErrors: a row the view's expressions cannot evaluate
// must surface as an error to readers, not as silently stale contents.
func TestMaterializedViewErrors(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE dz (a int8)", "INSERT INTO dz VALUES (1), (2)",
		"CREATE MATERIALIZED VIEW dzm AS SELECT 10 / a AS q FROM dz", "INSERT INTO dz VALUES (0)")
	_, err := c.Exec(ctx, "SELECT 10 / a AS q FROM dz")
	wantCode(t, err, "22012", "fresh query")
	if err := waitFor(5*time.Second, func() error {
		_, err := tryQueryRows(c, "SELECT * FROM dzm")
		if pgCode(err) != "22012" {
			return fmt.Errorf("SELECT * FROM dzm: %v, want 22012", err)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	// So must a read AS OF a time the stalled view will not reach: it
	// waited for it forever.
	// The stalled view's upper: mz_now() is the clock, which the oracle's
	// timestamps may run ahead of after quick writes.
	var upper string
	if err := c.QueryRow(ctx, "SELECT upper::text FROM mz_internal.mz_storage_shards WHERE name = 'dzm'").Scan(&upper); err != nil {
		t.Fatal(err)
	}
	at, err := strconv.ParseUint(upper, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SELECT * FROM dzm AS OF %d", "SUBSCRIBE dzm AS OF %d", "SUBSCRIBE (SELECT q FROM dzm WHERE q > 1) AS OF %d"} {
		q = fmt.Sprintf(q, at)
		_, err := tryQueryRows(c, q)
		wantCode(t, err, "22012", q)
	}
	mustExec(t, c, "DELETE FROM dz WHERE a = 0", "INSERT INTO dz VALUES (5)")
	if err := waitFor(5*time.Second, func() error {
		got, err := tryQueryRows(c, "SELECT * FROM dzm")
		if err != nil || !reflect.DeepEqual(got, []string{"10", "2", "5"}) {
			return fmt.Errorf("after removing the bad row: %q, %v", got, err)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// TestMaterializedViewReadYourWrites: under the session's default
// transaction_isolation, 'strict serializable', a SELECT from a view issued
// after an INSERT into its input was acknowledged must see the insert.
func TestMaterializedViewReadYourWrites(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, c, "CREATE TABLE lin (a int8)", "CREATE MATERIALIZED VIEW linm AS SELECT a FROM lin")
	stale := 0
	for i := 1; i <= 10; i++ {
		mustExec(t, c, fmt.Sprintf("INSERT INTO lin VALUES (%d)", i))
		if got := queryRows(t, c, "SELECT a FROM linm"); len(got) != i {
			stale++
		}
	}
	if stale > 0 {
		t.Errorf("%d of 10 reads of the view missed the acknowledged insert before them", stale)
	}
}
