package sql

import (
	"fmt"
	"strconv"
	"strings"
)

// Expressions are parsed by precedence climbing: parseExprPrec(min) parses a
// prefix term and then every infix or postfix operator binding at least as
// tightly as min. The precedence levels and associativity follow Postgres's
// grammar (see the prec constants), including its non-associative levels: a
// binary operator at such a level may not be followed by another operator of
// the same level ("a = b = c", "a LIKE b IN (c)" are errors).

func (p *parser) parseExpr() Expr { return p.parseExprPrec(precOr) }

func (p *parser) parseExprList() []Expr {
	// Room for a few without regrowing: a VALUES row, a call's
	// arguments.
	es := append(make([]Expr, 0, 4), p.parseExpr())
	for p.acceptPunct(",") {
		es = append(es, p.parseExpr())
	}
	return es
}

// parseExprPrec leaves the height of the expression it returns, or a lower
// bound of it, in p.h.
func (p *parser) parseExprPrec(min int) Expr {
	p.enter()
	defer p.leave()
	p.h = 0
	left := p.parsePrefix()
	h := max(p.h, 1)
	for {
		prec := p.infixPrec()
		if prec == precNone || prec < min {
			p.checkHeight(h)
			p.h = h
			return left
		}
		left = chainLink(p, &h, func() Expr { return p.parseInfix(left, prec) })
	}
}

// infixPrec returns the precedence of the infix or postfix operator at the
// current token, or precNone if the expression cannot continue here.
func (p *parser) infixPrec() int {
	t := p.peek()
	switch t.kind {
	case tokOp:
		if op, ok := symbolOps[t.text]; ok {
			return op.precedence()
		}
		return precOther // unknown operators fail in parseInfix
	case tokPunct:
		switch t.text {
		case "::":
			return precCast
		case "[":
			return precCast
		}
	case tokIdent:
		if t.quoted {
			return precNone
		}
		switch t.text {
		case "or":
			return precOr
		case "and":
			return precAnd
		case "is", "isnull", "notnull":
			return precIs
		case "in", "like", "ilike", "between", "similar":
			return precLike
		case "not":
			switch next := p.peekAt(1); {
			case next.isWord("in"), next.isWord("like"), next.isWord("ilike"), next.isWord("between"), next.isWord("similar"):
				return precLike
			}
		case "at":
			if p.peekAt(1).isWord("time") && p.peekAt(2).isWord("zone") {
				return precUnary
			}
		case "collate":
			return precUnary
		}
	}
	return precNone
}

// parseInfix parses the operator at the current token, of precedence prec,
// and its right operand, with left as its left operand.
func (p *parser) parseInfix(left Expr, prec int) Expr {
	t := p.advance()
	switch t.kind {
	case tokOp:
		op, ok := symbolOps[t.text]
		if !ok {
			p.unexpectedAt(t)
		}
		return p.binary(op, left, prec)
	case tokPunct:
		if t.text == "[" {
			p.unsupported(t, "array subscripts")
		}
		return &Cast{X: left, Type: p.parseTypeName()}
	}
	switch t.text {
	case "or":
		return p.binary(OpOr, left, prec)
	case "and":
		return p.binary(OpAnd, left, prec)
	case "isnull":
		return &IsExpr{X: left, Test: IsNull}
	case "notnull":
		return &IsExpr{X: left, Test: IsNull, Not: true}
	case "is":
		not := p.acceptWords("not")
		switch {
		case p.acceptWords("null"):
			return &IsExpr{X: left, Not: not, Test: IsNull}
		case p.acceptWords("true"):
			return &IsExpr{X: left, Not: not, Test: IsTrue}
		case p.acceptWords("false"):
			return &IsExpr{X: left, Not: not, Test: IsFalse}
		case p.acceptWords("unknown"):
			return &IsExpr{X: left, Not: not, Test: IsUnknown}
		case p.acceptWords("distinct", "from"):
			if not {
				return p.binary(OpIsNotDistinctFrom, left, prec)
			}
			return p.binary(OpIsDistinctFrom, left, prec)
		}
		p.unexpected()
	case "at":
		p.unsupported(t, "AT TIME ZONE")
	case "collate":
		p.unsupported(t, "COLLATE")
	}
	// [NOT] IN / LIKE / ILIKE / BETWEEN / SIMILAR
	not := t.text == "not"
	if not {
		t = p.advance()
	}
	switch t.text {
	case "in":
		return p.parseIn(left, not)
	case "like":
		if not {
			return p.like(OpNotLike, left, prec)
		}
		return p.like(OpLike, left, prec)
	case "ilike":
		if not {
			return p.like(OpNotILike, left, prec)
		}
		return p.like(OpILike, left, prec)
	case "between":
		return p.parseBetween(left, not)
	}
	p.unsupported(t, "SIMILAR TO")
	return nil
}

// binary parses the right operand of op and, for a non-associative level,
// rejects a second operator of the same level.
func (p *parser) binary(op BinaryOp, left Expr, prec int) Expr {
	right := p.parseExprPrec(prec + 1)
	if nonAssociative(prec) && p.infixPrec() == prec {
		p.unexpected()
	}
	return &BinaryExpr{Op: op, Left: left, Right: right}
}

func (p *parser) like(op BinaryOp, left Expr, prec int) Expr {
	e := p.binary(op, left, prec)
	if p.isWords("escape") {
		p.unsupported(p.peek(), "LIKE ... ESCAPE")
	}
	return e
}

func (p *parser) parseIn(left Expr, not bool) Expr {
	p.expectPunct("(")
	e := &InExpr{X: left, Not: not}
	if p.isWords("select") {
		e.Query = p.parseSelect()
	} else {
		e.List = p.parseExprList()
	}
	p.expectPunct(")")
	return e
}

func (p *parser) parseBetween(left Expr, not bool) Expr {
	if p.isWords("symmetric") {
		p.unsupported(p.peek(), "BETWEEN SYMMETRIC")
	}
	p.acceptWords("asymmetric")
	// The bounds bind tighter than BETWEEN, so the AND that separates them is
	// never read as a conjunction.
	low := p.parseExprPrec(precLike + 1)
	p.expectWords("and")
	high := p.parseExprPrec(precLike + 1)
	if p.infixPrec() == precLike {
		p.unexpected()
	}
	return &BetweenExpr{X: left, Low: low, High: high, Not: not}
}

// parsePrefix parses a term: a literal, a name, a call, a parenthesized
// expression or subquery, or a prefix operator and its operand.
func (p *parser) parsePrefix() Expr {
	t := p.peek()
	switch t.kind {
	case tokNumber:
		p.advance()
		return &NumberLit{Text: t.text}
	case tokString:
		p.advance()
		return &StringLit{Value: t.text}
	case tokParam:
		p.advance()
		n, _ := strconv.Atoi(t.text) // the lexer bounds the digits
		return &Param{Index: n, Pos: t.pos}
	case tokOp:
		switch t.text {
		case "-", "+":
			p.advance()
			return &UnaryExpr{Op: UnaryOp(t.text), X: p.parseChildExpr(precUnary)}
		}
	case tokPunct:
		if t.text == "(" {
			return p.parseParenExpr()
		}
	case tokIdent:
		if !t.quoted {
			if e := p.parseKeywordExpr(t); e != nil {
				return e
			}
		}
		return p.parseNameExpr()
	}
	p.unexpected()
	return nil
}

// parseChildExpr parses the only operand of a node that wraps it (a unary
// operator, a cast), leaving the node's height in p.h.
func (p *parser) parseChildExpr(min int) Expr {
	p.level++
	x := p.parseExprPrec(min)
	p.level--
	p.h++
	return x
}

// parseKeywordExpr parses the terms introduced by a keyword, or returns nil if
// t starts an ordinary name.
func (p *parser) parseKeywordExpr(t token) Expr {
	switch t.text {
	case "not":
		p.advance()
		return &UnaryExpr{Op: UnaryNot, X: p.parseChildExpr(precNot)}
	case "null":
		p.advance()
		return &NullLit{}
	case "true", "false":
		p.advance()
		return &BoolLit{Value: t.text == "true"}
	case "case":
		return p.parseCase()
	case "cast":
		p.advance()
		p.expectPunct("(")
		x := p.parseChildExpr(precOr)
		p.expectWords("as")
		typ := p.parseTypeName()
		p.expectPunct(")")
		return &Cast{X: x, Type: typ}
	case "exists":
		if !p.peekAt(1).isPunct("(") {
			return nil // a column named exists
		}
		p.advance()
		p.expectPunct("(")
		if !p.isWords("select") {
			p.unexpected()
		}
		q := p.parseNodeSelect()
		p.expectPunct(")")
		return &Exists{Query: q}
	case "array":
		p.unsupported(t, "ARRAY")
	case "any", "some", "all":
		p.unsupported(t, "ANY/SOME/ALL comparisons")
	case "row":
		if p.peekAt(1).isPunct("(") {
			p.unsupported(t, "ROW constructors")
		}
	case "default":
		p.unsupported(t, "DEFAULT in expressions")
	}
	if noParenFuncs[t.text] && !p.peekAt(1).isPunct("(") {
		p.advance()
		return &FuncCall{Name: ObjectName{Name: t.text, Pos: t.pos}, NoParens: true}
	}
	return nil
}

func (p *parser) parseCase() Expr {
	p.advance()
	p.level++
	e := &CaseExpr{}
	if !p.isWords("when") {
		e.Operand = p.parseExpr()
	}
	if !p.isWords("when") {
		p.unexpected()
	}
	for p.acceptWords("when") {
		cond := p.parseExpr()
		p.expectWords("then")
		e.Whens = append(e.Whens, When{Cond: cond, Result: p.parseExpr()})
	}
	if p.acceptWords("else") {
		e.Else = p.parseExpr()
	}
	p.expectWords("end")
	p.level--
	p.h++ // p.h is its last operand's height
	return e
}

// parseNodeSelect parses a SELECT held by a node of its own (a
// *Subquery, an *Exists), leaving that node's height (a lower bound) in p.h.
func (p *parser) parseNodeSelect() *Select {
	p.level++
	p.h = 0
	q := p.parseSelect()
	p.level--
	p.h += 2 // the node and the Select above some descendant, or none
	return q
}

// parseParenExpr parses (expr) or a scalar subquery (SELECT ...).
func (p *parser) parseParenExpr() Expr {
	p.expectPunct("(")
	if p.isWords("select") {
		q := p.parseNodeSelect()
		p.expectPunct(")")
		return &Subquery{Query: q}
	}
	e := p.parseExpr()
	if p.peek().isPunct(",") {
		p.unsupported(p.peek(), "row constructors")
	}
	p.expectPunct(")")
	return e
}

// parseNameExpr parses what starts with an identifier: a column reference
// (a, t.a, s.t.a, d.s.t.a), a function call (f(...), s.f(...)) or a typed
// literal (type 'string').
func (p *parser) parseNameExpr() Expr {
	t := p.peek()
	if !t.quoted && reservedWords[t.text] && !(funcNameWords[t.text] && p.peekAt(1).isPunct("(")) {
		p.unexpected()
	}
	// double precision '1.5', timestamp with time zone '...'
	if name, n := p.multiwordType(0); n > 0 && p.peekAt(n).kind == tokString {
		p.pos += n
		return p.typedLit(TypeName{Name: name, Pos: t.pos})
	}
	p.advance()
	parts := []string{t.text}
	for p.peek().isPunct(".") {
		p.advance()
		// After a dot any word is a name, as in Postgres: t.from is a column.
		if p.peek().kind != tokIdent {
			p.unexpected()
		}
		parts = append(parts, p.advance().text)
		if len(parts) > 4 {
			// No name has more parts: fail now rather than read on
			// (and quote) a chain of any length.
			p.fail(t, CodeSyntaxError, fmt.Sprintf("improper qualified name (too many dotted names): %s", strings.Join(parts, ".")))
		}
	}
	if p.peek().isPunct("(") {
		name, ok := objectName(parts, t.pos)
		if !ok {
			p.fail(t, CodeSyntaxError, fmt.Sprintf("improper qualified name (too many dotted names): %s", strings.Join(parts, ".")))
		}
		return p.parseCall(name)
	}
	if len(parts) == 1 && p.peek().kind == tokString {
		return p.typedLit(TypeName{Name: t.text, Pos: t.pos})
	}
	table, _ := objectName(parts[:len(parts)-1], t.pos)
	return &ColumnRef{Table: table, Column: parts[len(parts)-1], Pos: t.pos}
}

// intervalFields are the qualifiers Postgres allows after an interval type or
// literal; shardtail does not implement them, and silently reading one as an
// alias would change the meaning.
var intervalFields = setOf("year", "month", "day", "hour", "minute", "second")

func (p *parser) typedLit(typ TypeName) Expr {
	e := &TypedLit{Type: typ, Value: p.parseStringLit()}
	p.rejectIntervalFields(typ)
	return e
}

func (p *parser) rejectIntervalFields(typ TypeName) {
	if (typ.Name == "interval" && typ.Schema == "") && p.peek().kind == tokIdent && !p.peek().quoted && intervalFields[p.peek().text] {
		p.unsupported(p.peek(), "interval qualifiers")
	}
}

// parseCall parses the argument list of a call to name, at "(".
// It leaves the call's height (a lower bound) in p.h.
func (p *parser) parseCall(name ObjectName) Expr {
	p.expectPunct("(")
	f := &FuncCall{Name: name}
	p.level++
	p.h = 0
	switch {
	case p.peek().isOp("*") && p.peekAt(1).isPunct(")"):
		p.advance()
		f.Star = true
	case p.peek().isPunct(")"):
	default:
		if p.acceptWords("distinct") {
			f.Distinct = true
		} else {
			p.acceptWords("all")
		}
		f.Args = p.parseExprList()
		if p.isWords("order", "by") {
			p.unsupported(p.peek(), "ORDER BY in aggregate calls")
		}
	}
	p.expectPunct(")")
	p.level--
	p.h++ // p.h is its last argument's height, or 0
	switch {
	case p.isWords("over"):
		p.unsupported(p.peek(), "window functions")
	case p.isWords("filter") && p.peekAt(1).isPunct("("):
		p.unsupported(p.peek(), "FILTER")
	case p.isWords("within", "group"):
		p.unsupported(p.peek(), "WITHIN GROUP")
	}
	return f
}

// multiwordType recognizes a multiword type name k tokens ahead and returns its
// canonical spelling and length in tokens, or n == 0.
func (p *parser) multiwordType(k int) (name string, n int) {
	w := func(i int, s string) bool { return p.peekAt(k + i).isWord(s) }
	switch {
	case w(0, "double") && w(1, "precision"):
		return "double precision", 2
	case (w(0, "character") || w(0, "char")) && w(1, "varying"):
		return "character varying", 2
	case w(0, "timestamp") || w(0, "time"):
		if zone := p.zoneSuffix(k + 1); zone != "" {
			return p.peekAt(k).text + zone, 4
		}
	}
	return "", 0
}

// zoneSuffix recognizes "with time zone" or "without time zone" k tokens ahead.
func (p *parser) zoneSuffix(k int) string {
	if !p.peekAt(k+1).isWord("time") || !p.peekAt(k+2).isWord("zone") {
		return ""
	}
	switch {
	case p.peekAt(k).isWord("with"):
		return " with time zone"
	case p.peekAt(k).isWord("without"):
		return " without time zone"
	}
	return ""
}

// parseTypeName parses a type: a name (possibly schema-qualified or
// multiword), optional modifiers, and an optional [].
func (p *parser) parseTypeName() TypeName {
	t := p.peek()
	typ := TypeName{Pos: t.pos}
	switch name, n := p.multiwordType(0); {
	case n > 0:
		p.pos += n
		typ.Name = name
	case (t.isWord("timestamp") || t.isWord("time")) && p.peekAt(1).isPunct("("):
		// timestamp(3) [with time zone]: the precision comes first.
		p.advance()
		typ.Name = t.text
		typ.Modifiers = p.parseTypeModifiers()
		if zone := p.zoneSuffix(0); zone != "" {
			p.pos += 3
			typ.Name += zone
		}
	default:
		typ.Name = p.parseIdent()
		if p.acceptPunct(".") {
			typ.Schema = typ.Name
			typ.Name = p.parseIdent()
		}
	}
	if typ.Modifiers == nil && p.peek().isPunct("(") {
		typ.Modifiers = p.parseTypeModifiers()
	}
	if p.acceptPunct("[") {
		p.expectPunct("]")
		typ.Array = true
	}
	p.rejectIntervalFields(typ)
	return typ
}

// parseTypeModifiers parses "(n [, n ...])".
func (p *parser) parseTypeModifiers() []int {
	p.expectPunct("(")
	var mods []int
	for {
		t := p.peek()
		if t.kind != tokNumber {
			p.unexpected()
		}
		n, err := strconv.ParseInt(t.text, 10, 32)
		if err != nil {
			p.fail(t, CodeSyntaxError, fmt.Sprintf("invalid type modifier at or near %q", p.src[t.start:t.end]))
		}
		p.advance()
		mods = append(mods, int(n))
		if !p.acceptPunct(",") {
			break
		}
	}
	p.expectPunct(")")
	return mods
}
