package adapter_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// The tests of FETCH without TIMEOUT: it blocks until a row is ready, then
// returns every row that is ready, up to its count (SUBSCRIBE-SPEC.md,
// "Cursors"), on both paths alike. On the fast path the rows that are
// ready come from several places (the snapshot's end, the window's
// batches, the subscriber's queue), and a FETCH must take from all of
// them, not return after the first.

// subscribeRow is a row of SUBSCRIBE ... WITH (PROGRESS) over a table
// (k int): its timestamp, and "progress" or "<diff> <k>".
type subscribeRow struct {
	ts   uint64
	what string
}

func (r subscribeRow) String() string { return fmt.Sprintf("%d %s", r.ts, r.what) }

// parseSubscribeRows parses rawRows' rendering of such rows.
func parseSubscribeRows(t *testing.T, lines []string) []subscribeRow {
	t.Helper()
	var out []subscribeRow
	for _, l := range lines {
		f := strings.Fields(l)
		ts, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || len(f) != 4 {
			t.Fatalf("row %q: want mz_timestamp, mz_progressed, mz_diff, k", l)
		}
		r := subscribeRow{ts: ts, what: "progress"}
		if f[1] == "f" {
			r.what = f[2] + " " + f[3]
		}
		out = append(out, r)
	}
	return out
}

// fetchRows runs a FETCH on c and parses its rows.
func fetchRows(t *testing.T, ctx context.Context, c *pgx.Conn, q string) []subscribeRow {
	t.Helper()
	lines, err := rawRows(ctx, c, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return parseSubscribeRows(t, lines)
}

// upperOf is the upper of table's shard.
func upperOf(t *testing.T, ctx context.Context, c *pgx.Conn, table string) uint64 {
	t.Helper()
	var text string
	if err := c.QueryRow(ctx, "SELECT upper FROM mz_internal.mz_storage_shards WHERE name = '"+table+"'",
		pgx.QueryExecModeSimpleProtocol).Scan(&text); err != nil {
		t.Fatal(err)
	}
	u, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// waitQueued waits until the dataflow-path subscription to table (its
// only one) has queued its rows up to frontier: its pipeline's rows are
// ready from then on. (A fast-path subscriber's rows are ready once its
// shared tail has them, which another subscriber of the tail shows.)
func waitQueued(t *testing.T, ctx context.Context, c *pgx.Conn, table string, frontier uint64) {
	t.Helper()
	err := waitFor(30*time.Second, func() error {
		var text string
		if err := c.QueryRow(ctx, "SELECT delivered_frontier FROM mz_internal.mz_subscriptions WHERE collection = '"+table+"'",
			pgx.QueryExecModeSimpleProtocol).Scan(&text); err != nil {
			return err
		}
		if f, err := strconv.ParseUint(text, 10, 64); err != nil || f < frontier {
			return fmt.Errorf("delivered_frontier %s, want %d", text, frontier)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFetchReturnsWhatIsReady: after a pause, one FETCH ALL returns the
// snapshot and every update and progress row that arrived meanwhile, on
// both paths; the fast path returned the snapshot and one progress row,
// and the rest at the next FETCH.
func TestFetchReturnsWhatIsReady(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	for _, p := range subscribePaths {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			table := "fx_" + p.flag
			w, r, probe := connect(t, s), connect(t, s), connect(t, s)
			mustExec(t, w, "CREATE TABLE "+table+" (k int) WITH (RETAIN HISTORY FOR '1 hour')")
			for k := 1; k <= 4; k++ {
				mustExec(t, w, fmt.Sprintf("INSERT INTO %s VALUES (%d)", table, k))
			}
			mustExec(t, r, "SET enable_subscribe_persist_fast_path = "+p.flag, "BEGIN",
				"DECLARE c CURSOR FOR SUBSCRIBE "+table+" WITH (PROGRESS)")
			first := fetchRows(t, ctx, r, "FETCH 1 c")
			if len(first) != 1 || first[0].what != "progress" {
				t.Fatalf("FETCH 1: %v, want the progress row at AS OF", first)
			}
			asOf := first[0].ts
			mustExec(t, w, "INSERT INTO "+table+" VALUES (5)", "INSERT INTO "+table+" VALUES (6)")

			// The pause: until a subscriber from the same AS OF has seen
			// the row 6 and the progress after it. On the fast path that
			// subscriber shares the cursor's tail; on the dataflow path
			// the cursor's own pipeline must have queued as far.
			mustExec(t, probe, "SET enable_subscribe_persist_fast_path = "+p.flag, "BEGIN",
				fmt.Sprintf("DECLARE p CURSOR FOR SUBSCRIBE %s WITH (PROGRESS) AS OF %d", table, asOf))
			var ts6, ready uint64
			for ready == 0 {
				for _, row := range fetchRows(t, ctx, probe, "FETCH ALL p") {
					switch {
					case row.what == "1 6":
						ts6 = row.ts
					case ts6 != 0 && row.what == "progress" && row.ts > ts6:
						ready = row.ts
					}
				}
			}
			mustExec(t, probe, "COMMIT")
			if p.flag == "off" {
				waitQueued(t, ctx, w, table, ready)
			}

			got := fetchRows(t, ctx, r, "FETCH ALL c")
			var data []string
			var frontier uint64
			for _, row := range got {
				if row.what == "progress" {
					frontier = max(frontier, row.ts)
				} else {
					data = append(data, row.String())
				}
			}
			want := []string{fmt.Sprintf("%d 1 1", asOf), fmt.Sprintf("%d 1 2", asOf), fmt.Sprintf("%d 1 3", asOf), fmt.Sprintf("%d 1 4", asOf)}
			if len(data) < 6 || !strings.HasSuffix(data[4], " 1 5") || data[5] != fmt.Sprintf("%d 1 6", ts6) || frontier < ready {
				t.Fatalf("FETCH ALL after the pause: %v\nwant the snapshot %v, the rows 5 and 6 (at %d) and progress to %d or beyond",
					got, want, ts6, ready)
			}
			slices.Sort(data[:4]) // a multiset within the timestamp
			wantRows(t, "snapshot", data[:4], want)
			mustExec(t, r, "COMMIT")
		})
	}
}

// TestFetchCompletedUpTo: a subscribe over old history that completed at
// UP TO while its cursor was not fetched returns the rest of its rows at
// the next FETCH ALL, and 0 rows at once at the one after, on both paths,
// with the rows of a bare SUBSCRIBE; the fast path returned a timestamp
// per FETCH.
func TestFetchCompletedUpTo(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := connect(t, s)
	mustExec(t, w, "CREATE TABLE fx (k int) WITH (RETAIN HISTORY FOR '1 hour')", "INSERT INTO fx VALUES (1)")
	// AS OF after the first write, UP TO after the last: the snapshot has
	// the row 1, and the rows 2 to 4 follow at times of their own.
	asOf := upperOf(t, ctx, w, "fx") - 1
	for k := 2; k <= 4; k++ {
		mustExec(t, w, fmt.Sprintf("INSERT INTO fx VALUES (%d)", k))
	}
	upTo := upperOf(t, ctx, w, "fx")
	subscribe := fmt.Sprintf("SUBSCRIBE fx WITH (PROGRESS) AS OF %d UP TO %d", asOf, upTo)
	bare := func(c *pgx.Conn) []subscribeRow {
		t.Helper()
		lines, err := rawRows(ctx, c, subscribe)
		if err != nil {
			t.Fatalf("%s: %v", subscribe, err)
		}
		return parseSubscribeRows(t, lines)
	}
	mustExec(t, w, "SET enable_subscribe_persist_fast_path = off")
	want := bare(w)
	if len(want) < 5 {
		t.Fatalf("%s: %v, want a progress row, the row 1 and the rows 2 to 4", subscribe, want)
	}
	for _, p := range subscribePaths {
		t.Run(p.name, func(t *testing.T) {
			r, probe := connect(t, s), connect(t, s)
			mustExec(t, r, "SET enable_subscribe_persist_fast_path = "+p.flag, "BEGIN", "DECLARE c CURSOR FOR "+subscribe)
			got := fetchRows(t, ctx, r, "FETCH 1 c")
			// The pause: until the subscribe has completed. On the fast path
			// a bare SUBSCRIBE sharing the cursor's tail (made by the
			// cursor at its AS OF) completes once the tail has every row;
			// on the dataflow path the cursor's own pipeline must have
			// queued them.
			if p.flag == "on" {
				mustExec(t, probe, "SET enable_subscribe_persist_fast_path = on")
				wantRows(t, "bare SUBSCRIBE on the fast path", strs(bare(probe)), strs(want))
			} else {
				waitQueued(t, ctx, w, "fx", upTo)
			}
			got = append(got, fetchRows(t, ctx, r, "FETCH ALL c")...)
			wantRows(t, "FETCH 1, FETCH ALL", strs(got), strs(want))
			if rest := fetchRows(t, ctx, r, "FETCH ALL c"); len(rest) != 0 {
				t.Errorf("FETCH ALL after completion: %v, want 0 rows", rest)
			}
			mustExec(t, r, "COMMIT")
		})
	}
}

func strs(rows []subscribeRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.String()
	}
	return out
}
