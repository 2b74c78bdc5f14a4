package expr

import (
	"math"
	"testing"

	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// fuzzRows are the rows FuzzCompile evaluates on: the test row, one of
// NULLs, and one of extreme values.
var fuzzRows = []row.Row{
	testRow,
	{nil, nil, nil, nil, nil, nil, nil, nil, int64(0), nil, nil},
	{int32(math.MinInt32), "", row.Numeric("NaN"), math.Inf(-1), row.TimestampTZ(pgrepr.TimestampInfinity),
		row.Date(pgrepr.DateNegInfinity), row.JSON(`[]`), int32(math.MaxInt32), int64(math.MinInt64), int16(math.MaxInt16), false},
}

// FuzzCompile parses SELECT <src> FROM t, compiles the select list and
// WHERE clause, and evaluates them on a few rows. Nothing may panic, and
// every value must be of the expression's type.
func FuzzCompile(f *testing.F) {
	for _, tc := range evalCases {
		f.Add(tc.expr)
	}
	for _, src := range differentialCorpus {
		f.Add(src)
	}
	f.Fuzz(fuzzCompileOne)
}

func fuzzCompileOne(t *testing.T, src string) {
	{
		st, err := sql.Parse("SELECT " + src + " FROM t")
		if err != nil {
			return
		}
		sel, ok := st.(*sql.Select)
		if !ok {
			return
		}
		ctx := &EvalContext{Now: testNow, Params: []row.Datum{int32(1), "2", nil}}
		for _, it := range sel.Items {
			if _, star := it.Expr.(*sql.Star); star {
				continue
			}
			x, err := Compile(it.Expr, NewScope(testSchema, "t"))
			if err != nil {
				if sqlState(err) == "" {
					t.Errorf("%s: error without SQLSTATE: %v", src, err)
				}
				continue
			}
			_ = x.String()
			_ = x.Nullable()
			for _, r := range fuzzRows {
				v, err := x.Eval(ctx, r)
				if err != nil {
					if sqlState(err) == "" {
						t.Errorf("%s: error without SQLSTATE: %v", src, err)
					}
					continue
				}
				if v != nil && !datumHasType(x.Type(), v) {
					t.Errorf("%s: %#v is not a %s", src, v, x.Type())
				}
				if v != nil {
					_ = formatText(x.Type(), v)
				}
			}
		}
		m, err := CompileMFP(testSchema, "t", sel.Where, sel.Items, nil)
		if err != nil {
			return
		}
		_ = m.String()
		m = m.Bind(*ctx)
		for _, r := range fuzzRows {
			out, ok, err := m.Apply(r)
			if err != nil || !ok {
				continue
			}
			schema := m.OutputSchema()
			for i, c := range schema.Columns {
				if !row.CheckDatum(c.Type, out[i]) {
					t.Errorf("%s: column %s: %#v is not a %s", src, c.Name, out[i], c.Type)
				}
				if out[i] == nil && !c.Nullable {
					t.Errorf("%s: column %s is NULL but not nullable", src, c.Name)
				}
			}
		}
	}
}
