package adapter

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/shardtail/shardtail/expr"
	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
	"github.com/shardtail/shardtail/subscribe"
)

// This file is the adapter's one dependency on package expr: compiling
// scalars for DML, the map/filter/project of queries, and constants.

// scalar is a compiled expression coerced to a target type.
type scalar struct {
	e expr.Expr
}

// compileScalar compiles e over schema (a relation named table). With a
// target column it applies PostgreSQL's assignment rules (expr.CompileAssign):
// a string literal or an untyped parameter takes the column's type, other
// values convert by assignment casts, anything else is 42804.
func compileScalar(e sql.Expr, schema row.Schema, table string, target *row.Column, paramOIDs []uint32) (*scalar, []uint32, error) {
	scope := expr.NewScope(schema, table)
	scope.SetParamTypes(paramTypes(paramOIDs))
	var ce expr.Expr
	var err error
	if target != nil {
		ce, err = expr.CompileAssign(e, scope, target.Name, expr.FromRow(target.Type))
	} else {
		ce, err = expr.Compile(e, scope)
	}
	if err != nil {
		return nil, nil, err
	}
	return &scalar{e: ce}, paramOIDsOf(scope), nil
}

func (s *scalar) eval(r row.Row, params []row.Datum) (row.Datum, error) {
	return s.e.Eval(&expr.EvalContext{Params: params, Now: uint64(time.Now().UnixMilli())}, r)
}

// columnAssign gives the values a statement stores into a table's columns
// their stored form under the columns' type modifiers (expr.ColumnAssign):
// entry i is column i's conversion, nil when it has no modifier. Every
// write path (INSERT's VALUES and SELECT, UPDATE's SET, COPY FROM) stores
// through it, so a varchar(3) holds no longer string however it came.
type columnAssign []func(row.Datum) (row.Datum, error)

func newColumnAssign(schema row.Schema) columnAssign {
	a := make(columnAssign, len(schema.Columns))
	for i, c := range schema.Columns {
		a[i] = expr.ColumnAssign(c)
	}
	return a
}

// assignFrom returns the conversions that store a query's output columns
// out into the columns cols of schema (INSERT ... SELECT): assignment
// casts and type modifiers; 42804 when a column has no assignment cast.
func assignFrom(schema row.Schema, cols []int, out []row.Column) (columnAssign, error) {
	a := make(columnAssign, len(schema.Columns))
	for i, c := range cols {
		f, ok := expr.AssignTo(out[i].Type, schema.Columns[c])
		if !ok {
			return nil, errorf(codeDatatypeMismatch, "column %q is of type %s but expression is of type %s", schema.Columns[c].Name, schema.Columns[c].Type, out[i].Type)
		}
		a[c] = f
	}
	return a, nil
}

// value returns d, stored into column c.
func (a columnAssign) value(c int, d row.Datum) (row.Datum, error) {
	if d == nil || a[c] == nil {
		return d, nil
	}
	return a[c](d)
}

func paramTypes(oids []uint32) []expr.Type {
	out := make([]expr.Type, len(oids))
	for i, oid := range oids {
		if t, ok := pgrepr.TypeFromOID(oid); ok {
			out[i] = expr.FromRow(t)
		} else {
			out[i] = expr.TypeUnknown
		}
	}
	return out
}

func paramOIDsOf(scope *expr.Scope) []uint32 { return oidsOf(scope.ParamTypes()) }

// oidsOf is the parameter type OIDs of types, as ParameterDescription
// reports them: each type's Rep.
func oidsOf(types []expr.Type) []uint32 {
	out := make([]uint32, len(types))
	for i, t := range types {
		out[i] = pgrepr.OID(t.Rep())
	}
	return out
}

// mfp is a query's map/filter/project, possibly the composition of a
// view's and the query's own, with parameters bound at execution.
type mfp struct {
	stages []*expr.MFP
	out    row.Schema
	ident  bool
}

func compileMFP(input row.Schema, table string, where sql.Expr, items []sql.SelectItem, paramOIDs []uint32) (*mfp, []uint32, error) {
	m, err := expr.CompileMFP(input, table, where, items, paramTypes(paramOIDs))
	if err != nil {
		return nil, nil, err
	}
	ident := where == nil && len(items) == 1
	if ident {
		_, ident = items[0].Expr.(*sql.Star)
	}
	return &mfp{stages: []*expr.MFP{m}, out: m.OutputSchema(), ident: ident}, oidsOf(m.ParamTypes()), nil
}

// composeMFP applies a then b.
func composeMFP(a, b *mfp) *mfp {
	return &mfp{stages: append(append([]*expr.MFP(nil), a.stages...), b.stages...), out: b.out, ident: a.ident && b.ident}
}

// renameMFP gives the output the names of schema (CREATE VIEW v (x, y)).
func renameMFP(m *mfp, schema row.Schema) *mfp {
	n := *m
	n.out = row.Schema{Columns: append([]row.Column(nil), m.out.Columns...)}
	for i := range n.out.Columns {
		if i < len(schema.Columns) {
			n.out.Columns[i].Name = schema.Columns[i].Name
		}
	}
	return &n
}

// OutputSchema is the schema of the rows Apply returns.
func (m *mfp) OutputSchema() row.Schema { return m.out }

// bind returns m with parameter values (and the query's timestamp).
func (m *mfp) bind(params []row.Datum) *mfp {
	n := *m
	ctx := expr.EvalContext{Params: params, Now: uint64(time.Now().UnixMilli())}
	n.stages = make([]*expr.MFP, len(m.stages))
	for i, st := range m.stages {
		n.stages[i] = st.Bind(ctx)
	}
	return &n
}

// usesNow reports whether a stage reads the query's timestamp (now()).
func (m *mfp) usesNow() bool {
	for _, st := range m.stages {
		if st.UsesNow() {
			return true
		}
	}
	return false
}

// shape is the bound m as the fast path shares it: its canonical key (the
// stages' keys, parameters' values included) and the leading equality of
// its filter, through which the SharedTail routes rows to it.
func (m *mfp) shape() *subscribe.Shape {
	// Stages that pass rows unchanged (SELECT * over a view) are left
	// out, so that a query and a view of the same filter share a shape.
	var keys []string
	for _, st := range m.stages {
		if !st.Identity() {
			keys = append(keys, st.ShapeKey())
		}
	}
	sh := &subscribe.Shape{Key: strings.Join(keys, "\n|\n"), MFP: m}
	if eq, ok := expr.LeadingEquality(m.stages); ok {
		sh.Index = &subscribe.Index{Col: eq.Col, Values: eq.Values, Nulls: eq.Nulls}
	}
	return sh
}

// identity reports whether Apply returns every row unchanged.
func (m *mfp) identity() bool { return m.ident }

// Apply runs the stages on r: the dataflow.MFP interface.
func (m *mfp) Apply(r row.Row) (row.Row, bool, error) {
	for _, st := range m.stages {
		out, ok, err := st.Apply(r)
		if err != nil || !ok {
			return nil, false, err
		}
		r = out
	}
	return r, true, nil
}

// valuesInput is a compiled VALUES list: the input of a query that reads
// no collection (VALUES ..., FROM (VALUES ...), a view of either). Its
// rows hold at every time and never change.
type valuesInput struct {
	v      *expr.Values
	schema row.Schema // the list's columns, renamed by FROM (...) AS x(a, b)
}

// compileValues compiles a VALUES list; paramOIDs are the client's
// declared parameter types, and the result's are the inferred ones.
func compileValues(rows [][]sql.Expr, paramOIDs []uint32) (*valuesInput, []uint32, error) {
	v, err := expr.CompileValues(rows, paramTypes(paramOIDs))
	if err != nil {
		return nil, nil, err
	}
	return &valuesInput{v: v, schema: v.OutputSchema()}, oidsOf(v.ParamTypes()), nil
}

// rename gives the leading columns the names cols (FROM (VALUES ...) AS
// x(a, b)); more names than columns is 42P10, as in PostgreSQL.
func (vi *valuesInput) rename(alias string, cols []string) (*valuesInput, error) {
	if len(cols) > len(vi.schema.Columns) {
		return nil, errorf("42P10", "table \"%s\" has %d columns available but %d columns specified", alias, len(vi.schema.Columns), len(cols))
	}
	n := *vi
	n.schema = row.Schema{Columns: append([]row.Column(nil), vi.schema.Columns...)}
	for i, c := range cols {
		n.schema.Columns[i].Name = c
	}
	return &n, nil
}

// updates evaluates the rows, as updates with diff +1 at time t.
func (vi *valuesInput) updates(params []row.Datum, t uint64) ([]row.Update, error) {
	rows, err := vi.v.Eval(&expr.EvalContext{Params: params, Now: uint64(time.Now().UnixMilli())})
	if err != nil {
		return nil, err
	}
	out := make([]row.Update, len(rows))
	for i, r := range rows {
		out[i] = row.Update{Row: r, T: t, Diff: 1}
	}
	return out, nil
}

// constScope is the scope a statement's constant clauses (AS OF, UP TO,
// LIMIT, OFFSET) are compiled in, after the rest of it: params are the
// parameter types the rest declared or inferred. Text is also what a
// parameter nothing determined reports, so it is left to be inferred: a
// parameter only a clause uses takes the clause's type (LIMIT $1 bigint,
// AS OF $1 an mz_timestamp, described as numeric). The scope's parameter
// types are then the statement's (paramOIDsOf).
func constScope(params []uint32) *expr.Scope {
	types := paramTypes(params)
	for i, oid := range params {
		if oid == pgrepr.OIDText {
			types[i] = expr.TypeUnknown
		}
	}
	scope := expr.NewScope(row.Schema{}, "")
	scope.SetParamTypes(types)
	return scope
}

// constant is a statement's constant clause (AS OF, UP TO, LIMIT,
// OFFSET), compiled when the statement is planned and evaluated each time
// it runs, with its parameters' values.
type constant struct {
	e expr.Expr
}

// compileConst compiles e (nil for none) in scope as a value of type want.
func compileConst(e sql.Expr, want expr.Type, scope *expr.Scope) (*constant, error) {
	if e == nil {
		return nil, nil
	}
	x, err := expr.CompileConst(e, want, scope)
	if err != nil {
		return nil, err
	}
	return &constant{e: x}, nil
}

// compileCount compiles LIMIT or OFFSET (nil for none) in scope.
func compileCount(e sql.Expr, scope *expr.Scope) (*constant, error) {
	return compileConst(e, expr.TypeInt8, scope)
}

// compileTimestamp compiles UP TO (nil for none) or AS OF's time in scope.
func compileTimestamp(e sql.Expr, scope *expr.Scope) (*constant, error) {
	return compileConst(e, expr.TypeMzTimestamp, scope)
}

// eval evaluates c with the statement's parameter values.
func (c *constant) eval(params []row.Datum) (row.Datum, error) {
	return c.e.Eval(&expr.EvalContext{Params: params, Now: uint64(time.Now().UnixMilli())}, nil)
}

// asOfClause is a read's AS OF [AT LEAST], compiled.
type asOfClause struct {
	at      *constant // an mz_timestamp
	atLeast bool
}

// compileAsOf compiles a (nil for none) in scope.
func compileAsOf(a *sql.AsOf, scope *expr.Scope) (*asOfClause, error) {
	if a == nil {
		return nil, nil
	}
	at, err := compileTimestamp(a.Expr, scope)
	if err != nil {
		return nil, err
	}
	return &asOfClause{at: at, atLeast: a.AtLeast}, nil
}

// evalTimestamp evaluates AS OF's time or UP TO, an mz_timestamp (epoch
// milliseconds), with the statement's parameter values.
func evalTimestamp(c *constant, params []row.Datum) (uint64, error) {
	d, err := c.eval(params)
	if err != nil {
		return 0, err
	}
	switch v := d.(type) {
	case uint64:
		return v, nil
	case nil:
		return 0, errorf(codeDataException, "timestamp must not be NULL")
	}
	return 0, errorf(codeDatatypeMismatch, "cannot use %T as mz_timestamp", d)
}

// evalInterval evaluates FETCH's TIMEOUT.
func evalInterval(e sql.Expr) (time.Duration, error) {
	d, err := expr.EvalConst(e, expr.TypeInterval, nil)
	if err != nil {
		return 0, err
	}
	iv, ok := d.(expr.Interval)
	if !ok {
		return 0, errorf(codeDatatypeMismatch, "TIMEOUT must be an interval")
	}
	dur, err := expr.IntervalDuration(iv)
	if err != nil {
		return 0, errorf(codeInvalidParamValue, "timeout out of range")
	}
	return dur, nil
}

// evalCount evaluates LIMIT / OFFSET (nil for none) with the statement's
// parameter values: -1 for no LIMIT (none, or NULL, as in PostgreSQL), 0
// for no OFFSET.
func evalCount(c *constant, params []row.Datum, what string) (int64, error) {
	none, code := int64(0), "2201X" // invalid row count in result offset clause
	if what == "LIMIT" {
		none, code = -1, "2201W" // invalid row count in limit clause
	}
	if c == nil {
		return none, nil
	}
	d, err := c.eval(params)
	if err != nil || d == nil {
		return none, err
	}
	n, ok := d.(int64)
	if !ok || n < 0 {
		return 0, errorf(code, "%s must not be negative", what)
	}
	return n, nil
}

// planConstSelect serves SELECT without FROM: constants and the session
// functions drivers call on connect. Session functions are evaluated when
// the statement runs, each time it runs (a prepared current_setting sees
// the current value; a prepared pg_cancel_backend cancels when executed,
// not when prepared); the plan describes their types.
func (s *Session) planConstSelect(sel *sql.Select, paramOIDs []uint32) (*plan, error) {
	if sel.Where != nil || sel.GroupBy != nil || sel.OrderBy != nil {
		return nil, errorf(codeFeatureNotSupp, "SELECT without FROM supports only a select list")
	}
	compile := func(run *sessionCall) (*mfp, []uint32, error) {
		items := make([]sql.SelectItem, len(sel.Items))
		for i, it := range sel.Items {
			items[i] = sql.SelectItem{Expr: s.substituteSessionFuncs(it.Expr, run), Alias: it.Alias}
			if it.Alias == "" {
				if f, ok := it.Expr.(*sql.FuncCall); ok {
					items[i].Alias = f.Name.Name
				}
			}
		}
		return compileMFP(row.Schema{}, "", nil, items, paramOIDs)
	}
	m, params, err := compile(nil)
	if err != nil {
		return nil, err
	}
	cols := m.OutputSchema().Columns
	return &plan{fields: fieldsOf(cols), params: params, exec: func(ctx context.Context, params []row.Datum, formats []int16) (pgwire.Result, error) {
		s.current.SetStrategy(strategyConstant)
		call := &sessionCall{params: params}
		m, _, err := compile(call)
		if err == nil {
			err = call.err
		}
		if err != nil {
			return nil, err
		}
		r, ok, err := m.bind(params).Apply(row.Row{})
		if err != nil {
			return nil, err
		}
		var rows []row.Row
		if ok {
			rows = []row.Row{r}
		}
		return newRowsResult(cols, formats, sliceSource(rows)), nil
	}}, nil
}

// sessionCall is the execution substituteSessionFuncs evaluates for: its
// parameters. nil means planning: no side effects, only types.
type sessionCall struct {
	params []row.Datum
	// err is the first error a session function raised (a refused
	// pg_cancel_backend): the statement's error.
	err error
}

// substituteSessionFuncs replaces calls of session functions (version(),
// current_setting('x'), pg_backend_pid(), pg_cancel_backend(pid), ...) by
// their values for run, or by values of their types when planning.
func (s *Session) substituteSessionFuncs(e sql.Expr, run *sessionCall) sql.Expr {
	f, ok := e.(*sql.FuncCall)
	if !ok {
		if c, ok := e.(*sql.Cast); ok {
			n := *c
			n.X = s.substituteSessionFuncs(c.X, run)
			return &n
		}
		return e
	}
	str := func(v string) sql.Expr {
		return &sql.Cast{X: &sql.StringLit{Value: v}, Type: sql.TypeName{Name: "text"}}
	}
	switch f.Name.Name {
	case "version":
		return str(fmt.Sprintf("PostgreSQL 9.5.0 on x86_64, compiled by shardtail %s (Materialize-compatible)", s.c.cfg.Version))
	case "mz_version":
		return str("v" + s.c.cfg.Version)
	case "current_database":
		return str("materialize")
	case "current_schema":
		return str("public")
	case "current_user", "session_user", "current_role", "user":
		return str(s.user)
	case "pg_backend_pid":
		return &sql.NumberLit{Text: strconv.FormatUint(uint64(s.id), 10)}
	case "pg_cancel_backend":
		// It acts on another session: only when the statement runs. The
		// argument stays in the expression, so that it types a parameter
		// ($1 is an int4) and NULL gives NULL.
		if len(f.Args) == 1 {
			canceled := false
			if run != nil {
				if pid, ok := sessionFuncInt(f.Args[0], run.params); ok && pid >= 0 && pid <= math.MaxUint32 {
					var err error
					if canceled, err = s.cancelBackend(uint32(pid)); err != nil && run.err == nil {
						run.err = err
					}
				}
			}
			isNull := &sql.IsExpr{X: &sql.Cast{X: f.Args[0], Type: sql.TypeName{Name: "int4"}}, Test: sql.IsNull}
			return &sql.CaseExpr{Whens: []sql.When{{Cond: isNull, Result: &sql.NullLit{}}}, Else: &sql.BoolLit{Value: canceled}}
		}
	case "current_setting":
		if len(f.Args) >= 1 {
			if name, ok := sql.ValueText(f.Args[0]); ok {
				if v, ok := s.getVar(name); ok {
					return str(v)
				}
			}
		}
	}
	return e
}

// sessionFuncInt is the integer value of a session function's argument: a
// literal or a bound parameter.
func sessionFuncInt(e sql.Expr, params []row.Datum) (int64, bool) {
	switch e := e.(type) {
	case *sql.NumberLit:
		n, err := strconv.ParseInt(e.Text, 10, 64)
		return n, err == nil
	case *sql.StringLit:
		// An untyped literal ('123', as clients that interpolate parameters
		// send it) is coerced to int4, as in PostgreSQL.
		n, err := strconv.ParseInt(strings.TrimSpace(e.Value), 10, 64)
		return n, err == nil
	case *sql.Param:
		if e.Index >= 1 && e.Index <= len(params) {
			switch v := params[e.Index-1].(type) {
			case int64:
				return v, true
			case int32:
				return int64(v), true
			case string:
				n, err := strconv.ParseInt(v, 10, 64)
				return n, err == nil
			}
		}
	case *sql.Cast:
		return sessionFuncInt(e.X, params)
	}
	return 0, false
}
