package pgsink

import (
	"context"
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/consumer"
)

// tableWriter writes one batch's updates of one source into one table in
// the open transaction.
type tableWriter struct {
	s        *Sink
	tx       pgx.Tx
	t        Table
	cols     []consumer.Column
	frontier consumer.Frontier
	table    string // where rows go: the target or its staging table

	names []string // column names
	nkey  int      // the key columns come first (ENVELOPE UPSERT order)
}

func (w *tableWriter) init() error {
	if w.table == "" {
		w.table = w.t.Name
	}
	if len(w.cols) == 0 {
		return ErrNoColumns
	}
	w.names = make([]string, len(w.cols))
	for i, c := range w.cols {
		w.names[i] = c.Name
	}
	w.nkey = len(w.t.Key)
	for i, k := range w.t.Key {
		if i >= len(w.names) || w.names[i] != k {
			return fmt.Errorf("%w: %s (columns %v; subscribe with %s)", ErrBadKey, k, w.names, w.t.Envelope())
		}
	}
	return nil
}

// createStaging creates the empty table a snapshot is loaded into, with
// the source's column types and the key as primary key.
func (w *tableWriter) createStaging(ctx context.Context) error {
	staging := stagingName(w.t.Name)
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (", ident(staging))
	for i, c := range w.cols {
		fmt.Fprintf(&b, "%s %s, ", ident(c.Name), c.TypeName)
		_ = i
	}
	fmt.Fprintf(&b, "CONSTRAINT %s PRIMARY KEY (%s))", ident(staging+"_pkey"), w.list(w.names[:w.nkey], ""))
	if _, err := w.tx.Exec(ctx, "DROP TABLE IF EXISTS "+ident(staging)+"; "+b.String()); err != nil {
		return fmt.Errorf("create %s: %w", staging, err)
	}
	return nil
}

// list renders quoted column names, each prefixed.
func (w *tableWriter) list(names []string, prefix string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = prefix + ident(n)
	}
	return strings.Join(q, ", ")
}

// upsertSQL is the statement that inserts or replaces rows by key, from
// VALUES (single row) or from a SELECT.
func (w *tableWriter) upsertSQL(source string) string {
	var set []string
	for _, n := range w.names[w.nkey:] {
		set = append(set, ident(n)+" = EXCLUDED."+ident(n))
	}
	action := "DO NOTHING"
	if len(set) > 0 {
		action = "DO UPDATE SET " + strings.Join(set, ", ")
	}
	return fmt.Sprintf("INSERT INTO %s (%s) %s ON CONFLICT (%s) %s",
		ident(w.table), w.list(w.names, ""), source, w.list(w.names[:w.nkey], ""), action)
}

// copySnapshot loads the snapshot's rows into the empty staging table.
func (w *tableWriter) copySnapshot(ctx context.Context, ups []consumer.Update) error {
	rows := make([][]any, 0, len(ups))
	for _, u := range ups {
		switch u.State {
		case "upsert", "insert":
			rows = append(rows, u.Values)
		case "key_violation":
			if err := w.s.reject(ctx, w.tx, w.t.Name, w.frontier, u.Values, "key violation in the source"); err != nil {
				return err
			}
		case "":
			return fmt.Errorf("pgsink: %s: source not subscribed with %s", w.t.Name, w.t.Envelope())
		}
	}
	if len(rows) == 0 {
		return nil
	}
	err := w.savepoint(ctx, "", func() error {
		_, err := w.tx.CopyFrom(ctx, pgx.Identifier{w.table}, w.names, pgx.CopyFromRows(rows))
		return err
	}, "")
	if err == nil {
		return nil
	}
	// Some row is unacceptable: find it (them) one by one.
	return w.upsertEach(ctx, rows)
}

// apply consolidates updates by key (the last state of each key wins; order
// is the stream's, timestamps non-decreasing) and applies one bulk upsert
// and one bulk delete.
func (w *tableWriter) apply(ctx context.Context, ups []consumer.Update) error {
	if len(ups) == 0 {
		return nil
	}
	type change struct {
		vals []any
		del  bool
	}
	last := map[string]change{}
	var order []string
	for _, u := range ups {
		k := keyString(u.Values[:w.nkey])
		if _, seen := last[k]; !seen {
			order = append(order, k)
		}
		switch u.State {
		case "upsert", "insert":
			last[k] = change{vals: u.Values}
		case "delete":
			last[k] = change{vals: u.Values, del: true}
		case "key_violation":
			delete(last, k)
			if err := w.s.reject(ctx, w.tx, w.t.Name, w.frontier, u.Values, "key violation in the source"); err != nil {
				return err
			}
		default:
			return fmt.Errorf("pgsink: %s: source not subscribed with %s (mz_state %q)", w.t.Name, w.t.Envelope(), u.State)
		}
	}
	var upserts, deletes [][]any
	for _, k := range order {
		c, ok := last[k]
		switch {
		case !ok:
		case c.del:
			deletes = append(deletes, c.vals[:w.nkey])
		default:
			upserts = append(upserts, c.vals)
		}
	}
	if len(deletes) > 0 {
		if err := w.bulk(ctx, "shardtail_del", w.names[:w.nkey], deletes, func(tmp string) string {
			var on []string
			for _, n := range w.names[:w.nkey] {
				on = append(on, "t."+ident(n)+" = d."+ident(n))
			}
			return fmt.Sprintf("DELETE FROM %s t USING %s d WHERE %s", ident(w.table), tmp, strings.Join(on, " AND "))
		}); err != nil {
			return fmt.Errorf("delete from %s: %w", w.table, err)
		}
	}
	if len(upserts) > 0 {
		err := w.bulk(ctx, "shardtail_up", w.names, upserts, func(tmp string) string {
			return w.upsertSQL("SELECT " + w.list(w.names, "") + " FROM " + tmp)
		})
		if err != nil {
			return w.upsertEach(ctx, upserts)
		}
	}
	return nil
}

// bulk copies rows into a temporary table shaped like the target's
// columns and runs stmt(temp) over it, inside a savepoint.
func (w *tableWriter) bulk(ctx context.Context, prefix string, cols []string, rows [][]any, stmt func(tmp string) string) error {
	tmp := prefix + "_" + w.table
	// The temporary table lives as long as the connection (created once,
	// emptied at each commit): creating one per transaction churns the
	// catalog at every batch. It needs emptying only if this transaction
	// filled it already.
	first := ""
	created := false
	switch {
	case !w.s.temps[tmp] && !slices.Contains(w.s.newTemps, tmp):
		first = fmt.Sprintf("CREATE TEMP TABLE IF NOT EXISTS %s ON COMMIT DELETE ROWS AS SELECT %s FROM %s WITH NO DATA",
			ident(tmp), w.list(cols, ""), ident(w.table))
		created = true
	case w.s.used[tmp]:
		first = "DELETE FROM " + ident(tmp)
	}
	err := w.savepoint(ctx, first, func() error {
		_, err := w.tx.CopyFrom(ctx, pgx.Identifier{tmp}, cols, pgx.CopyFromRows(rows))
		return err
	}, stmt(ident(tmp)))
	if err == nil {
		w.s.used[tmp] = true
		if created {
			// Only a savepoint that committed keeps what it created.
			w.s.newTemps = append(w.s.newTemps, tmp)
		}
	}
	return err
}

// upsertEach writes rows one at a time, each in its own savepoint, and
// rejects those the target refuses.
func (w *tableWriter) upsertEach(ctx context.Context, rows [][]any) error {
	ph := make([]string, len(w.names))
	for i := range ph {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	q := w.upsertSQL("VALUES (" + strings.Join(ph, ", ") + ")")
	for _, r := range rows {
		err := w.savepoint(ctx, "", func() error {
			_, err := w.tx.Exec(ctx, q, r...)
			return err
		}, "")
		if err != nil {
			if err := w.s.reject(ctx, w.tx, w.t.Name, w.frontier, r, err.Error()); err != nil {
				return err
			}
		}
	}
	return nil
}

// savepointName is the one savepoint the sink uses: savepoints never nest.
const savepointName = "shardtail_sp"

// savepoint runs the statement first (if any), f, and the statement last
// (if any) in a savepoint: on error the transaction is back where it was and
// stays usable. first and last share their round trip with the SAVEPOINT
// and the RELEASE (one simple-protocol query each, which stops at its first
// error): every round trip adds to each batch's latency.
func (w *tableWriter) savepoint(ctx context.Context, first string, f func() error, last string) error {
	err := w.exec(ctx, "SAVEPOINT "+savepointName, first)
	if err == nil {
		err = f()
	}
	if err == nil {
		err = w.exec(ctx, last, "RELEASE SAVEPOINT "+savepointName)
	}
	if err != nil {
		//nolint:errcheck // the statement's error is the one to report; a failed rollback leaves the transaction aborted, which the next statement reports
		w.exec(ctx, "ROLLBACK TO SAVEPOINT "+savepointName, "RELEASE SAVEPOINT "+savepointName)
	}
	return err
}

// exec runs the non-empty statements of stmts as one simple-protocol
// query.
func (w *tableWriter) exec(ctx context.Context, stmts ...string) error {
	stmts = slices.DeleteFunc(stmts, func(s string) bool { return s == "" })
	_, err := w.tx.Exec(ctx, strings.Join(stmts, "; "))
	return err
}

// keyString renders a key for consolidation: equal keys give equal
// strings. Values that hide their content behind pointers (pgtype.Numeric)
// render through their driver.Valuer.
func keyString(vals []any) string {
	var b strings.Builder
	for _, v := range vals {
		if dv, ok := v.(driver.Valuer); ok {
			if x, err := dv.Value(); err == nil {
				v = x
			}
		}
		fmt.Fprintf(&b, "%T:%v\x00", v, v)
	}
	return b.String()
}
