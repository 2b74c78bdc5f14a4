package expr

import (
	"fmt"
	"strings"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// MFP is a compiled map/filter/project over the rows of one relation: the
// WHERE clause and select list of SELECT ... FROM t WHERE ..., as views,
// materialized views and SUBSCRIBE (SELECT ...) apply it to every update.
// It implements dataflow.MFP. Apply is a pure function of the row and the
// bound EvalContext, and safe for concurrent use.
type MFP struct {
	filter   Expr // nil: every row passes
	items    []Expr
	schema   row.Schema
	params   []Type
	usesNow  bool
	identity bool // no filter, and the output is the input row
	ctx      *EvalContext
}

// CompileMFP compiles WHERE where (nil for none) and the select list items
// over rows of input, whose columns may be qualified by table (the
// relation's name or alias). params are the parameter types the client
// declared (nil for none); undeclared ones are inferred, see ParamTypes.
// The MFP evaluates parameters and now() through the EvalContext given to
// Bind.
func CompileMFP(input row.Schema, table string, where sql.Expr, items []sql.SelectItem, params []Type) (*MFP, error) {
	scope := NewScope(input, table)
	scope.SetParamTypes(params)
	c := &compiler{scope: scope}
	m := &MFP{}
	if where != nil {
		x, err := c.expr(where)
		if err != nil {
			return nil, err
		}
		if m.filter, err = c.toBool(x, "WHERE"); err != nil {
			return nil, err
		}
		if k, ok := m.filter.(*constant); ok && k.d == true {
			m.filter = nil
		}
	}
	if items == nil {
		items = []sql.SelectItem{{Expr: &sql.Star{}}}
	}
	for _, it := range items {
		if st, ok := it.Expr.(*sql.Star); ok {
			cols, err := scope.star(st.Table)
			if err != nil {
				return nil, err
			}
			for _, rc := range cols {
				m.items = append(m.items, &column{index: rc.index, name: rc.col.Name, typ: FromRow(rc.col.Type), nullable: rc.col.Nullable})
				m.schema.Columns = append(m.schema.Columns, rc.col)
			}
			continue
		}
		x, err := c.expr(it.Expr)
		if err != nil {
			return nil, err
		}
		if x, err = c.resolveUnknown(x); err != nil {
			return nil, err
		}
		name := it.Alias
		if name == "" {
			name, _ = columnName(it.Expr)
		}
		m.items = append(m.items, x)
		m.schema.Columns = append(m.schema.Columns, row.Column{Name: name, Type: x.Type().Rep(), Nullable: x.Nullable(), Mod: outputMod(it.Expr, x, input)})
	}
	m.params = scope.ParamTypes()
	m.usesNow = scope.UsesNow()
	m.identity = m.filter == nil && len(m.items) == len(input.Columns)
	for i, x := range m.items {
		if col, ok := x.(*column); !ok || col.index != i {
			m.identity = false
		}
	}
	return m, nil
}

// outputMod is the type modifier of the output column x compiled from e,
// which RowDescription reports, as Postgres does: a column's (SELECT v
// FROM t, v varchar(3)) or a cast's (SELECT n::numeric(5, 2)); none for
// other expressions, whose values the modifier does not bound.
func outputMod(e sql.Expr, x Expr, input row.Schema) row.TypeMod {
	if c, ok := x.(*column); ok && c.index < len(input.Columns) && FromRow(input.Columns[c.index].Type) == c.typ {
		return input.Columns[c.index].Mod
	}
	if c, ok := e.(*sql.Cast); ok {
		if ref, err := resolveType(c.Type); err == nil && ref.typ == x.Type() && ref.typ.IsRow() {
			return ref.mod
		}
	}
	return row.TypeMod{}
}

// columnName is the name Postgres gives an output column without an alias
// (FigureColname): a column's name, a function's name, a cast's operand's
// name or else its type's name, "case", "bool" for a boolean literal, and
// "?column?" otherwise. strength ranks how definite the name is.
func columnName(e sql.Expr) (name string, strength int) {
	switch e := e.(type) {
	case *sql.ColumnRef:
		return e.Column, 2
	case *sql.FuncCall:
		return e.Name.Name, 2
	case *sql.Cast:
		if n, s := columnName(e.X); s == 2 {
			return n, s
		}
		return typeColName(e.Type), 1
	case *sql.TypedLit:
		return typeColName(e.Type), 1
	case *sql.CaseExpr:
		return "case", 1
	case *sql.BoolLit:
		return "bool", 1
	}
	return "?column?", 0
}

func typeColName(tn sql.TypeName) string {
	if n, ok := internalNames[tn.Name]; ok {
		return n
	}
	return tn.Name
}

// OutputSchema is the schema of the rows Apply returns. Names may repeat
// (SELECT a, a), which a view must reject; pseudo-types appear as their
// representation (mz_timestamp as numeric, interval as text).
func (m *MFP) OutputSchema() row.Schema {
	return row.Schema{Columns: append([]row.Column(nil), m.schema.Columns...)}
}

// ParamTypes returns the types of the parameters the MFP references.
func (m *MFP) ParamTypes() []Type { return append([]Type(nil), m.params...) }

// UsesNow reports whether the MFP reads the query timestamp, which a
// materialized view must not.
func (m *MFP) UsesNow() bool { return m.usesNow }

// Bind returns a copy of m that evaluates with ctx: the bound parameter
// values and the query timestamp.
func (m *MFP) Bind(ctx EvalContext) *MFP {
	c := *m
	c.ctx = &ctx
	return &c
}

// Apply filters r by the WHERE clause (NULL counts as false) and, if it
// passes, maps it to the output row. A select list that is exactly the
// input's columns returns r itself.
func (m *MFP) Apply(r row.Row) (row.Row, bool, error) {
	if m.filter != nil {
		v, err := m.filter.Eval(m.ctx, r)
		if err != nil {
			return nil, false, err
		}
		if v != true {
			return nil, false, nil
		}
	}
	if m.identity {
		return r, true, nil
	}
	out := make(row.Row, len(m.items))
	for i, x := range m.items {
		v, err := x.Eval(m.ctx, r)
		if err != nil {
			return nil, false, err
		}
		out[i] = ToRep(x.Type(), v)
	}
	return out, true, nil
}

// String renders the MFP for EXPLAIN-style debugging: the filter, then the
// output columns.
func (m *MFP) String() string {
	var b strings.Builder
	if m.filter != nil {
		fmt.Fprintf(&b, "Filter %s\n", m.filter)
	}
	b.WriteString("Project ")
	for i, x := range m.items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(x.String())
		if name := m.schema.Columns[i].Name; name != x.String() {
			b.WriteString(" AS " + sql.QuoteIdent(name))
		}
	}
	return b.String()
}
