package sql

// Visitor's Visit is called by Walk for each node. If it returns a non-nil
// Visitor w, Walk visits the node's children with w and then calls
// w.Visit(nil).
type Visitor interface {
	Visit(n Node) (w Visitor)
}

// Walk traverses an AST in depth-first order, like go/ast.Walk. It visits
// statements, *Select, table expressions and expressions; the value types that
// hold them (SelectItem, OrderItem, When, AsOf, ...) are not visited
// themselves, but the expressions inside them are, in source order. Nil
// children are skipped.
//
// Option values and SET values are not visited: they are literals or bare
// words (a *ColumnRef "csv" in FORMAT csv names no column), read with
// Option.Bool, Option.Text and ValueText.
func Walk(v Visitor, n Node) {
	if n == nil {
		return
	}
	if v = v.Visit(n); v == nil {
		return
	}
	for _, c := range children(n, false) {
		Walk(v, c)
	}
	v.Visit(nil)
}

type inspector func(Node) bool

func (f inspector) Visit(n Node) Visitor {
	if f(n) {
		return f
	}
	return nil
}

// Inspect traverses an AST in depth-first order like Walk: it calls f(n) for
// each node, descends into n's children if f returns true, and calls f(nil)
// after the children.
func Inspect(n Node, f func(Node) bool) { Walk(inspector(f), n) }

// children returns n's child nodes in source order; with values, also the
// values of options and SET.
func children(n Node, values bool) []Node { return appendChildren(nil, n, values) }

// appendChildren appends children(n, values) to out.
func appendChildren(out []Node, n Node, values bool) []Node {
	expr := func(e Expr) {
		if e != nil {
			out = append(out, e)
		}
	}
	exprs := func(es []Expr) {
		for _, e := range es {
			expr(e)
		}
	}
	query := func(s *Select) {
		if s != nil {
			out = append(out, s)
		}
	}
	orderItems := func(items []OrderItem) {
		for _, o := range items {
			expr(o.Expr)
		}
	}
	asOf := func(a *AsOf) {
		if a != nil {
			expr(a.Expr)
		}
	}
	options := func(opts []Option) {
		if values {
			for _, o := range opts {
				expr(o.Value)
			}
		}
	}
	switch n := n.(type) {
	// Queries and FROM items.
	case *Select:
		for _, r := range n.Values {
			exprs(r)
		}
		for _, it := range n.Items {
			expr(it.Expr)
		}
		for _, t := range n.From {
			out = append(out, t)
		}
		expr(n.Where)
		exprs(n.GroupBy)
		expr(n.Having)
		orderItems(n.OrderBy)
		expr(n.Limit)
		expr(n.Offset)
		asOf(n.AsOf)
	case *DerivedTable:
		query(n.Query)
	case *TableFunc:
		if n.Func != nil {
			out = append(out, n.Func)
		}
	case *Join:
		out = append(out, n.Left, n.Right)
		expr(n.On)

	// Expressions.
	case *UnaryExpr:
		expr(n.X)
	case *BinaryExpr:
		expr(n.Left)
		expr(n.Right)
	case *IsExpr:
		expr(n.X)
	case *InExpr:
		expr(n.X)
		exprs(n.List)
		query(n.Query)
	case *BetweenExpr:
		expr(n.X)
		expr(n.Low)
		expr(n.High)
	case *CaseExpr:
		expr(n.Operand)
		for _, w := range n.Whens {
			expr(w.Cond)
			expr(w.Result)
		}
		expr(n.Else)
	case *Cast:
		expr(n.X)
	case *FuncCall:
		exprs(n.Args)
	case *Subquery:
		query(n.Query)
	case *Exists:
		query(n.Query)

	// Statements.
	case *Subscribe:
		query(n.Query)
		orderItems(n.WithinTimestampOrderBy)
		options(n.Options)
		asOf(n.AsOf)
		expr(n.UpTo)
	case *DeclareCursor:
		if n.Query != nil {
			out = append(out, n.Query)
		}
	case *Copy:
		if n.Query != nil {
			out = append(out, n.Query)
		}
		options(n.Options)
	case *CreateView:
		options(n.With)
		query(n.Query)
	case *Insert:
		for _, row := range n.Values {
			exprs(row)
		}
		query(n.Query)
	case *Update:
		for _, a := range n.Set {
			expr(a.Value)
		}
		expr(n.Where)
	case *Delete:
		expr(n.Where)
	case *Fetch:
		options(n.Options)
	case *CreateTable:
		options(n.With)
	case *CreateSource:
		options(n.Options)
		options(n.With)
	case *AlterObject:
		options(n.Options)
	case *CreateRole:
		options(n.Options)
	case *AlterRole:
		options(n.Options)
	case *SetVariable:
		if values {
			exprs(n.Values)
		}
	}
	return out
}

// height returns the number of levels of the tree under n, counting n. It
// uses an explicit stack, so it is safe on trees of any shape.
func height(n Node) int {
	type item struct {
		n     Node
		level int
	}
	max := 0
	stack := []item{{n, 1}}
	var kids []Node // reused: every statement's height is checked
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.level > max {
			max = it.level
		}
		kids = appendChildren(kids[:0], it.n, true)
		for _, c := range kids {
			stack = append(stack, item{c, it.level + 1})
		}
	}
	return max
}
