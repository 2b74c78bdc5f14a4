package expr

import (
	"testing"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// benchRows vary a and b so that both sides of the AND are exercised.
func benchRows() []row.Row {
	rows := make([]row.Row, 1024)
	for i := range rows {
		r := append(row.Row(nil), testRow...)
		r[0] = int32(i % 20)
		if i%3 == 0 {
			r[1] = "xylophone"
		}
		rows[i] = r
	}
	return rows
}

// BenchmarkEval measures one evaluation of a typical filter per row.
func BenchmarkEval(b *testing.B) {
	x, err := Compile(parseExpr(b, "a + 1 > 10 AND b LIKE 'x%'"), NewScope(testSchema, "t"))
	if err != nil {
		b.Fatal(err)
	}
	rows := benchRows()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := x.Eval(nil, rows[i%len(rows)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMFPApply measures filter plus a three-column projection.
func BenchmarkMFPApply(b *testing.B) {
	st, err := sql.Parse("SELECT i8, a * 2, upper(b) FROM t WHERE a + 1 > 10 AND b LIKE 'x%'")
	if err != nil {
		b.Fatal(err)
	}
	sel := st.(*sql.Select)
	m, err := CompileMFP(testSchema, "t", sel.Where, sel.Items, nil)
	if err != nil {
		b.Fatal(err)
	}
	rows := benchRows()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := m.Apply(rows[i%len(rows)]); err != nil {
			b.Fatal(err)
		}
	}
}
