package expr

import (
	"strconv"
	"strings"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// Expr is a compiled, typed scalar expression. Eval computes its value on
// one input row; it is a pure function of the row and the EvalContext, so
// that a map/filter over updates may be applied to each update separately
// and the results consolidated. Values are row.Datum (nil is NULL) of the Go
// type Type() names: see row's table, plus string for unknown, uint64 for
// mz_timestamp and Interval for interval.
//
// An Expr is immutable after Compile and safe for concurrent Eval.
type Expr interface {
	// Type is the type of every non-NULL value Eval returns.
	Type() Type
	// Nullable reports whether Eval may return NULL (best effort: false is
	// a promise, true may be pessimistic).
	Nullable() bool
	// Eval evaluates the expression on r, a row of the Scope it was
	// compiled against. ctx may be nil when the expression uses neither
	// parameters nor now().
	Eval(ctx *EvalContext, r row.Row) (row.Datum, error)
	// String renders the expression as SQL, with columns by name and
	// constants folded.
	String() string
}

// EvalContext is what evaluation reads besides the row: the values of the
// parameters and the query's timestamp. Making "now" a value here rather
// than the wall clock keeps evaluation deterministic, which re-evaluating
// views and subscribes requires.
type EvalContext struct {
	// Now is the query's timestamp in milliseconds since the Unix epoch:
	// what now(), current_timestamp and mz_now() return. Zero means there is
	// none, and they fail with ErrNoTimestamp.
	Now uint64
	// Params are the values of $1, $2, ...: datums of the parameter types
	// (Scope.ParamTypes), or strings in their text form, which Eval parses.
	Params []row.Datum
}

// column reads a column of the input row.
type column struct {
	index    int
	name     string
	typ      Type
	nullable bool
}

func (c *column) Type() Type     { return c.typ }
func (c *column) Nullable() bool { return c.nullable }
func (c *column) String() string { return sql.QuoteIdent(c.name) }
func (c *column) Eval(_ *EvalContext, r row.Row) (row.Datum, error) {
	if c.index >= len(r) {
		return nil, errf(CodeInternal, "row has %d columns, expression reads column %d", len(r), c.index+1)
	}
	return r[c.index], nil
}

// constant is a literal or a folded subexpression.
type constant struct {
	d   row.Datum
	typ Type
}

func (c *constant) Type() Type                                    { return c.typ }
func (c *constant) Nullable() bool                                { return c.d == nil }
func (c *constant) Eval(*EvalContext, row.Row) (row.Datum, error) { return c.d, nil }
func (c *constant) String() string                                { return literalSQL(c.typ, c.d) }

// literalSQL renders a value as a SQL literal of its type.
func literalSQL(t Type, d row.Datum) string {
	if d == nil {
		if t == TypeUnknown {
			return "NULL"
		}
		return "NULL::" + t.String()
	}
	switch t {
	case TypeBool:
		return strconv.FormatBool(d.(bool))
	case TypeInt4, TypeNumeric:
		s := formatText(t, d)
		switch {
		case s == "NaN":
			return "'NaN'::numeric"
		case strings.HasPrefix(s, "-"):
			return "(" + s + ")"
		}
		return s
	case TypeUnknown, TypeText:
		return sql.QuoteString(d.(string))
	}
	return sql.QuoteString(formatText(t, d)) + "::" + t.String()
}

// param reads a bound parameter.
type param struct {
	n   int // 1-based
	typ Type
}

func (p *param) Type() Type     { return p.typ }
func (p *param) Nullable() bool { return true }
func (p *param) String() string { return "$" + strconv.Itoa(p.n) }
func (p *param) Eval(ctx *EvalContext, _ row.Row) (row.Datum, error) {
	if ctx == nil || p.n > len(ctx.Params) {
		return nil, errf(CodeUndefinedParameter, "there is no parameter $%d", p.n)
	}
	d := ctx.Params[p.n-1]
	if d == nil || datumHasType(p.typ, d) {
		return d, nil
	}
	// A value in another representation: text from the wire, or a
	// numeric for an mz_timestamp.
	if s, ok := d.(string); ok {
		return ParseText(p.typ, s)
	}
	from := datumType(d)
	f, ok := castFunc(from, p.typ, row.TypeMod{}, castExplicit)
	if from == TypeInvalid || !ok {
		return nil, errf(CodeDatatypeMismatch, "parameter $%d: a %s value is not of type %s", p.n, from, p.typ)
	}
	return f(d)
}

// datumHasType reports whether d's Go type is t's.
func datumHasType(t Type, d row.Datum) bool {
	switch t {
	case TypeUnknown:
		_, ok := d.(string)
		return ok
	case TypeMzTimestamp:
		_, ok := d.(uint64)
		return ok
	case TypeInterval:
		_, ok := d.(Interval)
		return ok
	}
	return t.IsRow() && row.CheckDatum(row.Type(t), d)
}

// datumType returns the type of a datum by its Go type (text for string).
func datumType(d row.Datum) Type {
	switch d.(type) {
	case bool:
		return TypeBool
	case int16:
		return TypeInt2
	case int32:
		return TypeInt4
	case int64:
		return TypeInt8
	case float32:
		return TypeFloat4
	case float64:
		return TypeFloat8
	case row.Numeric:
		return TypeNumeric
	case string:
		return TypeText
	case []byte:
		return TypeBytea
	case row.Timestamp:
		return TypeTimestamp
	case row.TimestampTZ:
		return TypeTimestampTZ
	case row.Date:
		return TypeDate
	case row.JSON:
		return TypeJSONB
	case row.UUID:
		return TypeUUID
	case uint64:
		return TypeMzTimestamp
	case Interval:
		return TypeInterval
	}
	return TypeInvalid
}

// unary is a strict one-argument operator: NULL in, NULL out.
type unary struct {
	op  string
	x   Expr
	typ Type
	fn  func(row.Datum) (row.Datum, error)
}

func (u *unary) Type() Type     { return u.typ }
func (u *unary) Nullable() bool { return u.x.Nullable() }
func (u *unary) String() string { return "(" + u.op + u.x.String() + ")" }
func (u *unary) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	a, err := u.x.Eval(ctx, r)
	if err != nil || a == nil {
		return nil, err
	}
	return u.fn(a)
}

// binary is a strict two-argument operator.
type binary struct {
	op       string
	l, r     Expr
	typ      Type
	fn       func(a, b row.Datum) (row.Datum, error)
	nullable bool // may return NULL on non-NULL arguments (jsonb ->)
}

func (b *binary) Type() Type     { return b.typ }
func (b *binary) Nullable() bool { return b.nullable || b.l.Nullable() || b.r.Nullable() }
func (b *binary) String() string { return "(" + b.l.String() + " " + b.op + " " + b.r.String() + ")" }

// Strict operators and functions evaluate every argument before looking
// for NULLs, as Postgres does: an error in any argument is reported even
// when another is NULL.

func (b *binary) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	x, err := b.l.Eval(ctx, r)
	if err != nil {
		return nil, err
	}
	y, err := b.r.Eval(ctx, r)
	if err != nil || x == nil || y == nil {
		return nil, err
	}
	return b.fn(x, y)
}

// compare is a comparison operator over two values of one type.
type compare struct {
	op   sql.BinaryOp
	l, r Expr
	cmp  func(a, b row.Datum) int
}

func (c *compare) Type() Type     { return TypeBool }
func (c *compare) Nullable() bool { return c.l.Nullable() || c.r.Nullable() }
func (c *compare) String() string {
	return "(" + c.l.String() + " " + string(c.op) + " " + c.r.String() + ")"
}
func (c *compare) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	x, err := c.l.Eval(ctx, r)
	if err != nil {
		return nil, err
	}
	y, err := c.r.Eval(ctx, r)
	if err != nil || x == nil || y == nil {
		return nil, err
	}
	return cmpResult(c.op, c.cmp(x, y)), nil
}

func cmpResult(op sql.BinaryOp, c int) bool {
	switch op {
	case sql.OpEq:
		return c == 0
	case sql.OpNotEq:
		return c != 0
	case sql.OpLt:
		return c < 0
	case sql.OpLtEq:
		return c <= 0
	case sql.OpGt:
		return c > 0
	}
	return c >= 0
}

// distinct is IS [NOT] DISTINCT FROM: equality where NULL equals NULL.
type distinct struct {
	not  bool // IS NOT DISTINCT FROM
	l, r Expr
	cmp  func(a, b row.Datum) int
}

func (d *distinct) Type() Type     { return TypeBool }
func (d *distinct) Nullable() bool { return false }
func (d *distinct) String() string {
	op := " IS DISTINCT FROM "
	if d.not {
		op = " IS NOT DISTINCT FROM "
	}
	return "(" + d.l.String() + op + d.r.String() + ")"
}
func (d *distinct) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	x, err := d.l.Eval(ctx, r)
	if err != nil {
		return nil, err
	}
	y, err := d.r.Eval(ctx, r)
	if err != nil {
		return nil, err
	}
	var same bool
	switch {
	case x == nil || y == nil:
		same = x == nil && y == nil
	default:
		same = d.cmp(x, y) == 0
	}
	return same == d.not, nil
}

// and is a conjunction with three-valued logic: false if any argument is
// false, else NULL if any is NULL, else true. It stops at the first false.
type and struct{ xs []Expr }

func (a *and) Type() Type     { return TypeBool }
func (a *and) Nullable() bool { return anyNullable(a.xs) }
func (a *and) String() string { return joinExprs(a.xs, " AND ") }
func (a *and) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	return evalJunction(ctx, r, a.xs, false)
}

// or is a disjunction: true if any argument is true, else NULL if any is
// NULL, else false. It stops at the first true.
type or struct{ xs []Expr }

func (o *or) Type() Type     { return TypeBool }
func (o *or) Nullable() bool { return anyNullable(o.xs) }
func (o *or) String() string { return joinExprs(o.xs, " OR ") }
func (o *or) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	return evalJunction(ctx, r, o.xs, true)
}

// evalJunction evaluates AND (decisive false) or OR (decisive true) with
// three-valued logic: decisive if any argument is, else NULL if any is
// NULL, else !decisive. It stops at the first decisive argument.
func evalJunction(ctx *EvalContext, r row.Row, xs []Expr, decisive bool) (row.Datum, error) {
	null := false
	for _, x := range xs {
		v, err := x.Eval(ctx, r)
		if err != nil {
			return nil, err
		}
		switch v {
		case nil:
			null = true
		case decisive:
			return decisive, nil
		}
	}
	if null {
		return nil, nil
	}
	return !decisive, nil
}

func anyNullable(xs []Expr) bool {
	for _, x := range xs {
		if x.Nullable() {
			return true
		}
	}
	return false
}

func allNullable(xs []Expr) bool {
	for _, x := range xs {
		if !x.Nullable() {
			return false
		}
	}
	return true
}

func joinExprs(xs []Expr, sep string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = x.String()
	}
	return "(" + strings.Join(parts, sep) + ")"
}

// not is NOT: NULL stays NULL.
type not struct{ x Expr }

func (n *not) Type() Type     { return TypeBool }
func (n *not) Nullable() bool { return n.x.Nullable() }
func (n *not) String() string { return "(NOT " + n.x.String() + ")" }
func (n *not) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	v, err := n.x.Eval(ctx, r)
	if err != nil || v == nil {
		return nil, err
	}
	return !v.(bool), nil
}

// isTest is IS [NOT] NULL/TRUE/FALSE/UNKNOWN; never NULL.
type isTest struct {
	x    Expr
	test sql.IsTest
	not  bool
}

func (t *isTest) Type() Type     { return TypeBool }
func (t *isTest) Nullable() bool { return false }
func (t *isTest) String() string {
	s := "(" + t.x.String() + " IS "
	if t.not {
		s += "NOT "
	}
	return s + t.test.String() + ")"
}
func (t *isTest) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	v, err := t.x.Eval(ctx, r)
	if err != nil {
		return nil, err
	}
	var res bool
	switch t.test {
	case sql.IsNull, sql.IsUnknown:
		res = v == nil
	case sql.IsTrue:
		res = v == true
	case sql.IsFalse:
		res = v == false
	}
	return res != t.not, nil
}

// caseExpr is a searched CASE; a simple CASE compiles to one whose
// conditions compare the operand.
type caseExpr struct {
	conds, results []Expr
	els            Expr // nil: NULL
	typ            Type
}

func (c *caseExpr) Type() Type { return c.typ }
func (c *caseExpr) Nullable() bool {
	return c.els == nil || c.els.Nullable() || anyNullable(c.results)
}
func (c *caseExpr) String() string {
	var b strings.Builder
	b.WriteString("CASE")
	for i := range c.conds {
		b.WriteString(" WHEN " + c.conds[i].String() + " THEN " + c.results[i].String())
	}
	if c.els != nil {
		b.WriteString(" ELSE " + c.els.String())
	}
	b.WriteString(" END")
	return b.String()
}
func (c *caseExpr) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	for i, cond := range c.conds {
		v, err := cond.Eval(ctx, r)
		if err != nil {
			return nil, err
		}
		if v == true {
			return c.results[i].Eval(ctx, r)
		}
	}
	if c.els == nil {
		return nil, nil
	}
	return c.els.Eval(ctx, r)
}

// coalesce returns its first non-NULL argument, evaluating no further.
type coalesce struct {
	xs  []Expr
	typ Type
}

func (c *coalesce) Type() Type     { return c.typ }
func (c *coalesce) Nullable() bool { return allNullable(c.xs) }
func (c *coalesce) String() string { return "coalesce" + joinExprs(c.xs, ", ") }
func (c *coalesce) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	for _, x := range c.xs {
		v, err := x.Eval(ctx, r)
		if err != nil || v != nil {
			return v, err
		}
	}
	return nil, nil
}

// extremum is GREATEST or LEAST: NULLs are ignored, NULL only if all are.
type extremum struct {
	greatest bool
	xs       []Expr
	typ      Type
	cmp      func(a, b row.Datum) int
}

func (e *extremum) Type() Type     { return e.typ }
func (e *extremum) Nullable() bool { return allNullable(e.xs) }
func (e *extremum) String() string {
	if e.greatest {
		return "greatest" + joinExprs(e.xs, ", ")
	}
	return "least" + joinExprs(e.xs, ", ")
}
func (e *extremum) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	var best row.Datum
	for _, x := range e.xs {
		v, err := x.Eval(ctx, r)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		if best == nil {
			best = v
			continue
		}
		c := e.cmp(v, best)
		if (e.greatest && c > 0) || (!e.greatest && c < 0) {
			best = v
		}
	}
	return best, nil
}

// nullIf is NULLIF(a, b): NULL if a = b, else a. As in Postgres, the
// result is a converted to the type the two are compared in (b's type).
type nullIf struct {
	a, b Expr
	typ  Type // a's type, or the comparison type
	cmp  func(a, b row.Datum) int
	// conv converts a to the comparison type when it differs from a's.
	conv func(row.Datum) (row.Datum, error)
}

func (n *nullIf) Type() Type     { return n.typ }
func (n *nullIf) Nullable() bool { return true }
func (n *nullIf) String() string { return "nullif(" + n.a.String() + ", " + n.b.String() + ")" }
func (n *nullIf) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	a, err := n.a.Eval(ctx, r)
	if err != nil || a == nil {
		return nil, err
	}
	b, err := n.b.Eval(ctx, r)
	if err != nil || b == nil {
		return a, err
	}
	ca := a
	if n.conv != nil {
		if ca, err = n.conv(a); err != nil {
			return nil, err
		}
	}
	if n.cmp(ca, b) == 0 {
		return nil, nil
	}
	if n.typ == n.a.Type() {
		return a, nil
	}
	return ca, nil
}

// inList is x [NOT] IN (list): true if x equals an element; else NULL if x
// or an element is NULL; else false (negated for NOT IN).
type inList struct {
	x    Expr
	list []Expr
	not  bool
	cmp  func(a, b row.Datum) int
}

func (in *inList) Type() Type     { return TypeBool }
func (in *inList) Nullable() bool { return in.x.Nullable() || anyNullable(in.list) }
func (in *inList) String() string {
	op := " IN "
	if in.not {
		op = " NOT IN "
	}
	return "(" + in.x.String() + op + joinExprs(in.list, ", ") + ")"
}
func (in *inList) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	x, err := in.x.Eval(ctx, r)
	if err != nil {
		return nil, err
	}
	// Every element is evaluated, as Postgres builds the array of them
	// before comparing: an error in any element is reported.
	null, found := x == nil, false
	for _, e := range in.list {
		v, err := e.Eval(ctx, r)
		if err != nil {
			return nil, err
		}
		switch {
		case v == nil:
			null = true
		case x != nil && !found && in.cmp(x, v) == 0:
			found = true
		}
	}
	switch {
	case x == nil:
		return nil, nil
	case found:
		return !in.not, nil
	case null:
		return nil, nil
	}
	return in.not, nil
}

// call is a function call resolved to one overload.
type call struct {
	name string
	args []Expr
	ov   *overload
}

func (c *call) Type() Type { return c.ov.ret }
func (c *call) Nullable() bool {
	if c.ov.nullable {
		return true
	}
	return c.ov.strict && anyNullable(c.args)
}
func (c *call) String() string { return c.name + joinExprs(c.args, ", ") }
func (c *call) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	var buf [4]row.Datum
	args := buf[:0]
	null := false
	for _, a := range c.args {
		v, err := a.Eval(ctx, r)
		if err != nil {
			return nil, err
		}
		null = null || v == nil
		args = append(args, v)
	}
	if null && c.ov.strict {
		return nil, nil
	}
	return c.ov.fn(ctx, args)
}

// cast converts a value to another type.
type cast struct {
	x   Expr
	typ Type
	fn  func(row.Datum) (row.Datum, error)
}

func (c *cast) Type() Type     { return c.typ }
func (c *cast) Nullable() bool { return c.x.Nullable() }
func (c *cast) String() string { return "(" + c.x.String() + ")::" + c.typ.String() }
func (c *cast) Eval(ctx *EvalContext, r row.Row) (row.Datum, error) {
	v, err := c.x.Eval(ctx, r)
	if err != nil || v == nil {
		return nil, err
	}
	return c.fn(v)
}
