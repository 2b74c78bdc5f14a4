package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/persist"
)

// WITHIN TIMESTAMP ORDER BY and the envelopes apply to a whole timestamp:
// a snapshot of several cursor chunks, a listen batch of several parts, a
// resume whose first batch is large. On both paths.

// streamRow is a row of a SUBSCRIBE ... WITH (PROGRESS): its mz_timestamp,
// mz_progressed and the columns after it, as text.
type streamRow struct {
	ts       uint64
	progress bool
	cols     []string
}

// cursorStream reads the rows of cursor c one at a time, fetching as needed.
type cursorStream struct {
	c       *pgx.Conn
	pending []streamRow
}

func (s *cursorStream) next(t *testing.T, ctx context.Context) streamRow {
	t.Helper()
	for len(s.pending) == 0 {
		rows, err := s.c.Query(ctx, "FETCH ALL c", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals := rows.RawValues()
			ts, err := strconv.ParseUint(string(vals[0]), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			r := streamRow{ts: ts, progress: string(vals[1]) == "t"}
			for _, v := range vals[2:] {
				if v == nil {
					r.cols = append(r.cols, "NULL")
				} else {
					r.cols = append(r.cols, string(v))
				}
			}
			s.pending = append(s.pending, r)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	r := s.pending[0]
	s.pending = s.pending[1:]
	return r
}

// progress returns the next progress row's timestamp; data rows are an
// error.
func (s *cursorStream) progress(t *testing.T, ctx context.Context) uint64 {
	t.Helper()
	r := s.next(t, ctx)
	if !r.progress {
		t.Fatalf("data row %v, want a progress row", r)
	}
	return r.ts
}

// timestamp skips progress rows up to the next data row and returns the
// data rows of its timestamp, up to the progress row that closes it.
func (s *cursorStream) timestamp(t *testing.T, ctx context.Context) []streamRow {
	t.Helper()
	r := s.next(t, ctx)
	for r.progress {
		r = s.next(t, ctx)
	}
	out := []streamRow{r}
	for {
		r := s.next(t, ctx)
		if r.progress {
			if r.ts <= out[0].ts {
				t.Fatalf("progress %d does not close timestamp %d", r.ts, out[0].ts)
			}
			return out
		}
		out = append(out, r)
	}
}

// wantDescending checks rows are "1 a b" for a = n-1 down to 0, all at ts.
func wantDescending(t *testing.T, rows []streamRow, n int, ts uint64) {
	t.Helper()
	if len(rows) != n {
		t.Fatalf("got %d rows, want %d", len(rows), n)
	}
	for i, r := range rows {
		a := n - 1 - i
		if got, want := strings.Join(r.cols, " "), fmt.Sprintf("1 %d v%d", a, a); got != want || r.ts != ts {
			t.Fatalf("row %d: got %q at %d, want %q at %d (not one sorted run)", i, got, r.ts, want, ts)
		}
	}
}

// insertSeries inserts rows (i, 'v'||i) for i in [0, n) in one statement.
func insertSeries(t *testing.T, c *pgx.Conn, table string, n int) {
	t.Helper()
	copyLines(t, c, table, n, func(i int) string { return fmt.Sprintf("%d\tv%d", i, i) })
}

// copyLines loads n rows, line(i) each in COPY text format, with one COPY.
func copyLines(t *testing.T, c *pgx.Conn, table string, n int, line func(i int) string) {
	t.Helper()
	var sb strings.Builder
	for i := range n {
		sb.WriteString(line(i))
		sb.WriteByte('\n')
	}
	if _, err := c.PgConn().CopyFrom(context.Background(), strings.NewReader(sb.String()), "COPY "+table+" FROM STDIN"); err != nil {
		t.Fatalf("COPY %s: %v", table, err)
	}
}

// TestSubscribeOrderSnapshotWhole: a 20,000-row snapshot (three cursor
// chunks) ordered DESC is one sorted run on both paths.
func TestSubscribeOrderSnapshotWhole(t *testing.T) {
	for _, p := range subscribePaths {
		t.Run(p.name, func(t *testing.T) {
			s := testserver.Start(t, testserver.Options{})
			c := connect(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			execAll(t, c, "CREATE TABLE t (a int, b text)")
			insertSeries(t, c, "t", 20000)
			execAll(t, c, "SET enable_subscribe_persist_fast_path = "+p.flag, "BEGIN",
				"DECLARE c CURSOR FOR SUBSCRIBE t WITH (PROGRESS) WITHIN TIMESTAMP ORDER BY a DESC")
			cs := &cursorStream{c: c}
			asOf := cs.progress(t, ctx)
			wantDescending(t, cs.timestamp(t, ctx), 20000, asOf)
		})
	}
}

// TestSubscribeEnvelopeSnapshotWhole: 9,000 rows of one key over two
// cursor chunks are one key_violation, whether the key leads the row (the
// output streams by key group) or not (the snapshot is held whole).
func TestSubscribeEnvelopeSnapshotWhole(t *testing.T) {
	for _, p := range subscribePaths {
		t.Run(p.name, func(t *testing.T) {
			s := testserver.Start(t, testserver.Options{})
			c := connect(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			execAll(t, c, "CREATE TABLE lead (k int, v text)", "CREATE TABLE inside (v text, k int)")
			// lead: keys 1 and 2 have 9,000 rows each; inside: key 1.
			copyLines(t, c, "lead", 18001, func(i int) string {
				if i == 18000 {
					return "3\tonly"
				}
				return fmt.Sprintf("%d\tv%05d", 1+i/9000, i)
			})
			copyLines(t, c, "inside", 9001, func(i int) string {
				if i == 9000 {
					return "only\t0"
				}
				return fmt.Sprintf("v%05d\t1", i)
			})
			execAll(t, c, "SET enable_subscribe_persist_fast_path = "+p.flag)
			for _, tc := range []struct{ query, want string }{
				{"SUBSCRIBE lead ENVELOPE UPSERT (KEY (k))", "key_violation 1 NULL|key_violation 2 NULL|upsert 3 only"},
				{"SUBSCRIBE inside ENVELOPE UPSERT (KEY (k))", "upsert 0 only|key_violation 1 NULL"},
				{"SUBSCRIBE inside ENVELOPE DEBEZIUM (KEY (k))", "insert 0 NULL only|key_violation 1 NULL NULL"},
			} {
				execAll(t, c, "BEGIN", "DECLARE c CURSOR FOR "+tc.query+" WITH (PROGRESS)")
				cs := &cursorStream{c: c}
				cs.progress(t, ctx)
				var got []string
				for _, r := range cs.timestamp(t, ctx) {
					got = append(got, strings.Join(r.cols, " "))
				}
				if strings.Join(got, "|") != tc.want {
					t.Errorf("%s: got %d rows %.200q, want %q", tc.query, len(got), got, tc.want)
				}
				execAll(t, c, "COMMIT")
			}
		})
	}
}

// TestSubscribeOrderListenAndResume: one INSERT of 20,000 rows, written as
// several parts, reaches an ordered subscribe as one sorted run, and so
// does a resume (AS OF F-1 WITH (SNAPSHOT = false)) whose first batch it
// is. The fast path's window is tiny, so its resume reads the shard.
func TestSubscribeOrderListenAndResume(t *testing.T) {
	for _, p := range subscribePaths {
		t.Run(p.name, func(t *testing.T) {
			s := testserver.Start(t, testserver.Options{Persist: persist.Config{PartTargetBytes: 32 << 10}, Tail: testserverWindow(1)})
			w, r, again := connect(t, s), connect(t, s), connect(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			execAll(t, w, "CREATE TABLE t (a int, b text)", "ALTER TABLE t SET (RETAIN HISTORY FOR '1h')")
			const query = "SUBSCRIBE t WITHIN TIMESTAMP ORDER BY a DESC WITH (PROGRESS)"
			execAll(t, r, "SET enable_subscribe_persist_fast_path = "+p.flag, "BEGIN", "DECLARE c CURSOR FOR "+query)
			cs := &cursorStream{c: r}
			// The resume point: a progress row after AS OF + 1 (so that
			// F - 1 is readable); every row below F was seen.
			asOf := cs.progress(t, ctx)
			f := asOf
			for f <= asOf+1 {
				f = cs.progress(t, ctx)
			}
			before := partsOf(t, s, "t")
			insertSeries(t, w, "t", 20000)
			if parts := partsOf(t, s, "t") - before; parts < 3 {
				t.Fatalf("the INSERT wrote %d parts, want several", parts)
			}
			rows := cs.timestamp(t, ctx)
			wrote := rows[0].ts
			wantDescending(t, rows, 20000, wrote)

			execAll(t, again, "SET enable_subscribe_persist_fast_path = "+p.flag, "BEGIN",
				fmt.Sprintf("DECLARE c CURSOR FOR %s AS OF %d", strings.Replace(query, "(PROGRESS)", "(PROGRESS, SNAPSHOT = false)", 1), f-1))
			resumed := &cursorStream{c: again}
			if got := resumed.progress(t, ctx); got != f-1 {
				t.Fatalf("resume starts at %d, want %d", got, f-1)
			}
			wantDescending(t, resumed.timestamp(t, ctx), 20000, wrote)
		})
	}
}

// partsOf counts the parts in a collection's shard state.
func partsOf(t *testing.T, s *testserver.Server, name string) int {
	t.Helper()
	st, err := s.Persist.State(context.Background(), shardOf(t, s, name))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range st.Batches {
		n += len(b.Parts)
	}
	return n
}

// TestSubscribeOrderMaxResultSize: an ordered snapshot past max_result_size
// fails with 53200 and max_result_size's message; plain output of the same
// snapshot, and an ORDER BY the row order already serves, stream through
// the same limit.
func TestSubscribeOrderMaxResultSize(t *testing.T) {
	for _, p := range subscribePaths {
		t.Run(p.name, func(t *testing.T) {
			s := testserver.Start(t, testserver.Options{})
			c := connect(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			execAll(t, c, "CREATE TABLE t (a int NOT NULL, b text)")
			insertSeries(t, c, "t", 20000)
			execAll(t, c, "SET enable_subscribe_persist_fast_path = "+p.flag, "SET max_result_size = '64kB'")

			execAll(t, c, "BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE t WITH (PROGRESS) WITHIN TIMESTAMP ORDER BY a DESC")
			err := fetchSnapshotErr(ctx, c)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "53200" || pe.Message != "result exceeds max size of 64 KiB" {
				t.Fatalf("ordered: got %v, want 53200 result exceeds max size of 64 KiB", err)
			}
			execAll(t, c, "ROLLBACK")

			for _, query := range []string{"SUBSCRIBE t WITH (PROGRESS)", "SUBSCRIBE t WITH (PROGRESS) WITHIN TIMESTAMP ORDER BY a"} {
				execAll(t, c, "BEGIN", "DECLARE c CURSOR FOR "+query)
				var got []string
				asOf := uint64(0)
				for done := false; !done; {
					rows, err := c.Query(ctx, "FETCH 500 c", pgx.QueryExecModeSimpleProtocol)
					if err != nil {
						t.Fatalf("%s: %v", query, err)
					}
					for rows.Next() {
						v := rows.RawValues()
						ts, _ := strconv.ParseUint(string(v[0]), 10, 64)
						switch {
						case string(v[1]) == "t" && asOf == 0:
							asOf = ts
						case string(v[1]) == "t":
							done = true
						default:
							got = append(got, string(v[3]))
						}
					}
					if err := rows.Err(); err != nil {
						t.Fatalf("%s: %v", query, err)
					}
				}
				if len(got) != 20000 {
					t.Fatalf("%s: got %d rows, want 20000", query, len(got))
				}
				if strings.Contains(query, "ORDER BY") {
					for i, a := range got {
						if a != strconv.Itoa(i) {
							t.Fatalf("%s: row %d has a = %s", query, i, a)
						}
					}
				}
				execAll(t, c, "COMMIT")
			}
		})
	}
}

// fetchSnapshotErr fetches cursor c (WITH (PROGRESS)) until an error or the
// progress row that closes its snapshot, and returns the error.
func fetchSnapshotErr(ctx context.Context, c *pgx.Conn) error {
	for progress := 0; progress < 2; {
		rows, err := fetchErr(ctx, c, "FETCH 100 c")
		if err != nil {
			return err
		}
		for _, r := range rows {
			if strings.Fields(r)[1] == "t" {
				progress++
			}
		}
	}
	return nil
}
