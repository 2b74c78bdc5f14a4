package adapter_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/persist"
)

// registerHook runs a function once, when the next reader of a shard with
// purpose "select" is about to register: the moment a read that chose its
// timestamp first and took its hold second would be exposed.
type registerHook struct {
	mu    sync.Mutex
	shard string
	fn    func()
}

// arm makes the next registration of a "select" reader of shard run fn
// before its compare-and-set.
func (h *registerHook) arm(shard string, fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.shard, h.fn = shard, fn
}

// beforeRegister is persist.Config.BeforeRegister.
func (h *registerHook) beforeRegister(shard string, opts persist.ReaderOptions) {
	h.mu.Lock()
	fn := h.fn
	if fn != nil && (shard != h.shard || opts.Purpose != "select") {
		fn = nil
	}
	if fn != nil {
		h.fn = nil
	}
	h.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// TestReadHoldsItsTimestamp: a read without AS OF (SELECT, INSERT ...
// SELECT, COPY ... TO) succeeds even when compaction passes the collection's
// latest time while the read's reader registers — it reads at a time its
// reader holds instead of failing with "Timestamp ... is not valid" (XX000),
// as TestCopyFromSelect100k did on a loaded machine.
func TestReadHoldsItsTimestamp(t *testing.T) {
	hook := &registerHook{}
	s := testserver.Start(t, testserver.Options{Persist: persist.Config{BeforeRegister: hook.beforeRegister}, Tick: 10 * time.Millisecond})
	c, w := connect(t, s), connect(t, s)
	// With no history retained, since follows upper-1 at every tick.
	execAll(t, c, "CREATE TABLE t (a int8 NOT NULL)", "ALTER TABLE t SET (RETAIN HISTORY FOR '0s')",
		"CREATE TABLE u (a int8 NOT NULL)", "INSERT INTO t VALUES (1)")
	shard := shardOf(t, s, "t")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	next := int64(2)
	for _, tc := range []struct {
		stmt string
		read func(*testing.T, *pgx.Conn, string) []string
	}{
		{"SELECT a FROM t", func(t *testing.T, c *pgx.Conn, q string) []string { return queryRows(t, c, q) }},
		{"COPY (SELECT a FROM t) TO STDOUT", copyOutLines},
		{"COPY t TO STDOUT", copyOutLines},
		{"INSERT INTO u SELECT a FROM t", func(t *testing.T, c *pgx.Conn, q string) []string {
			mustExec(t, c, "DELETE FROM u", q)
			return queryRows(t, c, "SELECT a FROM u")
		}},
	} {
		t.Run(tc.stmt, func(t *testing.T) {
			// Before the reader registers, a write moves upper on and the
			// tick moves since past every time the statement could have
			// chosen before.
			var hookErr error
			hook.arm(shard, func() {
				st, err := s.Persist.State(ctx, shard)
				if err != nil {
					hookErr = err
					return
				}
				if _, err := w.Exec(ctx, fmt.Sprintf("INSERT INTO t VALUES (%d)", next)); err != nil {
					hookErr = err
					return
				}
				next++
				for hookErr == nil {
					cur, err := s.Persist.State(ctx, shard)
					if err != nil || cur.Since >= st.Upper {
						hookErr = err
						return
					}
					select {
					case <-ctx.Done():
						hookErr = ctx.Err()
					case <-time.After(time.Millisecond):
					}
				}
			})
			got := tc.read(t, c, tc.stmt)
			if hookErr != nil {
				t.Fatalf("advancing since: %v", hookErr)
			}
			// The read may or may not see the hook's write; every earlier
			// row is there.
			var want []string
			for i := int64(1); i < next-1; i++ {
				want = append(want, fmt.Sprint(i))
			}
			if len(got) == len(want)+1 {
				want = append(want, fmt.Sprint(next-1))
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: got %v, want %v", tc.stmt, got, want)
			}
		})
	}
}

// copyOutLines runs a COPY ... TO STDOUT and returns its lines, sorted.
func copyOutLines(t *testing.T, c *pgx.Conn, q string) []string {
	t.Helper()
	var buf bytes.Buffer
	if _, err := c.PgConn().CopyTo(context.Background(), &buf, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	lines := bytes.Fields(buf.Bytes())
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l)
	}
	slices.Sort(out)
	return out
}
