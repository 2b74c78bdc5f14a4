package expr

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// Compile type-checks e against scope and returns the expression to
// evaluate. A nil scope has no columns and no declared parameters. The
// result never has type unknown: a bare string literal or NULL is text, as
// Postgres' SELECT 'abc' is. Parameter types inferred while compiling are
// in scope.ParamTypes() afterwards.
func Compile(e sql.Expr, scope *Scope) (Expr, error) {
	c, x, err := compileIn(e, scope)
	if err != nil {
		return nil, err
	}
	return c.resolveUnknown(x)
}

// compileIn compiles e against scope (nil: no columns and no declared
// parameters), leaving a type unknown unresolved; c holds the scope.
func compileIn(e sql.Expr, scope *Scope) (c *compiler, x Expr, err error) {
	if scope == nil {
		scope = &Scope{}
	}
	c = &compiler{scope: scope}
	x, err = c.expr(e)
	return c, x, err
}

// CompileAssign compiles e as a value stored into column, of type to, as
// INSERT's VALUES and UPDATE's SET do in Postgres: a string literal or an
// untyped parameter takes the column's type, and other values convert by
// implicit or assignment casts (numeric to integer rounds, anything to
// text). A value that cannot be assigned is 42804 `column "a" is of type
// integer but expression is of type boolean`.
func CompileAssign(e sql.Expr, scope *Scope, column string, to Type) (Expr, error) {
	c, x, err := compileIn(e, scope)
	if err != nil {
		return nil, err
	}
	y, ok, err := c.coerce(x, typeRef{typ: to}, castAssignment)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &Error{code: CodeDatatypeMismatch,
			msg:  fmt.Sprintf("column %q is of type %s but expression is of type %s", column, to, x.Type()),
			hint: "You will need to rewrite or cast the expression."}
	}
	return y, nil
}

// compiler turns an AST into typed nodes. Each construct is typed
// bottom-up; string literals, NULL and untyped parameters stay unknown
// until an operator, function or cast gives them a type (coerce).
type compiler struct {
	scope *Scope
}

func (c *compiler) expr(e sql.Expr) (Expr, error) {
	switch e := e.(type) {
	case *sql.NumberLit:
		return numberLit(e.Text)
	case *sql.StringLit:
		return &constant{d: e.Value, typ: TypeUnknown}, nil
	case *sql.BoolLit:
		return &constant{d: e.Value, typ: TypeBool}, nil
	case *sql.NullLit:
		return &constant{typ: TypeUnknown}, nil
	case *sql.TypedLit:
		ref, err := resolveType(e.Type)
		if err != nil {
			return nil, err
		}
		return c.castTo(&constant{d: e.Value, typ: TypeUnknown}, ref, castExplicit)
	case *sql.Param:
		if e.Index < 1 {
			return nil, errf(CodeUndefinedParameter, "there is no parameter $%d", e.Index)
		}
		if e.Index > 65535 {
			return nil, errf(CodeUndefinedParameter, "there is no parameter $%d", e.Index)
		}
		return &param{n: e.Index, typ: c.scope.paramType(e.Index)}, nil
	case *sql.ColumnRef:
		rc, err := c.scope.resolve(e)
		if err != nil {
			return nil, err
		}
		return &column{index: rc.index, name: rc.col.Name, typ: FromRow(rc.col.Type), nullable: rc.col.Nullable}, nil
	case *sql.Star:
		return nil, errf(CodeSyntaxError, "* is not allowed in an expression")
	case *sql.UnaryExpr:
		return c.unaryExpr(e)
	case *sql.BinaryExpr:
		return c.binaryExpr(e)
	case *sql.IsExpr:
		return c.isExpr(e)
	case *sql.InExpr:
		return c.inExpr(e)
	case *sql.BetweenExpr:
		return c.between(e)
	case *sql.CaseExpr:
		return c.caseExpr(e)
	case *sql.Cast:
		x, err := c.expr(e.X)
		if err != nil {
			return nil, err
		}
		ref, err := resolveType(e.Type)
		if err != nil {
			return nil, err
		}
		return c.castTo(x, ref, castExplicit)
	case *sql.FuncCall:
		return c.funcCall(e)
	case *sql.Subquery, *sql.Exists:
		return nil, errf(CodeFeatureNotSupported, "subqueries are not supported yet")
	case nil:
		return nil, errf(CodeInternal, "missing expression")
	}
	return nil, errf(CodeFeatureNotSupported, "expression %s is not supported yet", e)
}

// numberLit types a numeric literal as Postgres does: int4 if it fits,
// else int8, else numeric; anything with a point or exponent is numeric.
func numberLit(text string) (Expr, error) {
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		if i == int64(int32(i)) {
			return &constant{d: int32(i), typ: TypeInt4}, nil
		}
		return &constant{d: i, typ: TypeInt8}, nil
	}
	n, err := row.NormalizeNumeric(text)
	if err != nil {
		return nil, errf(CodeInvalidTextRepresentation, "invalid input syntax for type numeric: \"%s\"", text)
	}
	d, err := numResult(numDec(n))
	if err != nil {
		return nil, err
	}
	return &constant{d: d, typ: TypeNumeric}, nil
}

// negatedLiteral folds a minus sign into the number it negates, as
// Postgres' grammar does (doNegate), through any further minus signs:
// -2147483648 is an int4 literal, and -(-2147483648) the int8 2147483648.
func negatedLiteral(e *sql.UnaryExpr) (string, bool) {
	if e.Op != sql.UnaryMinus {
		return "", false
	}
	var text string
	switch x := e.X.(type) {
	case *sql.NumberLit:
		text = x.Text
	case *sql.UnaryExpr:
		t, ok := negatedLiteral(x)
		if !ok {
			return "", false
		}
		text = t
	default:
		return "", false
	}
	if strings.HasPrefix(text, "-") {
		return text[1:], true
	}
	return "-" + text, true
}

// resolveUnknown gives a value that is still unknown the type text.
func (c *compiler) resolveUnknown(x Expr) (Expr, error) {
	if x.Type() != TypeUnknown {
		return x, nil
	}
	return c.castTo(x, typeRef{typ: TypeText}, castImplicit)
}

// coerce converts x to type to if a conversion exists at level. ok is
// false if none does. A string literal converts at once, so that '5'
// compared with an integer column is an integer constant, and 'abc' there
// fails here (22P02), as in Postgres; other constants fold if they can;
// an unknown parameter takes the type.
func (c *compiler) coerce(x Expr, ref typeRef, level castLevel) (Expr, bool, error) {
	to, from := ref.typ, x.Type()
	if from == to && !ref.mod.Set {
		return x, true, nil
	}
	if to == typeAny {
		if from == TypeUnknown {
			return c.coerce(x, typeRef{typ: TypeText}, level)
		}
		return x, true, nil
	}
	if p, ok := x.(*param); ok && from == TypeUnknown {
		c.scope.setParamType(p.n, to)
		x = &param{n: p.n, typ: to}
		if !ref.mod.Set {
			return x, true, nil
		}
		from = to
	}
	f, ok := castFunc(from, to, ref.mod, level)
	if !ok {
		return nil, false, nil
	}
	k, isConst := x.(*constant)
	switch {
	case isConst && k.d == nil:
		return &constant{typ: to}, true, nil
	case isConst && from == TypeUnknown:
		d, err := f(k.d)
		if err != nil {
			return nil, true, err
		}
		return &constant{d: d, typ: to}, true, nil
	}
	return foldStrict(&cast{x: x, typ: to, fn: f}, x), true, nil
}

// castTo is coerce that fails when no conversion exists.
func (c *compiler) castTo(x Expr, ref typeRef, level castLevel) (Expr, error) {
	y, ok, err := c.coerce(x, ref, level)
	if err != nil {
		return nil, err
	}
	if !ok {
		if level == castExplicit {
			return nil, errCannotCast(x.Type(), ref.typ)
		}
		return nil, errf(CodeDatatypeMismatch, "expression is of type %s, but type %s is required", x.Type(), ref.typ)
	}
	return y, nil
}

// toBool coerces x to boolean for a context that requires it.
func (c *compiler) toBool(x Expr, what string) (Expr, error) {
	y, ok, err := c.coerce(x, typeRef{typ: TypeBool}, castImplicit)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errMismatch(what, TypeBool, x.Type())
	}
	return y, nil
}

// fold evaluates x now if its operands are all constants. An error is
// left for evaluation to report, so that a branch never taken, as in
// CASE WHEN b = 0 THEN NULL ELSE 1 / b END, cannot fail.
func fold(x Expr, operands ...Expr) Expr {
	return foldConst(x, false, operands)
}

// foldStrict is fold for a strict operator or function: a NULL constant
// operand makes it NULL without evaluating the others, as Postgres'
// planner simplifies it (so b::real * NULL is NULL even when b is not a
// number).
func foldStrict(x Expr, operands ...Expr) Expr {
	return foldConst(x, true, operands)
}

func foldConst(x Expr, strict bool, operands []Expr) Expr {
	if strict {
		for _, o := range operands {
			if k, ok := o.(*constant); ok && k.d == nil {
				return &constant{typ: x.Type()}
			}
		}
	}
	for _, o := range operands {
		if _, ok := o.(*constant); !ok {
			return x
		}
	}
	d, err := x.Eval(nil, nil)
	if err != nil {
		return x
	}
	return &constant{d: d, typ: x.Type()}
}

func (c *compiler) unaryExpr(e *sql.UnaryExpr) (Expr, error) {
	if text, ok := negatedLiteral(e); ok {
		return numberLit(text)
	}
	x, err := c.expr(e.X)
	if err != nil {
		return nil, err
	}
	switch e.Op {
	case sql.UnaryNot:
		b, err := c.toBool(x, "NOT")
		if err != nil {
			return nil, err
		}
		return foldStrict(&not{x: b}, b), nil
	case sql.UnaryPlus:
		if x.Type().category() == catNumeric || x.Type() == TypeInterval {
			return x, nil
		}
	case sql.UnaryMinus:
		if f := unaryMinus[x.Type()]; f != nil {
			return foldStrict(&unary{op: "-", x: x, typ: x.Type(), fn: f}, x), nil
		}
	}
	if x.Type() == TypeUnknown {
		return nil, &Error{code: CodeAmbiguousFunction, msg: "operator is not unique: " + string(e.Op) + " unknown",
			hint: "Could not choose a best candidate operator. You might need to add explicit type casts."}
	}
	return nil, errOperator(string(e.Op), TypeInvalid, x.Type())
}

func (c *compiler) binaryExpr(e *sql.BinaryExpr) (Expr, error) {
	l, err := c.expr(e.Left)
	if err != nil {
		return nil, err
	}
	if e.Op == sql.OpAnd || e.Op == sql.OpOr {
		// Each argument is checked as it is compiled, so the first
		// non-boolean one is the error, as in Postgres.
		if l, err = c.toBool(l, string(e.Op)); err != nil {
			return nil, err
		}
	}
	r, err := c.expr(e.Right)
	if err != nil {
		return nil, err
	}
	return c.binary(e.Op, l, r)
}

// binary types op over compiled operands.
func (c *compiler) binary(op sql.BinaryOp, l, r Expr) (Expr, error) {
	switch op {
	case sql.OpAnd, sql.OpOr:
		lb, err := c.toBool(l, string(op))
		if err != nil {
			return nil, err
		}
		rb, err := c.toBool(r, string(op))
		if err != nil {
			return nil, err
		}
		// A constant false in a conjunction (true in a disjunction)
		// decides it without evaluating the rest, as Postgres' planner
		// simplifies it.
		for _, x := range []Expr{lb, rb} {
			if k, ok := x.(*constant); ok && k.d == (op == sql.OpOr) {
				return k, nil
			}
		}
		if op == sql.OpAnd {
			return fold(&and{xs: flatten[*and](lb, rb, func(a *and) []Expr { return a.xs })}, lb, rb), nil
		}
		return fold(&or{xs: flatten[*or](lb, rb, func(o *or) []Expr { return o.xs })}, lb, rb), nil
	case sql.OpEq, sql.OpNotEq, sql.OpLt, sql.OpLtEq, sql.OpGt, sql.OpGtEq:
		l, r, cmpf, err := c.comparable(string(op), l, r, op != sql.OpEq && op != sql.OpNotEq)
		if err != nil {
			return nil, err
		}
		return foldStrict(&compare{op: op, l: l, r: r, cmp: cmpf}, l, r), nil
	case sql.OpIsDistinctFrom, sql.OpIsNotDistinctFrom:
		l, r, cmpf, err := c.comparable("=", l, r, false)
		if err != nil {
			return nil, err
		}
		return fold(&distinct{not: op == sql.OpIsNotDistinctFrom, l: l, r: r, cmp: cmpf}, l, r), nil
	case sql.OpLike, sql.OpNotLike, sql.OpILike, sql.OpNotILike:
		return c.like(op, l, r)
	case sql.OpRegexMatch, sql.OpRegexIMatch, sql.OpNotRegexMatch, sql.OpNotRegexIMatch:
		return c.regex(op, l, r)
	case sql.OpConcat:
		return c.concat(l, r)
	}
	sig, err := resolveOp(op, l.Type(), r.Type())
	if err != nil {
		return nil, err
	}
	if l, err = c.castTo(l, typeRef{typ: sig.l}, castImplicit); err != nil {
		return nil, err
	}
	if r, err = c.castTo(r, typeRef{typ: sig.r}, castImplicit); err != nil {
		return nil, err
	}
	return foldStrict(&binary{op: string(op), l: l, r: r, typ: sig.ret, fn: sig.fn, nullable: sig.nullable}, l, r), nil
}

// flatten merges nested conjunctions (or disjunctions) into one list.
func flatten[T Expr](l, r Expr, xs func(T) []Expr) []Expr {
	var out []Expr
	for _, x := range []Expr{l, r} {
		if n, ok := x.(T); ok {
			out = append(out, xs(n)...)
		} else {
			out = append(out, x)
		}
	}
	return out
}

// comparable coerces two operands to their comparison type and returns
// the ordering to compare them with.
func (c *compiler) comparable(op string, l, r Expr, ordering bool) (Expr, Expr, func(a, b row.Datum) int, error) {
	t, err := compareType(op, l.Type(), r.Type())
	if err != nil {
		return nil, nil, nil, err
	}
	cmpf := comparator(t)
	if cmpf == nil {
		return nil, nil, nil, errOperator(op, l.Type(), r.Type())
	}
	if l, err = c.castTo(l, typeRef{typ: t}, castImplicit); err != nil {
		return nil, nil, nil, err
	}
	if r, err = c.castTo(r, typeRef{typ: t}, castImplicit); err != nil {
		return nil, nil, nil, err
	}
	return l, r, cmpf, nil
}

// likeOps are the names Postgres reports LIKE operators by.
var likeOps = map[sql.BinaryOp]string{
	sql.OpLike: "~~", sql.OpNotLike: "!~~", sql.OpILike: "~~*", sql.OpNotILike: "!~~*",
}

func (c *compiler) textOperands(opName string, l, r Expr) (Expr, Expr, error) {
	lt, rt := l.Type(), r.Type()
	if (lt != TypeText && lt != TypeUnknown) || (rt != TypeText && rt != TypeUnknown) {
		return nil, nil, errOperator(opName, lt, rt)
	}
	l, err := c.castTo(l, typeRef{typ: TypeText}, castImplicit)
	if err != nil {
		return nil, nil, err
	}
	r, err = c.castTo(r, typeRef{typ: TypeText}, castImplicit)
	return l, r, err
}

func (c *compiler) like(op sql.BinaryOp, l, r Expr) (Expr, error) {
	return c.patternMatch(likeOps[op], op, l, r, op == sql.OpILike || op == sql.OpNotILike,
		op == sql.OpNotLike || op == sql.OpNotILike, compileLikeMatcher)
}

func (c *compiler) regex(op sql.BinaryOp, l, r Expr) (Expr, error) {
	return c.patternMatch(string(op), op, l, r, op == sql.OpRegexIMatch || op == sql.OpNotRegexIMatch,
		op == sql.OpNotRegexMatch || op == sql.OpNotRegexIMatch, compileRegex)
}

// patternMatch compiles a pattern operator over text operands (opName
// names it in a type error), compiling a constant pattern now.
func (c *compiler) patternMatch(opName string, op sql.BinaryOp, l, r Expr, fold, not bool, compile func(string, bool) (matcher, error)) (Expr, error) {
	l, r, err := c.textOperands(opName, l, r)
	if err != nil {
		return nil, err
	}
	n := &patternMatch{op: string(op), x: l, pat: r, fold: fold, not: not, compile: compile}
	if k, ok := r.(*constant); ok && k.d != nil {
		if n.cached, err = compile(k.d.(string), fold); err != nil {
			return nil, err
		}
	}
	return foldStrict(n, l, r), nil
}

// concat types ||: text || text, bytea || bytea and jsonb || jsonb by
// signature; otherwise text with any other value, which is cast to text
// (so 'x' || true is 'xtrue', as in Postgres).
func (c *compiler) concat(l, r Expr) (Expr, error) {
	lt, rt := l.Type(), r.Type()
	textual := func(t Type) bool { return t == TypeText || t == TypeUnknown }
	if !(textual(lt) && textual(rt)) {
		if sig, err := resolveOp(sql.OpConcat, lt, rt); err == nil && (lt == sig.l || rt == sig.r) && sig.l != TypeText {
			l, err := c.castTo(l, typeRef{typ: sig.l}, castImplicit)
			if err != nil {
				return nil, err
			}
			r, err := c.castTo(r, typeRef{typ: sig.r}, castImplicit)
			if err != nil {
				return nil, err
			}
			return foldStrict(&binary{op: "||", l: l, r: r, typ: sig.ret, fn: sig.fn}, l, r), nil
		}
		if !textual(lt) && !textual(rt) {
			return nil, errOperator("||", lt, rt)
		}
	}
	var err error
	if l, err = c.textCast(l); err != nil {
		return nil, err
	}
	if r, err = c.textCast(r); err != nil {
		return nil, err
	}
	return foldStrict(&binary{op: "||", l: l, r: r, typ: TypeText, fn: func(a, b row.Datum) (row.Datum, error) {
		return a.(string) + b.(string), nil
	}}, l, r), nil
}

// textCast converts x to text as the cast to text does (true is "true").
func (c *compiler) textCast(x Expr) (Expr, error) {
	t := x.Type()
	switch t {
	case TypeText:
		return x, nil
	case TypeUnknown:
		return c.castTo(x, typeRef{typ: TypeText}, castImplicit)
	}
	return foldStrict(&cast{x: x, typ: TypeText, fn: func(d row.Datum) (row.Datum, error) { return castToText(t, d), nil }}, x), nil
}

func (c *compiler) isExpr(e *sql.IsExpr) (Expr, error) {
	x, err := c.expr(e.X)
	if err != nil {
		return nil, err
	}
	switch e.Test {
	case sql.IsTrue, sql.IsFalse, sql.IsUnknown:
		if x, err = c.toBool(x, "IS "+e.Test.String()); err != nil {
			return nil, err
		}
	default:
		if x, err = c.resolveUnknown(x); err != nil {
			return nil, err
		}
	}
	return fold(&isTest{x: x, test: e.Test, not: e.Not}, x), nil
}

// inExpr types x [NOT] IN (list) as Postgres' transformAExprIn: the
// elements without column references, if there are several, are compared
// in their common type as one set; every other element is compared with
// x on its own, and the comparisons joined by OR (AND for NOT IN).
func (c *compiler) inExpr(e *sql.InExpr) (Expr, error) {
	if e.Query != nil {
		return nil, errf(CodeFeatureNotSupported, "subqueries are not supported yet")
	}
	x, err := c.expr(e.X)
	if err != nil {
		return nil, err
	}
	var items, vars, consts []Expr
	for _, el := range e.List {
		y, err := c.expr(el)
		if err != nil {
			return nil, err
		}
		items = append(items, y)
		if hasColumnRef(el) {
			vars = append(vars, y)
		} else {
			consts = append(consts, y)
		}
	}
	var res Expr
	rest := items
	if len(consts) > 1 {
		all := append([]Expr{x}, consts...)
		if t, err := commonType(all, "IN"); err == nil && allImplicit(all, t) {
			if err := c.coerceAll(all, t, "IN"); err != nil {
				return nil, err
			}
			cmpf := comparator(t)
			if cmpf == nil {
				return nil, errOperator("=", t, t)
			}
			res = fold(&inList{x: all[0], list: all[1:], not: e.Not, cmp: cmpf}, all...)
			rest = vars
		}
	}
	op, join := sql.OpEq, sql.OpOr
	if e.Not {
		op, join = sql.OpNotEq, sql.OpAnd
	}
	for _, el := range rest {
		cmp, err := c.binary(op, x, el)
		if err != nil {
			return nil, err
		}
		if res == nil {
			res = cmp
		} else if res, err = c.binary(join, res, cmp); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func allImplicit(xs []Expr, t Type) bool {
	for _, x := range xs {
		if !implicitCast(x.Type(), t) {
			return false
		}
	}
	return true
}

// hasColumnRef reports whether e refers to a column.
func hasColumnRef(e sql.Expr) bool {
	v := &columnFinder{}
	sql.Walk(v, e)
	return v.found
}

type columnFinder struct{ found bool }

func (v *columnFinder) Visit(n sql.Node) sql.Visitor {
	if _, ok := n.(*sql.ColumnRef); ok {
		v.found = true
	}
	if v.found {
		return nil
	}
	return v
}

func (c *compiler) between(e *sql.BetweenExpr) (Expr, error) {
	// x BETWEEN a AND b is x >= a AND x <= b; NOT BETWEEN is x < a OR
	// x > b, each comparison typed on its own, and in this order, as
	// Postgres rewrites it.
	lowOp, highOp, join := sql.OpGtEq, sql.OpLtEq, sql.OpAnd
	if e.Not {
		lowOp, highOp, join = sql.OpLt, sql.OpGt, sql.OpOr
	}
	x, err := c.expr(e.X)
	if err != nil {
		return nil, err
	}
	var bounds [2]Expr
	for i, b := range []struct {
		op sql.BinaryOp
		e  sql.Expr
	}{{lowOp, e.Low}, {highOp, e.High}} {
		y, err := c.expr(b.e)
		if err != nil {
			return nil, err
		}
		if bounds[i], err = c.binary(b.op, x, y); err != nil {
			return nil, err
		}
	}
	return c.binary(join, bounds[0], bounds[1])
}

func (c *compiler) exprs(es []sql.Expr) ([]Expr, error) {
	xs := make([]Expr, len(es))
	for i, e := range es {
		x, err := c.expr(e)
		if err != nil {
			return nil, err
		}
		xs[i] = x
	}
	return xs, nil
}

// common resolves the common type of xs, as Postgres' select_common_type
// for CASE, COALESCE, IN, GREATEST and LEAST, and converts them all to it.
func (c *compiler) common(xs []Expr, what string) (Type, error) {
	t, err := commonType(xs, what)
	if err != nil {
		return TypeInvalid, err
	}
	return t, c.coerceAll(xs, t, what)
}

// commonType is the type xs convert to implicitly, preferring the widest
// of a category; text if all are unknown.
func commonType(xs []Expr, what string) (Type, error) {
	t := TypeUnknown
	for _, x := range xs {
		xt := x.Type()
		switch {
		case xt == TypeUnknown || xt == t:
		case t == TypeUnknown:
			t = xt
		case xt.category() != catOther && xt.category() == t.category():
			if xt.rank() > t.rank() {
				t = xt
			}
		case implicitCast(xt, t):
		case implicitCast(t, xt):
			t = xt
		default:
			return TypeInvalid, errf(CodeDatatypeMismatch, "%s types %s and %s cannot be matched", what, t, xt)
		}
	}
	if t == TypeUnknown {
		t = TypeText
	}
	return t, nil
}

// coerceAll converts every element of xs to t.
func (c *compiler) coerceAll(xs []Expr, t Type, what string) error {
	for i, x := range xs {
		y, ok, err := c.coerce(x, typeRef{typ: t}, castImplicit)
		if err != nil {
			return err
		}
		if !ok {
			return errf(CodeDatatypeMismatch, "%s could not convert type %s to %s", what, x.Type(), t)
		}
		xs[i] = y
	}
	return nil
}

func (c *compiler) caseExpr(e *sql.CaseExpr) (Expr, error) {
	var operand Expr
	if e.Operand != nil {
		var err error
		if operand, err = c.expr(e.Operand); err != nil {
			return nil, err
		}
	}
	n := &caseExpr{}
	results := make([]Expr, 0, len(e.Whens)+1)
	for _, w := range e.Whens {
		cond, err := c.expr(w.Cond)
		if err != nil {
			return nil, err
		}
		if operand != nil {
			// CASE x WHEN v compares x = v, typed for each arm.
			if cond, err = c.binary(sql.OpEq, operand, cond); err != nil {
				return nil, err
			}
		}
		if cond, err = c.toBool(cond, "CASE/WHEN"); err != nil {
			return nil, err
		}
		res, err := c.expr(w.Result)
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, cond)
		results = append(results, res)
	}
	if e.Else != nil {
		els, err := c.expr(e.Else)
		if err != nil {
			return nil, err
		}
		results = append(results, els)
	}
	t, err := c.common(results, "CASE")
	if err != nil {
		return nil, err
	}
	n.typ = t
	n.results = results[:len(e.Whens)]
	if e.Else != nil {
		n.els = results[len(results)-1]
	}
	// Fold the arms a constant condition decides, as Postgres does.
	var conds, res []Expr
	for i, cond := range n.conds {
		if k, ok := cond.(*constant); ok {
			if k.d == true {
				n.els = n.results[i]
				break
			}
			continue // never taken
		}
		conds = append(conds, cond)
		res = append(res, n.results[i])
	}
	n.conds, n.results = conds, res
	if len(n.conds) == 0 {
		if n.els == nil {
			return &constant{typ: t}, nil
		}
		return n.els, nil
	}
	return n, nil
}

// funcCall types a call: the special forms (COALESCE, NULLIF, GREATEST,
// LEAST, pg_typeof), then the registry's overloads.
func (c *compiler) funcCall(f *sql.FuncCall) (Expr, error) {
	name := f.Name.Name
	switch f.Name.Schema {
	case "", "pg_catalog", "mz_catalog":
	default:
		name = f.Name.Schema + "." + name
	}
	switch {
	case aggregates[name]:
		return nil, errf(CodeFeatureNotSupported, "aggregates are not supported yet")
	case windowFuncs[name]:
		return nil, errf(CodeFeatureNotSupported, "window functions are not supported yet")
	case setFuncs[name]:
		return nil, errf(CodeFeatureNotSupported, "set-returning functions are not supported yet")
	case f.Star:
		// Postgres looks the function up without arguments first.
		for _, ov := range functions[name] {
			if ov.params(0) != nil {
				return nil, errf(CodeWrongObjectType, "%s(*) specified, but %s is not an aggregate function", name, name)
			}
		}
		return nil, errFunction(name, nil)
	case f.Distinct:
		return nil, errf(CodeWrongObjectType, "DISTINCT specified, but %s is not an aggregate function", name)
	}
	if f.NoParens {
		switch name {
		case "current_timestamp", "current_date", "localtimestamp":
		default:
			return nil, errf(CodeFeatureNotSupported, "%s is not supported yet", name)
		}
	}
	args, err := c.exprs(f.Args)
	if err != nil {
		return nil, err
	}
	switch name {
	case "coalesce", "greatest", "least":
		if len(args) == 0 {
			return nil, errf(CodeSyntaxError, "syntax error: %s requires at least one argument", name)
		}
		t, err := c.common(args, strings.ToUpper(name))
		if err != nil {
			return nil, err
		}
		if name == "coalesce" {
			// Arguments after the first non-NULL constant are never read.
			for i, a := range args {
				if k, ok := a.(*constant); ok && k.d != nil {
					args = args[:i+1]
					break
				}
			}
			return fold(&coalesce{xs: args, typ: t}, args...), nil
		}
		cmpf := comparator(t)
		if cmpf == nil {
			return nil, errf(CodeUndefinedFunction, "could not identify a comparison function for type %s", t)
		}
		return fold(&extremum{greatest: name == "greatest", xs: args, typ: t, cmp: cmpf}, args...), nil
	case "nullif":
		if len(args) != 2 {
			return nil, errFunction(name, args)
		}
		return c.nullIf(args[0], args[1])
	case "pg_typeof":
		if len(args) != 1 {
			return nil, errFunction(name, args)
		}
		return &constant{d: args[0].Type().String(), typ: TypeText}, nil
	}
	ovs := functions[name]
	cands := make([][]Type, len(ovs))
	for i, ov := range ovs {
		cands[i] = ov.params(len(args))
	}
	types := make([]Type, len(args))
	for i, a := range args {
		types[i] = a.Type()
	}
	i := pickCandidate(types, cands)
	switch i {
	case -1:
		return nil, errFunction(name, args)
	case -2:
		return nil, &Error{code: CodeAmbiguousFunction, msg: "function " + signature(name, args) + " is not unique",
			hint: "Could not choose a best candidate function. You might need to add explicit type casts."}
	}
	ov := ovs[i]
	for k, p := range cands[i] {
		if ov.polymorphic && p == typeAny && args[k].Type() == TypeUnknown {
			return nil, errf(CodeDatatypeMismatch, "could not determine polymorphic type because input has type unknown")
		}
		if args[k], err = c.castTo(args[k], typeRef{typ: p}, castImplicit); err != nil {
			return nil, err
		}
	}
	n := &call{name: name, args: args, ov: ov}
	if ov.usesNow {
		c.scope.usesNow = true
		return n, nil
	}
	if ov.strict {
		return foldStrict(n, args...), nil
	}
	return fold(n, args...), nil
}

func (c *compiler) nullIf(a, b Expr) (Expr, error) {
	if a.Type() == TypeUnknown {
		to := b.Type()
		if to == TypeUnknown {
			to = TypeText
		}
		var err error
		if a, err = c.castTo(a, typeRef{typ: to}, castImplicit); err != nil {
			return nil, err
		}
	}
	t, err := compareType("=", a.Type(), b.Type())
	if err != nil {
		return nil, err
	}
	n := &nullIf{a: a, typ: t, cmp: comparator(t)}
	if n.cmp == nil {
		return nil, errOperator("=", a.Type(), b.Type())
	}
	if n.b, err = c.castTo(b, typeRef{typ: t}, castImplicit); err != nil {
		return nil, err
	}
	if at := a.Type(); at != t {
		n.conv, _ = castFunc(at, t, row.TypeMod{}, castImplicit)
		// The result is the left operand of the = Postgres picks, which
		// for its cross-type integer and float operators (int24eq,
		// float48eq) is a's own type.
		if (at.isInteger() && t.isInteger()) || at.isFloat() {
			n.typ = at
		}
	}
	return fold(n, a, n.b), nil
}

func signature(name string, args []Expr) string {
	types := make([]string, len(args))
	for i, a := range args {
		types[i] = a.Type().String()
	}
	return name + "(" + strings.Join(types, ", ") + ")"
}

// errFunction is 42883 `function foo(integer) does not exist`.
func errFunction(name string, args []Expr) *Error {
	return &Error{code: CodeUndefinedFunction, msg: "function " + signature(name, args) + " does not exist",
		hint: "No function matches the given name and argument types. You might need to add explicit type casts."}
}
