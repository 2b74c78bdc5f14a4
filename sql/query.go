package sql

// Select is a SELECT query, as a statement or nested in another (a subquery, a
// view definition, SUBSCRIBE (...), INSERT ... SELECT, DECLARE, COPY (...)).
//
//	SELECT [DISTINCT] Items [FROM From] [WHERE Where] [GROUP BY GroupBy]
//	  [HAVING Having] [ORDER BY OrderBy] [LIMIT Limit] [OFFSET Offset] [AS OF AsOf]
//
// Optional parts are nil when absent; LIMIT ALL is a nil Limit.
type Select struct {
	Distinct bool
	Items    []SelectItem // never empty
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

// DerivedTable is a subquery in FROM: (SELECT ...) [AS alias].
type DerivedTable struct {
	Query *Select
	Alias string
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

func (s *Select) format(w *printer) {
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
	w.asOf(s.AsOf)
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
