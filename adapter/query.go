package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/shardtail/shardtail/catalog"
	"github.com/shardtail/shardtail/dataflow"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// queryPlan is a SELECT over one collection: read the input's shard,
// apply the MFP (WHERE, select list), then ORDER BY / OFFSET / LIMIT.
// Views are inlined: a view's query plan is composed onto its input.
//
// A query that reads no collection — a VALUES list, FROM (VALUES ...), or
// a view of one — has a constant input instead: values is set, input is
// nil, and from is nil unless the query names a view.
type queryPlan struct {
	input   *catalog.Item // the collection whose shard is read; nil with values
	values  *valuesInput
	from    *catalog.Item // the relation the query names (a view is inlined into input)
	mfp     *mfp
	orderBy []orderKey
	limit   *constant // nil: none
	offset  *constant // nil: none
	asOf    *asOfClause
	params  []uint32
}

type orderKey struct {
	col        int
	desc       bool
	nullsFirst bool
}

func (q *queryPlan) schema() row.Schema { return q.mfp.OutputSchema() }

// checkGrouping refuses what a query over one relation does not run yet:
// GROUP BY, HAVING and DISTINCT.
func checkGrouping(sel *sql.Select) error {
	if sel.GroupBy != nil || sel.Having != nil {
		return errorf(codeFeatureNotSupp, "GROUP BY and aggregates are not supported yet")
	}
	if sel.Distinct {
		return errorf(codeFeatureNotSupp, "SELECT DISTINCT is not supported yet")
	}
	return nil
}

// planQuery plans a SELECT with FROM over one relation, or a VALUES list.
func (s *Session) planQuery(sel *sql.Select, paramOIDs []uint32) (*queryPlan, error) {
	if sel.IsValues() {
		vi, params, err := compileValues(sel.Values, paramOIDs)
		if err != nil {
			return nil, err
		}
		star := []sql.SelectItem{{Expr: &sql.Star{}}}
		m, _, err := compileMFP(vi.schema, "", nil, star, nil)
		if err != nil {
			return nil, err
		}
		q := &queryPlan{values: vi, mfp: m, params: params}
		return q, q.planTail(sel, star)
	}
	if len(sel.From) == 0 {
		return nil, errorf(codeFeatureNotSupp, "SELECT without FROM cannot be used here")
	}
	if len(sel.From) > 1 {
		return nil, errorf(codeFeatureNotSupp, "joins are not supported yet")
	}
	if err := checkGrouping(sel); err != nil {
		return nil, err
	}
	var input *catalog.Item
	var alias string
	var base *queryPlan
	var schema row.Schema
	var err error
	switch from := sel.From[0].(type) {
	case *sql.TableName:
		it, err := s.lookup(from.Name)
		if err != nil {
			return nil, err
		}
		if err := s.checkPrivilege(it, "SELECT"); err != nil {
			return nil, err
		}
		input, alias = it, from.Alias
		if alias == "" {
			alias = it.Name
		}
		if it.Kind == catalog.KindView {
			if base, err = s.planView(it); err != nil {
				return nil, err
			}
		}
	case *sql.DerivedTable:
		if !from.Query.IsValues() {
			return nil, errorf(codeFeatureNotSupp, "subqueries in FROM are not supported yet")
		}
		if base, err = s.planValuesTable(from); err != nil {
			return nil, err
		}
		alias = from.Alias
	case *sql.Join:
		return nil, errorf(codeFeatureNotSupp, "joins are not supported yet")
	default:
		return nil, errorf(codeFeatureNotSupp, "subqueries in FROM are not supported yet")
	}
	if base != nil {
		schema = base.schema()
	} else {
		schema = input.Schema
	}
	m, params, err := compileMFP(schema, alias, sel.Where, sel.Items, paramOIDs)
	if err != nil {
		return nil, err
	}
	q := &queryPlan{input: input, from: input, mfp: m, params: params}
	if base != nil {
		q.input, q.values = base.input, base.values
		q.mfp = composeMFP(base.mfp, m)
	}
	return q, q.planTail(sel, sel.Items)
}

// planValuesTable plans FROM (VALUES ...) [AS x(a, b)]: a constant input,
// evaluated when the query runs. Its parameters would be numbered apart
// from the outer query's, so they are not supported, nor is an ORDER BY
// or LIMIT inside it.
func (s *Session) planValuesTable(d *sql.DerivedTable) (*queryPlan, error) {
	if d.Query.OrderBy != nil || d.Query.Limit != nil || d.Query.Offset != nil {
		return nil, errorf(codeFeatureNotSupp, "ORDER BY, LIMIT and OFFSET in a VALUES subquery are not supported yet")
	}
	vi, params, err := compileValues(d.Query.Values, nil)
	if err != nil {
		return nil, err
	}
	if len(params) > 0 {
		return nil, errorf(codeFeatureNotSupp, "parameters in a VALUES subquery are not supported yet")
	}
	if vi, err = vi.rename(d.Alias, d.Columns); err != nil {
		return nil, err
	}
	star := []sql.SelectItem{{Expr: &sql.Star{}}}
	m, _, err := compileMFP(vi.schema, "", nil, star, nil)
	if err != nil {
		return nil, err
	}
	return &queryPlan{values: vi, mfp: m}, nil
}

// planTail plans ORDER BY, LIMIT, OFFSET and AS OF over the query's
// output. The last three are compiled after the rest, so that a parameter
// in them (LIMIT $1) is typed by its clause, and evaluated each time the
// query runs.
func (q *queryPlan) planTail(sel *sql.Select, items []sql.SelectItem) error {
	out := q.schema()
	for _, o := range sel.OrderBy {
		col, err := resolveOrderColumn(o.Expr, out, items)
		if err != nil {
			return err
		}
		q.orderBy = append(q.orderBy, orderKey{col: col, desc: o.Desc, nullsFirst: nullsFirst(o)})
	}
	scope := constScope(q.params)
	var err error
	if q.limit, err = compileCount(sel.Limit, scope); err != nil {
		return err
	}
	if q.offset, err = compileCount(sel.Offset, scope); err != nil {
		return err
	}
	if q.asOf, err = compileAsOf(sel.AsOf, scope); err != nil {
		return err
	}
	q.params = paramOIDsOf(scope)
	return nil
}

// bounds evaluates OFFSET and LIMIT with the parameter values: the rows to
// skip, and how many to return (-1: all).
func (q *queryPlan) bounds(params []row.Datum) (skip, limit int64, err error) {
	if skip, err = evalCount(q.offset, params, "OFFSET"); err != nil {
		return 0, 0, err
	}
	limit, err = evalCount(q.limit, params, "LIMIT")
	return skip, limit, err
}

// nullsFirst reports whether o sorts NULLs first: as written, else as
// PostgreSQL does by default (NULLs are larger than every value).
func nullsFirst(o sql.OrderItem) bool {
	switch o.Nulls {
	case sql.NullsFirst:
		return true
	case sql.NullsLast:
		return false
	}
	return o.Desc
}

// planView plans a view's stored query. Privileges are checked on the view
// itself, not on what it reads (the view's owner granted access by
// granting on the view), so the definition plans as the server.
func (s *Session) planView(it *catalog.Item) (*queryPlan, error) {
	st, err := sql.Parse(it.SQL)
	if err != nil {
		return nil, fmt.Errorf("view %s: %w", it.Name, err)
	}
	cv, ok := st.(*sql.CreateView)
	if !ok {
		return nil, fmt.Errorf("view %s: stored definition is a %T", it.Name, st)
	}
	q, err := s.c.systemSession().planQuery(cv.Query, nil)
	if err != nil {
		return nil, err
	}
	// The view's column names (CREATE VIEW v (a, b)) rename the output.
	q.mfp = renameMFP(q.mfp, it.Schema)
	return q, nil
}

// resolveOrderColumn finds the output column an ORDER BY item names: an
// output column name, an ordinal, or an expression equal to a select item.
func resolveOrderColumn(e sql.Expr, out row.Schema, items []sql.SelectItem) (int, error) {
	switch e := e.(type) {
	case *sql.NumberLit:
		n, err := e.Int64()
		if err != nil || n < 1 || int(n) > len(out.Columns) {
			return 0, errorf("42P10", "ORDER BY position %s is not in select list", e.Text)
		}
		return int(n) - 1, nil
	case *sql.ColumnRef:
		if i := out.Index(e.Column); i >= 0 {
			return i, nil
		}
	}
	for i, it := range items {
		if it.Expr != nil && it.Expr.String() == e.String() && i < len(out.Columns) {
			return i, nil
		}
	}
	return 0, errorf(codeFeatureNotSupp, "ORDER BY %s: only output columns can be ordered by", e)
}

// latestTime is the time a read without AS OF uses: the collection's
// latest complete time, and for a materialized view no earlier than the
// newest acknowledged write, waiting for the view to get there — so a read
// after a write sees it (strict serializable), whichever collection it
// reads.
func (s *Session) latestTime(ctx context.Context, it *catalog.Item, state *persist.State) (uint64, error) {
	floor := uint64(0)
	if it.Kind == catalog.KindMaterializedView && !s.c.isProxy() {
		floor = s.c.writeFloor(it)
	}
	for state.Upper == 0 || state.Upper-1 < floor {
		// A stalled view reports why instead of making readers wait.
		if err := s.c.viewError(it.ID); err != nil {
			return 0, err
		}
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		st, err := s.c.persist.WaitForUpper(wctx, it.Shard, floor)
		cancel()
		switch {
		case err == nil:
			state = st
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case !errors.Is(err, context.DeadlineExceeded):
			return 0, mapPersistErr(err, it.Name)
		}
	}
	return max(state.Upper-1, state.Since), nil
}

// readTimestamp chooses a read's timestamp: AS OF if given, else the
// latest complete time, chosen linearizably. held is the since of the
// reader already registered for the read (0 if none): the time is chosen
// at or above it, as Materialize takes read holds before it picks a
// timestamp. Chosen first and held after, the time could be compacted away
// in between — on a loaded machine the reader's registration can take
// longer than the collection's RETAIN HISTORY window.
func (s *Session) readTimestamp(ctx context.Context, it *catalog.Item, asOf *asOfClause, params []row.Datum, held uint64) (uint64, error) {
	state, err := s.c.persist.ReadState(ctx, it.Shard)
	if err != nil {
		return 0, mapPersistErr(err, it.Name)
	}
	return s.chooseTimestamp(ctx, it, state, asOf, params, max(state.Since, held))
}

// chooseTimestamp is the timestamp rule of SELECT and SUBSCRIBE given the
// collection's state (read linearizably) and the since the read is held
// at: AS OF if given, with the statement's parameter values (AT LEAST: no
// earlier than since; else an error below it), else the latest complete
// time, no earlier than since.
func (s *Session) chooseTimestamp(ctx context.Context, it *catalog.Item, state *persist.State, asOf *asOfClause, params []row.Datum, since uint64) (uint64, error) {
	if asOf == nil {
		t, err := s.latestTime(ctx, it, state)
		return max(t, since), err
	}
	t, err := evalTimestamp(asOf.at, params)
	if err != nil {
		return 0, err
	}
	if asOf.atLeast {
		t = max(t, since)
	} else if t < since {
		return 0, errAsOfNotValid(t, since)
	}
	// A stalled view will not get past its upper: the read reports why
	// instead of waiting for it, as a read at the latest time does.
	if it.Kind == catalog.KindMaterializedView && t >= state.Upper {
		if err := s.c.viewError(it.ID); err != nil {
			return 0, err
		}
	}
	return t, nil
}

func (s *Session) planSelect(ctx context.Context, sel *sql.Select, paramOIDs []uint32) (*plan, error) {
	if len(sel.From) == 0 && !sel.IsValues() {
		return s.planConstSelect(sel, paramOIDs)
	}
	if !sel.IsValues() {
		if p, ok, err := s.planSystemSelect(sel); ok || err != nil {
			return p, err
		}
	}
	q, err := s.planQuery(sel, paramOIDs)
	if err != nil {
		return nil, err
	}
	cols := q.schema().Columns
	return &plan{fields: fieldsOf(cols), params: q.params, exec: func(ctx context.Context, params []row.Datum, formats []int16) (pgwire.Result, error) {
		if err := s.noteRead(false); err != nil {
			return nil, err
		}
		if q.values != nil {
			s.current.SetStrategy(strategyConstant)
		} else {
			s.current.SetStrategy(strategyPersist)
		}
		src, err := s.runQuery(ctx, q, params)
		if err != nil {
			return nil, err
		}
		res := newRowsResult(cols, formats, src.next).withLimit(s.maxResultSize())
		res.close = src.close
		return res, nil
	}}, nil
}

// querySource streams a query's result rows.
type querySource struct {
	next  rowSource
	close func()
}

// runQuery reads the input at the query's timestamp and returns the rows.
// Without ORDER BY the snapshot streams chunk by chunk, so a large result
// is never held whole; with ORDER BY the result is sorted in memory (top-k
// with LIMIT).
func (s *Session) runQuery(ctx context.Context, q *queryPlan, params []row.Datum) (*querySource, error) {
	skip, remaining, err := q.bounds(params)
	if err != nil {
		return nil, err
	}
	next, closeAll, err := s.readInput(ctx, q, params)
	if err != nil {
		return nil, err
	}
	m := q.mfp.bind(params)
	// mapped reads the next chunk through the MFP, expanding diffs into
	// repeated rows. A negative multiplicity is an error, as in Materialize.
	mapped := func(ctx context.Context) ([]row.Row, error) {
		for {
			chunk, err := next(ctx)
			if err != nil {
				return nil, err
			}
			var out []row.Row
			ups, err := dataflow.Apply(m, chunk)
			if err != nil {
				return nil, err
			}
			if !m.identity() {
				ups = row.Consolidate(ups)
			}
			for _, u := range ups {
				if u.Diff < 0 {
					return nil, errorf(codeInternal, "Invalid data in source, saw retractions (%d) for row that does not exist: %v", -u.Diff, u.Row)
				}
				for range u.Diff {
					out = append(out, u.Row)
				}
			}
			if len(out) > 0 {
				return out, nil
			}
		}
	}
	if len(q.orderBy) == 0 {
		return &querySource{close: closeAll, next: func(ctx context.Context) ([]row.Row, error) {
			for {
				if remaining == 0 {
					closeAll()
					return nil, io.EOF
				}
				rows, err := mapped(ctx)
				if errors.Is(err, io.EOF) {
					closeAll()
				}
				if err != nil {
					return nil, err
				}
				if skip > 0 {
					n := min(int64(len(rows)), skip)
					rows, skip = rows[n:], skip-n
				}
				if remaining >= 0 && int64(len(rows)) > remaining {
					rows = rows[:remaining]
				}
				if remaining >= 0 {
					remaining -= int64(len(rows))
				}
				if len(rows) > 0 {
					return rows, nil
				}
			}
		}}, nil
	}
	defer closeAll()
	var all []row.Row
	for {
		rows, err := mapped(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		all = append(all, rows...)
	}
	return &querySource{next: sliceSource(q.finish(all, skip, remaining)), close: func() {}}, nil
}

// finish applies ORDER BY, then OFFSET and LIMIT (q.bounds), to the
// query's whole result.
func (q *queryPlan) finish(rows []row.Row, skip, limit int64) []row.Row {
	if len(q.orderBy) > 0 {
		slices.SortStableFunc(rows, func(a, b row.Row) int { return compareOrder(q.orderBy, a, b) })
	}
	rows = rows[min(int64(len(rows)), skip):]
	if limit >= 0 && int64(len(rows)) > limit {
		rows = rows[:limit]
	}
	return rows
}

// readInput opens the query's input at its timestamp: the snapshot of the
// input collection, chunk by chunk, or the rows of a constant input in one
// chunk. close releases the reader; next returns io.EOF after the last
// chunk, and storage errors already mapped for the client (a constant input
// has no collection to name).
func (s *Session) readInput(ctx context.Context, q *queryPlan, params []row.Datum) (next func(context.Context) ([]row.Update, error), close func(), err error) {
	if q.values != nil {
		// A constant is the same at every time: AS OF is checked, not used.
		if q.asOf != nil {
			if _, err := evalTimestamp(q.asOf.at, params); err != nil {
				return nil, nil, err
			}
		}
		ups, err := q.values.updates(params, 0)
		if err != nil {
			return nil, nil, err
		}
		return func(context.Context) ([]row.Update, error) {
			if ups == nil {
				return nil, io.EOF
			}
			out := ups
			ups = nil
			return out, nil
		}, func() {}, nil
	}
	// The reader first: its since is held from its registration on, so a
	// time chosen at or above it stays readable.
	r, err := s.c.persist.OpenReader(ctx, q.input.Shard, persist.ReaderOptions{Purpose: "select"})
	if err != nil {
		return nil, nil, mapPersistErr(err, q.input.Name)
	}
	asOf, err := s.readTimestamp(ctx, q.input, q.asOf, params, r.Since())
	if err != nil {
		r.Close()
		return nil, nil, err
	}
	cur, err := r.Snapshot(ctx, asOf)
	if err != nil {
		r.Close()
		return nil, nil, mapPersistErr(err, q.input.Name)
	}
	next = func(ctx context.Context) ([]row.Update, error) {
		ups, err := cur.Next(ctx)
		if err != nil {
			return nil, mapPersistErr(err, q.input.Name)
		}
		return ups, nil
	}
	return next, func() { cur.Close(); r.Close() }, nil
}

func compareOrder(keys []orderKey, a, b row.Row) int {
	for _, k := range keys {
		x, y := a[k.col], b[k.col]
		if x == nil || y == nil {
			if x == nil && y == nil {
				continue
			}
			if (x == nil) == k.nullsFirst {
				return -1
			}
			return 1
		}
		c := row.CompareSQL(x, y)
		if k.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// systemRelation is a relation computed in memory from the server's own
// state, such as mz_internal.mz_subscriptions.
type systemRelation struct {
	schema row.Schema
	rows   func(s *Session, ctx context.Context) ([]row.Row, error)
}

var systemRelations = map[string]systemRelation{
	"mz_internal.mz_subscriptions": {
		schema: row.Schema{Columns: subscriptionsColumns},
		rows:   (*Session).subscriptionRows,
	},
	"mz_internal.mz_statement_execution_history": {
		schema: row.Schema{Columns: statementLogColumns},
		rows:   (*Session).statementHistoryRows,
	},
	"mz_internal.mz_recent_activity_log": {
		schema: row.Schema{Columns: activityLogColumns},
		rows:   (*Session).recentActivityRows,
	},
}

// planSystemSelect serves queries over system relations (a select list,
// WHERE, ORDER BY, OFFSET and LIMIT over one of them).
func (s *Session) planSystemSelect(sel *sql.Select) (*plan, bool, error) {
	tn, ok := sel.From[0].(*sql.TableName)
	if !ok || len(sel.From) != 1 {
		return nil, false, nil
	}
	// A system relation is named with its schema; a name of the public
	// schema is a collection's, dots in it or not ("a.b").
	name, err := resolveName(tn.Name)
	if err != nil || tn.Name.Schema == "" || tn.Name.Schema == "public" {
		return nil, false, nil
	}
	rel, ok := systemRelations[name]
	if !ok {
		return nil, true, errorf(codeUndefinedTable, "unknown catalog item '%s'", name)
	}
	if err := checkGrouping(sel); err != nil {
		return nil, true, err
	}
	alias := tn.Alias
	if alias == "" {
		alias = tn.Name.Name
	}
	m, params, err := compileMFP(rel.schema, alias, sel.Where, sel.Items, nil)
	if err != nil {
		return nil, true, err
	}
	// ORDER BY, OFFSET and LIMIT as over a collection.
	q := &queryPlan{mfp: m, params: params}
	if err := q.planTail(sel, sel.Items); err != nil {
		return nil, true, err
	}
	out := q.schema()
	return &plan{fields: fieldsOf(out.Columns), params: q.params, exec: func(ctx context.Context, params []row.Datum, formats []int16) (pgwire.Result, error) {
		skip, limit, err := q.bounds(params)
		if err != nil {
			return nil, err
		}
		bound := m.bind(params)
		var rows []row.Row
		s.current.SetStrategy(strategyConstant)
		all, err := rel.rows(s, ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range all {
			o, ok, err := bound.Apply(r)
			if err != nil {
				return nil, err
			}
			if ok {
				rows = append(rows, o)
			}
		}
		return newRowsResult(out.Columns, formats, sliceSource(q.finish(rows, skip, limit))), nil
	}}, true, nil
}
