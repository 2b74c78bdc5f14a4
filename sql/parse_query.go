package sql

// isQuery reports whether a query starts here: SELECT or VALUES.
func (p *parser) isQuery() bool { return p.isWords("select") || p.isWords("values") }

// parseQuery parses a SELECT query or a VALUES list.
func (p *parser) parseQuery() *Select {
	if p.isWords("values") {
		return p.parseValues()
	}
	return p.parseSelect()
}

// parseValues parses VALUES (...), (...) with an optional ORDER BY, LIMIT
// and OFFSET.
func (p *parser) parseValues() *Select {
	p.enter()
	defer p.leave()
	p.level++ // the Select
	p.expectWords("values")
	s := &Select{}
	for {
		start := p.peek()
		p.expectPunct("(")
		r := p.parseExprList()
		p.expectPunct(")")
		if len(s.Values) > 0 && len(r) != len(s.Values[0]) {
			p.fail(start, CodeSyntaxError, "VALUES lists must all be the same length")
		}
		s.Values = append(s.Values, r)
		if !p.acceptPunct(",") {
			break
		}
	}
	p.parseQueryTail(s)
	p.level--
	return s
}

// parseSelect parses a SELECT query starting at the SELECT keyword.
func (p *parser) parseSelect() *Select {
	p.enter()
	defer p.leave()
	p.level++ // the Select
	p.expectWords("select")
	s := &Select{}
	switch {
	case p.isWords("distinct", "on"):
		p.unsupported(p.peek(), "SELECT DISTINCT ON")
	case p.acceptWords("distinct"):
		s.Distinct = true
	default:
		p.acceptWords("all")
	}
	s.Items = []SelectItem{p.parseSelectItem()}
	for p.acceptPunct(",") {
		s.Items = append(s.Items, p.parseSelectItem())
	}
	p.unsupportedIf("SELECT INTO", "into")
	if p.acceptWords("from") {
		s.From = []TableExpr{p.parseTableExpr()}
		for p.acceptPunct(",") {
			s.From = append(s.From, p.parseTableExpr())
		}
	}
	if p.acceptWords("where") {
		s.Where = p.parseExpr()
	}
	if p.acceptWords("group", "by") {
		s.GroupBy = p.parseExprList()
	}
	if p.acceptWords("having") {
		s.Having = p.parseExpr()
	}
	p.unsupportedIf("WINDOW", "window")
	p.parseQueryTail(s)
	s.AsOf = p.parseAsOf()
	p.level--
	return s
}

// parseQueryTail parses what SELECT and VALUES share after their body:
// ORDER BY, LIMIT and OFFSET, recognizing the set operations and row
// locking clauses shardtail does not support.
func (p *parser) parseQueryTail(s *Select) {
	for _, op := range []string{"union", "intersect", "except"} {
		p.unsupportedIf("set operations (UNION, INTERSECT, EXCEPT)", op)
	}
	if p.acceptWords("order", "by") {
		s.OrderBy = p.parseOrderItems()
	}
	// LIMIT and OFFSET may come in either order, as in Postgres. LIMIT ALL
	// is the same as no LIMIT.
	limitSeen := false
	for i := 0; i < 2; i++ {
		switch {
		case !limitSeen && p.acceptWords("limit"):
			limitSeen = true
			if !p.acceptWords("all") {
				s.Limit = p.parseExpr()
			}
		case s.Offset == nil && p.acceptWords("offset"):
			s.Offset = p.parseExpr()
			p.acceptOneOf("row", "rows")
		}
	}
	p.unsupportedIf("FETCH FIRST", "fetch")
	p.unsupportedIf("FOR UPDATE/SHARE", "for")
}

// parseAsOf parses an optional AS OF [AT LEAST] expr.
func (p *parser) parseAsOf() *AsOf {
	if !p.acceptWords("as", "of") {
		return nil
	}
	a := &AsOf{AtLeast: p.acceptWords("at", "least")}
	a.Expr = p.parseExpr()
	return a
}

// isAsOfClause reports whether AS OF after a select item starts the AS OF
// clause rather than an alias named "of": it does when an expression follows.
func (p *parser) isAsOfClause() bool {
	if !p.isWords("as", "of") {
		return false
	}
	next := p.peekAt(2)
	switch {
	case next.kind == tokEOF, next.isPunct(";"), next.isPunct(","), next.isPunct(")"):
		return false
	case next.kind == tokIdent && !next.quoted && reservedWords[next.text]:
		// FROM, WHERE, ... end the item; NOT, CASE, CAST, ... start an expression.
		return exprStartWords[next.text]
	}
	return true
}

// exprStartWords are the reserved words that can start an expression.
var exprStartWords = setOf(
	"not", "case", "cast", "null", "true", "false", "current_date", "current_time",
	"current_timestamp", "localtime", "localtimestamp", "current_user", "current_role",
	"session_user", "user", "current_catalog", "current_schema",
)

// parseSelectItem parses expr [[AS] alias], *, or qualifier.*.
func (p *parser) parseSelectItem() SelectItem {
	if p.peek().isOp("*") {
		p.advance()
		return SelectItem{Expr: &Star{}}
	}
	// qualifier.* : look ahead over name.name... for a final .*
	// (Looking no further than a four-part qualifier, which is already
	// too long: a chain of any length is not lexed to find its end.)
	k := 0
	for k <= 6 && p.peekAt(k).kind == tokIdent && p.peekAt(k+1).isPunct(".") {
		k += 2
	}
	if k > 0 && p.peekAt(k).isOp("*") {
		start := p.peek()
		var parts []string
		for i := 0; i < k; i += 2 {
			if i == 0 {
				parts = append(parts, p.parseIdent())
			} else {
				parts = append(parts, p.advance().text)
			}
			p.advance() // "."
		}
		p.advance() // "*"
		table, ok := objectName(parts, start.pos)
		if !ok {
			p.fail(start, CodeSyntaxError, "improper qualified name (too many dotted names)")
		}
		return SelectItem{Expr: &Star{Table: table}}
	}
	item := SelectItem{Expr: p.parseExpr()}
	switch {
	case p.isAsOfClause():
		// SELECT 1 AS OF 5: the query's AS OF, not an alias "of".
	case p.acceptWords("as"):
		item.Alias = p.parseLabel()
	case p.isIdent():
		item.Alias = p.advance().text
	}
	return item
}

func (p *parser) parseOrderItems() []OrderItem {
	items := []OrderItem{p.parseOrderItem()}
	for p.acceptPunct(",") {
		items = append(items, p.parseOrderItem())
	}
	return items
}

func (p *parser) parseOrderItem() OrderItem {
	o := OrderItem{Expr: p.parseExpr()}
	switch p.acceptOneOf("asc", "desc") {
	case "desc":
		o.Desc = true
	case "":
		p.unsupportedIf("ORDER BY ... USING", "using")
	}
	if p.acceptWords("nulls") {
		switch p.acceptOneOf("first", "last") {
		case "first":
			o.Nulls = NullsFirst
		case "last":
			o.Nulls = NullsLast
		default:
			p.unexpected()
		}
	}
	return o
}

// parseTableExpr parses a FROM item and the joins that follow it. Like
// parseExprPrec, it leaves the height of what it returns (a lower bound)
// in p.h, and checks the height of the join chain at every join.
func (p *parser) parseTableExpr() TableExpr {
	p.enter()
	defer p.leave()
	p.h = 0
	left := p.parseTableFactor()
	h := max(p.h, 1)
	for {
		t := p.peek()
		kind := JoinInner
		switch {
		case p.acceptWords("cross", "join"):
			kind = JoinCross
		case p.acceptWords("join"), p.acceptWords("inner", "join"):
		case p.acceptWords("left"):
			kind = JoinLeft
		case p.acceptWords("right"):
			kind = JoinRight
		case p.acceptWords("full"):
			kind = JoinFull
		case p.isWords("natural"):
			p.unsupported(t, "NATURAL JOIN")
		default:
			p.checkHeight(h)
			p.h = h
			return left
		}
		// The join becomes the root of left and the parent of what
		// follows; parseJoin leaves the height of its last part in p.h.
		left = chainLink(p, &h, func() TableExpr { return p.parseJoin(kind, left) })
	}
}

// parseJoin parses what follows the JOIN keyword of a join of kind.
func (p *parser) parseJoin(kind JoinKind, left TableExpr) TableExpr {
	if kind == JoinCross {
		return &Join{Kind: JoinCross, Left: left, Right: p.parseTableFactor()}
	}
	if kind != JoinInner {
		p.acceptWords("outer")
		p.expectWords("join")
	}
	j := &Join{Kind: kind, Left: left, Right: p.parseTableFactor()}
	switch {
	case p.acceptWords("on"):
		j.On = p.parseExpr()
	case p.acceptWords("using"):
		j.Using = p.parseParenIdentList()
	default:
		p.unexpected()
	}
	return j
}

// parseTableFactor parses one FROM item without the joins that follow it.
func (p *parser) parseTableFactor() TableExpr {
	p.enter()
	defer p.leave()
	t := p.peek()
	if t.isWord("lateral") {
		p.unsupported(t, "LATERAL")
	}
	if p.acceptPunct("(") {
		if p.isQuery() {
			p.level++
			p.h = 0
			d := &DerivedTable{Query: p.parseQuery()}
			p.level--
			p.h += 2 // the DerivedTable and the Select above some descendant
			p.expectPunct(")")
			d.Alias, d.Columns = p.parseTableAlias(true)
			return d
		}
		// A parenthesized join: (a JOIN b ON ...).
		te := p.parseTableExpr()
		p.expectPunct(")")
		if p.isWords("as") && !p.isWords("as", "of") || p.isIdent() {
			p.unsupported(p.peek(), "aliases for parenthesized joins")
		}
		return te
	}
	name := p.parseObjectName()
	if p.peek().isPunct("(") {
		p.level++
		call := p.parseCall(name).(*FuncCall)
		p.level--
		p.h++ // p.h is the call's height
		alias, _ := p.parseTableAlias(false)
		return &TableFunc{Func: call, Alias: alias}
	}
	alias, _ := p.parseTableAlias(false)
	p.h = 1
	return &TableName{Name: name, Alias: alias}
}

// parseTableAlias parses an optional [AS] alias after a FROM item, and
// with columns its column list: AS x(a, b). AS OF is not an alias but the
// query's AS OF clause.
func (p *parser) parseTableAlias(columns bool) (string, []string) {
	var alias string
	switch {
	case p.isWords("as", "of"):
		return "", nil
	case p.acceptWords("as"):
		alias = p.parseIdent()
	case p.isIdent():
		alias = p.advance().text
	default:
		return "", nil
	}
	if !p.peek().isPunct("(") {
		return alias, nil
	}
	if !columns {
		p.unsupported(p.peek(), "column aliases in FROM")
	}
	return alias, p.parseParenIdentList()
}
