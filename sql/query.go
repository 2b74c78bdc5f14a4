package sql

// Select is a SELECT query, as a statement or nested in another (a subquery, a
// view definition, SUBSCRIBE (...), INSERT ... SELECT, DECLARE, COPY (...)).
//
//	SELECT [DISTINCT] Items [FROM From] [WHERE Where] [GROUP BY GroupBy]
//	  [HAVING Having] [ORDER BY OrderBy] [LIMIT Limit] [OFFSET Offset] [AS OF AsOf]
//
// Optional parts are nil when absent; LIMIT ALL is a nil Limit.
//
// A VALUES list is a Select too, so that it goes wherever a query goes (a
// statement, a view, FROM (VALUES ...), DECLARE, COPY, SUBSCRIBE):
//
//	VALUES (Values[0]...), (Values[1]...) [ORDER BY OrderBy] [LIMIT Limit] [OFFSET Offset]
//
// Values holds one slice per row, all of one length; Distinct, Items, From,
// Where, GroupBy, Having and AsOf are empty. Its columns are named
// column1, column2, ... as in PostgreSQL.
type Select struct {
	Values   [][]Expr // nil unless a VALUES list
	Distinct bool
	Items    []SelectItem // never empty unless Values is set
	From     []TableExpr  // comma-separated FROM items; nil without FROM
	Where    Expr
	GroupBy  []Expr
	Having   Expr
	OrderBy  []OrderItem
	Limit    Expr
	Offset   Expr
	AsOf     *AsOf
}

// SelectItem is one output column: Expr [AS Alias]. Expr is a *Star for * and
// t.*, which never have an alias.
type SelectItem struct {
	Expr  Expr
	Alias string // "" when not written
}

// NullsOrder is the NULLS FIRST/LAST option of an ORDER BY item.
type NullsOrder uint8

// The NULLS orderings. NullsDefault means NULLS LAST for ASC and NULLS FIRST
// for DESC, as in Postgres.
const (
	NullsDefault NullsOrder = iota
	NullsFirst
	NullsLast
)

// OrderItem is one ORDER BY item: Expr [ASC|DESC] [NULLS FIRST|LAST]. ASC is
// the default and is not recorded.
type OrderItem struct {
	Expr  Expr
	Desc  bool
	Nulls NullsOrder
}

// AsOf is the AS OF [AT LEAST] clause of SELECT and SUBSCRIBE. Expr is a
// constant expression castable to mz_timestamp.
type AsOf struct {
	AtLeast bool
	Expr    Expr
}

// TableName is a named relation in FROM: name [AS alias].
type TableName struct {
	Name  ObjectName
	Alias string
}

// DerivedTable is a subquery in FROM: (SELECT ...) [AS alias [(columns)]],
// or (VALUES ...) AS x(a, b). Columns renames the query's leading output
// columns; nil when not written.
type DerivedTable struct {
	Query   *Select
	Alias   string
	Columns []string
}

// TableFunc is a set-returning function in FROM: generate_series(1, 3) [AS alias].
type TableFunc struct {
	Func  *FuncCall
	Alias string
}

// JoinKind is the kind of a Join.
type JoinKind uint8

// The join kinds. OUTER is implied by LEFT, RIGHT and FULL.
const (
	JoinInner JoinKind = iota // [INNER] JOIN
	JoinLeft                  // LEFT [OUTER] JOIN
	JoinRight                 // RIGHT [OUTER] JOIN
	JoinFull                  // FULL [OUTER] JOIN
	JoinCross                 // CROSS JOIN: no On, no Using
)

// String returns the join's keywords.
func (k JoinKind) String() string {
	switch k {
	case JoinLeft:
		return "LEFT JOIN"
	case JoinRight:
		return "RIGHT JOIN"
	case JoinFull:
		return "FULL JOIN"
	case JoinCross:
		return "CROSS JOIN"
	}
	return "JOIN"
}

// Join is Left JOIN Right ON On, or USING (Using). Joins associate to the left:
// a JOIN b JOIN c is Join{Join{a, b}, c}.
type Join struct {
	Kind        JoinKind
	Left, Right TableExpr
	On          Expr     // nil for CROSS JOIN and USING
	Using       []string // nil unless USING (...)
}

func (*Select) statementNode()       {}
func (*TableName) tableExprNode()    {}
func (*DerivedTable) tableExprNode() {}
func (*TableFunc) tableExprNode()    {}
func (*Join) tableExprNode()         {}

func (s *Select) String() string       { return render(s) }
func (t *TableName) String() string    { return render(t) }
func (t *DerivedTable) String() string { return render(t) }
func (t *TableFunc) String() string    { return render(t) }
func (t *Join) String() string         { return render(t) }

// IsValues reports whether s is a VALUES list.
func (s *Select) IsValues() bool { return s.Values != nil }

func (s *Select) format(w *printer) {
	if s.IsValues() {
		w.WriteString("VALUES ")
		for i, r := range s.Values {
			if i > 0 {
				w.WriteString(", ")
			}
			w.WriteByte('(')
			w.exprList(r)
			w.WriteByte(')')
		}
		s.formatTail(w)
		return
	}
	w.WriteString("SELECT ")
	if s.Distinct {
		w.WriteString("DISTINCT ")
	}
	for i, it := range s.Items {
		if i > 0 {
			w.WriteString(", ")
		}
		it.Expr.format(w)
		if it.Alias != "" {
			w.WriteString(" AS ")
			w.ident(it.Alias)
		}
	}
	if s.From != nil {
		w.WriteString(" FROM ")
		for i, t := range s.From {
			if i > 0 {
				w.WriteString(", ")
			}
			t.format(w)
		}
	}
	if s.Where != nil {
		w.WriteString(" WHERE ")
		s.Where.format(w)
	}
	if s.GroupBy != nil {
		w.WriteString(" GROUP BY ")
		w.exprList(s.GroupBy)
	}
	if s.Having != nil {
		w.WriteString(" HAVING ")
		s.Having.format(w)
	}
	s.formatTail(w)
	w.asOf(s.AsOf)
}

// formatTail prints ORDER BY, LIMIT and OFFSET, which SELECT and VALUES
// share.
func (s *Select) formatTail(w *printer) {
	if s.OrderBy != nil {
		w.WriteString(" ORDER BY ")
		w.orderItems(s.OrderBy)
	}
	if s.Limit != nil {
		w.WriteString(" LIMIT ")
		s.Limit.format(w)
	}
	if s.Offset != nil {
		w.WriteString(" OFFSET ")
		s.Offset.format(w)
	}
}

func (w *printer) orderItems(items []OrderItem) {
	for i, o := range items {
		if i > 0 {
			w.WriteString(", ")
		}
		o.Expr.format(w)
		if o.Desc {
			w.WriteString(" DESC")
		}
		switch o.Nulls {
		case NullsFirst:
			w.WriteString(" NULLS FIRST")
		case NullsLast:
			w.WriteString(" NULLS LAST")
		}
	}
}

func (w *printer) asOf(a *AsOf) {
	if a == nil {
		return
	}
	w.WriteString(" AS OF ")
	if a.AtLeast {
		w.WriteString("AT LEAST ")
	}
	a.Expr.format(w)
}

func (w *printer) alias(a string) {
	if a != "" {
		w.WriteString(" AS ")
		w.ident(a)
	}
}

func (t *TableName) format(w *printer) {
	t.Name.format(w)
	w.alias(t.Alias)
}

func (t *DerivedTable) format(w *printer) {
	w.WriteByte('(')
	t.Query.format(w)
	w.WriteByte(')')
	w.alias(t.Alias)
	if t.Columns != nil {
		w.WriteByte(' ')
		w.parenIdentList(t.Columns)
	}
}

func (t *TableFunc) format(w *printer) {
	t.Func.format(w)
	w.alias(t.Alias)
}

func (t *Join) format(w *printer) {
	t.Left.format(w)
	w.WriteString(" " + t.Kind.String() + " ")
	// Joins nest to the left, so a join on the right needs parentheses.
	if _, ok := t.Right.(*Join); ok {
		w.WriteByte('(')
		t.Right.format(w)
		w.WriteByte(')')
	} else {
		t.Right.format(w)
	}
	switch {
	case t.On != nil:
		w.WriteString(" ON ")
		t.On.format(w)
	case t.Using != nil:
		w.WriteString(" USING ")
		w.parenIdentList(t.Using)
	}
}
