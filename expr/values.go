package expr

import (
	"fmt"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// Values is a compiled VALUES list: constant rows, typed as PostgreSQL
// types them (transformValuesClause). Each column takes the common type of
// its values — a string literal, NULL or untyped parameter adapts to the
// others, all unknown is text, and types that do not match are 42804
// "VALUES types integer and text cannot be matched". Columns are named
// column1, column2, ... . A value may call now() or use parameters, but
// not name a column.
type Values struct {
	rows    [][]Expr
	types   []Type
	schema  row.Schema
	params  []Type
	usesNow bool
}

// CompileValues compiles rows, one slice of expressions per row. params
// are the parameter types the client declared (nil for none); undeclared
// ones are inferred, see ParamTypes.
func CompileValues(rows [][]sql.Expr, params []Type) (*Values, error) {
	if len(rows) == 0 {
		return nil, errf(CodeSyntaxError, "VALUES must have at least one row")
	}
	scope := NewScope(row.Schema{}, "")
	scope.SetParamTypes(params)
	c := &compiler{scope: scope}
	width := len(rows[0])
	v := &Values{rows: make([][]Expr, len(rows))}
	for i, r := range rows {
		if len(r) != width {
			return nil, errf(CodeSyntaxError, "VALUES lists must all be the same length")
		}
		xs, err := c.exprs(r)
		if err != nil {
			return nil, err
		}
		v.rows[i] = xs
	}
	col := make([]Expr, len(rows))
	for j := range width {
		for i := range rows {
			col[i] = v.rows[i][j]
		}
		t, err := c.common(col, "VALUES")
		if err != nil {
			return nil, err
		}
		nullable := false
		for i, x := range col {
			v.rows[i][j] = x
			nullable = nullable || x.Nullable()
		}
		v.types = append(v.types, t)
		v.schema.Columns = append(v.schema.Columns, row.Column{Name: fmt.Sprintf("column%d", j+1), Type: t.Rep(), Nullable: nullable})
	}
	v.params = scope.ParamTypes()
	v.usesNow = scope.UsesNow()
	return v, nil
}

// OutputSchema is the schema of the rows Eval returns.
func (v *Values) OutputSchema() row.Schema {
	return row.Schema{Columns: append([]row.Column(nil), v.schema.Columns...)}
}

// ParamTypes returns the types of the parameters the rows reference.
func (v *Values) ParamTypes() []Type { return append([]Type(nil), v.params...) }

// UsesNow reports whether a value reads the query timestamp.
func (v *Values) UsesNow() bool { return v.usesNow }

// Eval evaluates the rows with ctx (parameter values and now()), in order,
// each value in its column's representation (Type.Rep).
func (v *Values) Eval(ctx *EvalContext) ([]row.Row, error) {
	out := make([]row.Row, len(v.rows))
	for i, xs := range v.rows {
		r := make(row.Row, len(xs))
		for j, x := range xs {
			d, err := x.Eval(ctx, nil)
			if err != nil {
				return nil, err
			}
			r[j] = ToRep(v.types[j], d)
		}
		out[i] = r
	}
	return out, nil
}
