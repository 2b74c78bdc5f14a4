package sql

import (
	"strconv"
	"strings"
)

// Operator precedence, lowest first, as in Postgres's grammar. An operator's
// operands bind tighter than the operator itself.
const (
	precNone    = iota
	precOr      // OR
	precAnd     // AND
	precNot     // prefix NOT
	precIs      // IS ..., ISNULL, NOTNULL, IS [NOT] DISTINCT FROM
	precCmp     // = <> < > <= >=
	precLike    // [NOT] LIKE, ILIKE, BETWEEN, IN
	precOther   // || and every other operator (->, @>, ~, ...)
	precAdd     // + -
	precMul     // * / %
	precExp     // ^
	precUnary   // prefix - +
	precCast    // ::
	precPrimary // literals, names, calls, parenthesized expressions
)

// BinaryOp is the operator of a BinaryExpr, spelled as in canonical SQL.
type BinaryOp string

// The binary operators. "!=" is parsed as OpNotEq.
const (
	OpOr                BinaryOp = "OR"
	OpAnd               BinaryOp = "AND"
	OpIsDistinctFrom    BinaryOp = "IS DISTINCT FROM"
	OpIsNotDistinctFrom BinaryOp = "IS NOT DISTINCT FROM"
	OpEq                BinaryOp = "="
	OpNotEq             BinaryOp = "<>"
	OpLt                BinaryOp = "<"
	OpLtEq              BinaryOp = "<="
	OpGt                BinaryOp = ">"
	OpGtEq              BinaryOp = ">="
	OpLike              BinaryOp = "LIKE"
	OpNotLike           BinaryOp = "NOT LIKE"
	OpILike             BinaryOp = "ILIKE"
	OpNotILike          BinaryOp = "NOT ILIKE"
	OpConcat            BinaryOp = "||"
	OpJSONGet           BinaryOp = "->"
	OpJSONGetText       BinaryOp = "->>"
	OpJSONPath          BinaryOp = "#>"
	OpJSONPathText      BinaryOp = "#>>"
	OpContains          BinaryOp = "@>"
	OpContainedBy       BinaryOp = "<@"
	OpRegexMatch        BinaryOp = "~"
	OpRegexIMatch       BinaryOp = "~*"
	OpNotRegexMatch     BinaryOp = "!~"
	OpNotRegexIMatch    BinaryOp = "!~*"
	OpBitAnd            BinaryOp = "&"
	OpBitOr             BinaryOp = "|"
	OpBitXor            BinaryOp = "#"
	OpShiftLeft         BinaryOp = "<<"
	OpShiftRight        BinaryOp = ">>"
	OpPlus              BinaryOp = "+"
	OpMinus             BinaryOp = "-"
	OpMul               BinaryOp = "*"
	OpDiv               BinaryOp = "/"
	OpMod               BinaryOp = "%"
	OpPow               BinaryOp = "^"
)

// symbolOps maps operator tokens to binary operators.
var symbolOps = map[string]BinaryOp{
	"=": OpEq, "<>": OpNotEq, "<": OpLt, "<=": OpLtEq, ">": OpGt, ">=": OpGtEq,
	"||": OpConcat, "->": OpJSONGet, "->>": OpJSONGetText, "#>": OpJSONPath,
	"#>>": OpJSONPathText, "@>": OpContains, "<@": OpContainedBy, "~": OpRegexMatch,
	"~*": OpRegexIMatch, "!~": OpNotRegexMatch, "!~*": OpNotRegexIMatch, "&": OpBitAnd,
	"|": OpBitOr, "#": OpBitXor, "<<": OpShiftLeft, ">>": OpShiftRight,
	"+": OpPlus, "-": OpMinus, "*": OpMul, "/": OpDiv, "%": OpMod, "^": OpPow,
}

// precedence returns the operator's binding strength; higher binds tighter.
func (op BinaryOp) precedence() int {
	switch op {
	case OpOr:
		return precOr
	case OpAnd:
		return precAnd
	case OpIsDistinctFrom, OpIsNotDistinctFrom:
		return precIs
	case OpEq, OpNotEq, OpLt, OpLtEq, OpGt, OpGtEq:
		return precCmp
	case OpLike, OpNotLike, OpILike, OpNotILike:
		return precLike
	case OpPlus, OpMinus:
		return precAdd
	case OpMul, OpDiv, OpMod:
		return precMul
	case OpPow:
		return precExp
	}
	return precOther
}

// nonAssociative reports operators that cannot be chained without parentheses
// ("a < b < c" is a syntax error, as in Postgres).
func nonAssociative(prec int) bool { return prec == precIs || prec == precCmp || prec == precLike }

// UnaryOp is the operator of a UnaryExpr.
type UnaryOp string

// The prefix operators.
const (
	UnaryNot   UnaryOp = "NOT"
	UnaryMinus UnaryOp = "-"
	UnaryPlus  UnaryOp = "+"
)

// IsTest is the predicate of an IsExpr.
type IsTest uint8

// The IS predicates.
const (
	IsNull    IsTest = iota + 1 // IS NULL (also ISNULL); with Not, IS NOT NULL (NOTNULL)
	IsTrue                      // IS TRUE
	IsFalse                     // IS FALSE
	IsUnknown                   // IS UNKNOWN
)

// String returns the predicate's keyword.
func (t IsTest) String() string {
	switch t {
	case IsNull:
		return "NULL"
	case IsTrue:
		return "TRUE"
	case IsFalse:
		return "FALSE"
	case IsUnknown:
		return "UNKNOWN"
	}
	return "?"
}

// NumberLit is a numeric constant: 42, 3.14, .5, 1e10. Text is the literal as
// written, so integers of any size survive; the planner picks the type (int4,
// int8 or numeric by size, numeric for decimals). A negative number is a
// UnaryExpr over a NumberLit, except in SET values where the sign is folded
// into Text.
type NumberLit struct{ Text string }

// IsInteger reports whether the literal is an integer (digits only, with an
// optional leading minus sign).
func (n *NumberLit) IsInteger() bool {
	s := strings.TrimPrefix(n.Text, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// Int64 parses an integer literal; it fails for decimals and out-of-range values.
func (n *NumberLit) Int64() (int64, error) { return strconv.ParseInt(n.Text, 10, 64) }

// StringLit is a string constant in any spelling ('...', E'...', $$...$$),
// decoded. Its type is unknown until the planner coerces it.
type StringLit struct{ Value string }

// BoolLit is TRUE or FALSE.
type BoolLit struct{ Value bool }

// NullLit is NULL.
type NullLit struct{}

// TypedLit is a constant preceded by a type name: INTERVAL '1s',
// TIMESTAMP '2024-01-01', DATE '...', mz_timestamp '123', jsonb '{}'. It means
// CAST('...' AS type), with the string given to the type's input function.
type TypedLit struct {
	Type  TypeName
	Value string
}

// Param is a positional parameter $n of the extended query protocol.
type Param struct {
	Index int // n, as written; $0 parses and is left to the planner to reject
	Pos   int // 1-based character position; 0 when not parsed from text
}

// ColumnRef names a column: a, t.a, s.t.a or d.s.t.a.
type ColumnRef struct {
	Table  ObjectName // the qualifier; Table.IsZero() for an unqualified column
	Column string
	Pos    int // 1-based character position; 0 when not parsed from text
}

// Star is * or t.* in a select list; it appears nowhere else (count(*) is a
// FuncCall with Star set).
type Star struct {
	Table ObjectName // the qualifier of t.*; zero for a bare *
}

// UnaryExpr is a prefix operator applied to X.
type UnaryExpr struct {
	Op UnaryOp
	X  Expr
}

// BinaryExpr is Left Op Right, including AND, OR, comparisons, LIKE/ILIKE and
// IS [NOT] DISTINCT FROM.
type BinaryExpr struct {
	Op          BinaryOp
	Left, Right Expr
}

// IsExpr is X IS [NOT] NULL/TRUE/FALSE/UNKNOWN.
type IsExpr struct {
	X    Expr
	Not  bool
	Test IsTest
}

// InExpr is X [NOT] IN (list) or X [NOT] IN (subquery): exactly one of List and
// Query is set.
type InExpr struct {
	X     Expr
	Not   bool
	List  []Expr
	Query *Select
}

// BetweenExpr is X [NOT] BETWEEN Low AND High.
type BetweenExpr struct {
	X, Low, High Expr
	Not          bool
}

// CaseExpr is CASE [Operand] WHEN ... THEN ... [ELSE Else] END. With an
// Operand each When's Cond is compared to it for equality; without, each Cond
// is a boolean condition. Else is nil when absent (NULL).
type CaseExpr struct {
	Operand Expr
	Whens   []When
	Else    Expr
}

// When is one WHEN Cond THEN Result arm of a CaseExpr.
type When struct {
	Cond, Result Expr
}

// Cast is CAST(X AS Type) or X::Type; both spellings give the same node.
type Cast struct {
	X    Expr
	Type TypeName
}

// FuncCall is a function or aggregate call: f(a, b), count(*), count(DISTINCT
// x), pg_catalog.now(). COALESCE, NULLIF, GREATEST and LEAST are ordinary
// calls; so are the SQL-standard keyword functions written without parentheses
// (CURRENT_TIMESTAMP, CURRENT_USER, ...), with NoParens set.
type FuncCall struct {
	Name     ObjectName // lower case unless quoted; Name.Pos locates the call
	Args     []Expr
	Star     bool // f(*); Args is empty
	Distinct bool // f(DISTINCT ...)
	NoParens bool // a keyword function written bare: current_timestamp
}

// Subquery is a scalar subquery, (SELECT ...), used as a value.
type Subquery struct{ Query *Select }

// Exists is EXISTS (SELECT ...).
type Exists struct{ Query *Select }

func (*NumberLit) exprNode()   {}
func (*StringLit) exprNode()   {}
func (*BoolLit) exprNode()     {}
func (*NullLit) exprNode()     {}
func (*TypedLit) exprNode()    {}
func (*Param) exprNode()       {}
func (*ColumnRef) exprNode()   {}
func (*Star) exprNode()        {}
func (*UnaryExpr) exprNode()   {}
func (*BinaryExpr) exprNode()  {}
func (*IsExpr) exprNode()      {}
func (*InExpr) exprNode()      {}
func (*BetweenExpr) exprNode() {}
func (*CaseExpr) exprNode()    {}
func (*Cast) exprNode()        {}
func (*FuncCall) exprNode()    {}
func (*Subquery) exprNode()    {}
func (*Exists) exprNode()      {}

func (e *NumberLit) String() string   { return render(e) }
func (e *StringLit) String() string   { return render(e) }
func (e *BoolLit) String() string     { return render(e) }
func (e *NullLit) String() string     { return render(e) }
func (e *TypedLit) String() string    { return render(e) }
func (e *Param) String() string       { return render(e) }
func (e *ColumnRef) String() string   { return render(e) }
func (e *Star) String() string        { return render(e) }
func (e *UnaryExpr) String() string   { return render(e) }
func (e *BinaryExpr) String() string  { return render(e) }
func (e *IsExpr) String() string      { return render(e) }
func (e *InExpr) String() string      { return render(e) }
func (e *BetweenExpr) String() string { return render(e) }
func (e *CaseExpr) String() string    { return render(e) }
func (e *Cast) String() string        { return render(e) }
func (e *FuncCall) String() string    { return render(e) }
func (e *Subquery) String() string    { return render(e) }
func (e *Exists) String() string      { return render(e) }

// exprPrec returns the precedence an expression's rendering has at its top.
func exprPrec(e Expr) int {
	switch e := e.(type) {
	case *BinaryExpr:
		return e.Op.precedence()
	case *UnaryExpr:
		if e.Op == UnaryNot {
			return precNot
		}
		return precUnary
	case *IsExpr:
		return precIs
	case *InExpr, *BetweenExpr:
		return precLike
	case *Cast:
		return precCast
	}
	return precPrimary
}

// operand renders e, in parentheses when it binds less tightly than min.
// Parsing the output gives back the same tree: the AST keeps no parentheses,
// and String adds exactly those the precedence rules need.
func (w *printer) operand(e Expr, min int) {
	if exprPrec(e) < min {
		w.WriteByte('(')
		e.format(w)
		w.WriteByte(')')
		return
	}
	e.format(w)
}

func (e *NumberLit) format(w *printer) { w.WriteString(e.Text) }
func (e *StringLit) format(w *printer) { w.WriteString(QuoteString(e.Value)) }
func (e *NullLit) format(w *printer)   { w.WriteString("NULL") }

func (e *BoolLit) format(w *printer) {
	if e.Value {
		w.WriteString("true")
	} else {
		w.WriteString("false")
	}
}

func (e *TypedLit) format(w *printer) {
	e.Type.format(w)
	w.WriteByte(' ')
	w.WriteString(QuoteString(e.Value))
}

func (e *Param) format(w *printer) { w.WriteString("$" + strconv.Itoa(e.Index)) }

func (e *ColumnRef) format(w *printer) {
	if !e.Table.IsZero() {
		e.Table.format(w)
		w.WriteByte('.')
	}
	w.ident(e.Column)
}

func (e *Star) format(w *printer) {
	if !e.Table.IsZero() {
		e.Table.format(w)
		w.WriteByte('.')
	}
	w.WriteByte('*')
}

func (e *UnaryExpr) format(w *printer) {
	if e.Op == UnaryNot {
		w.WriteString("NOT ")
		w.operand(e.X, precNot)
		return
	}
	w.WriteString(string(e.Op))
	// "- -1" must not become "--1", which starts a comment.
	if u, ok := e.X.(*UnaryExpr); ok && u.Op != UnaryNot {
		w.WriteByte(' ')
	}
	w.operand(e.X, precUnary)
}

func (e *BinaryExpr) format(w *printer) {
	p := e.Op.precedence()
	left, right := p, p+1 // left-associative
	if nonAssociative(p) {
		left = p + 1
	}
	w.operand(e.Left, left)
	w.WriteString(" " + string(e.Op) + " ")
	w.operand(e.Right, right)
}

func (e *IsExpr) format(w *printer) {
	w.operand(e.X, precIs+1)
	w.WriteString(" IS ")
	if e.Not {
		w.WriteString("NOT ")
	}
	w.WriteString(e.Test.String())
}

func (e *InExpr) format(w *printer) {
	w.operand(e.X, precLike+1)
	if e.Not {
		w.WriteString(" NOT")
	}
	w.WriteString(" IN (")
	if e.Query != nil {
		e.Query.format(w)
	} else {
		w.exprList(e.List)
	}
	w.WriteByte(')')
}

func (e *BetweenExpr) format(w *printer) {
	w.operand(e.X, precLike+1)
	if e.Not {
		w.WriteString(" NOT")
	}
	w.WriteString(" BETWEEN ")
	w.operand(e.Low, precLike+1)
	w.WriteString(" AND ")
	w.operand(e.High, precLike+1)
}

func (e *CaseExpr) format(w *printer) {
	w.WriteString("CASE")
	if e.Operand != nil {
		w.WriteByte(' ')
		e.Operand.format(w)
	}
	for _, wh := range e.Whens {
		w.WriteString(" WHEN ")
		wh.Cond.format(w)
		w.WriteString(" THEN ")
		wh.Result.format(w)
	}
	if e.Else != nil {
		w.WriteString(" ELSE ")
		e.Else.format(w)
	}
	w.WriteString(" END")
}

func (e *Cast) format(w *printer) {
	w.operand(e.X, precCast)
	w.WriteString("::")
	e.Type.format(w)
}

func (e *FuncCall) format(w *printer) {
	if e.NoParens {
		w.WriteString(e.Name.Name)
		return
	}
	parts := e.Name.Parts()
	for i, p := range parts {
		if i > 0 {
			w.WriteByte('.')
		}
		switch {
		case i == len(parts)-1 && funcNameWords[p]:
			// left(s, 2): a function-name keyword needs no quotes before "(".
			w.WriteString(p)
		case i == 0 && len(parts) == 1 && parenKeywords[p]:
			// A function called exists must not read as EXISTS (subquery).
			w.WriteString(`"` + p + `"`)
		default:
			w.ident(p)
		}
	}
	w.WriteByte('(')
	switch {
	case e.Star:
		w.WriteByte('*')
	default:
		if e.Distinct {
			w.WriteString("DISTINCT ")
		}
		w.exprList(e.Args)
	}
	w.WriteByte(')')
}

// parenKeywords are unreserved words that start special syntax when "("
// follows them.
var parenKeywords = setOf("exists", "row")

func (e *Subquery) format(w *printer) {
	w.WriteByte('(')
	e.Query.format(w)
	w.WriteByte(')')
}

func (e *Exists) format(w *printer) {
	w.WriteString("EXISTS (")
	e.Query.format(w)
	w.WriteByte(')')
}
