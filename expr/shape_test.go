package expr

import (
	"fmt"
	"testing"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// bindSelect compiles a SELECT over t and binds it to params.
func bindSelect(t *testing.T, query string, params ...row.Datum) *MFP {
	t.Helper()
	m, err := compileSelect(t, query, nil)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return m.Bind(EvalContext{Params: params})
}

// TestLeadingEquality: the equalities a filter is routed by, and the
// filters that are evaluated for every row instead (an error could come
// before the equality, or after it on a row whose column is NULL).
func TestLeadingEquality(t *testing.T) {
	for _, tc := range []struct {
		query  string
		params []row.Datum
		want   string // col values nulls, or "none"
	}{
		{"SELECT * FROM t WHERE a = 5", nil, "0 [5] false"},
		{"SELECT * FROM t WHERE 5 = a", nil, "0 [5] false"},
		{"SELECT b FROM t WHERE i8 = $1", []row.Datum{"42"}, "8 [42] false"},
		{"SELECT * FROM t WHERE b = $1", []row.Datum{"x"}, "1 [x] false"},
		{"SELECT * FROM t WHERE a IN (1, 2, NULL)", nil, "0 [1 2] false"},
		{"SELECT * FROM t WHERE a = 5 AND b > 'x'", nil, "0 [5] false"},
		{"SELECT * FROM t WHERE b > 'x' AND a = 5", nil, "0 [5] false"},
		{"SELECT a / 0 FROM t WHERE a = 5", nil, "0 [5] false"},
		// After the equality, an expression that can fail runs on rows
		// whose column is NULL (the conjunct is NULL, not false).
		{"SELECT * FROM t WHERE a = 5 AND 10 / n > 1", nil, "0 [5] true"},
		{"SELECT * FROM t WHERE bo = true", nil, "10 [true] false"},
		// Not indexed: a failing conjunct first, NOT IN, a range, a cast
		// column, a float, a NULL constant before a failing conjunct, OR.
		{"SELECT * FROM t WHERE 10 / n > 1 AND a = 5", nil, "none"},
		{"SELECT * FROM t WHERE a NOT IN (1, 2)", nil, "none"},
		{"SELECT * FROM t WHERE a > 5", nil, "none"},
		{"SELECT * FROM t WHERE a::int8 = i8", nil, "none"},
		{"SELECT * FROM t WHERE f = 1.5", nil, "none"},
		{"SELECT * FROM t WHERE a = $1 AND 10 / n > 1", []row.Datum{nil}, "none"},
		{"SELECT * FROM t WHERE a = 5 OR a = 6", nil, "none"},
		{"SELECT * FROM t", nil, "none"},
	} {
		eq, ok := LeadingEquality([]*MFP{bindSelect(t, tc.query, tc.params...)})
		got := "none"
		if ok {
			got = fmt.Sprintf("%d %v %v", eq.Col, eq.Values, eq.Nulls)
		}
		if got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.query, got, tc.want)
		}
	}
}

// TestLeadingEqualityThroughStages: an equality in a later stage (a query
// over a view) is found in the first stage's columns when the stages
// before only pick columns; a stage that computes can fail on any row.
func TestLeadingEqualityThroughStages(t *testing.T) {
	pick := bindSelect(t, "SELECT i8, a FROM t")
	compute := bindSelect(t, "SELECT i8, a + 1 AS a FROM t")
	schema := row.Schema{Columns: []row.Column{{Name: "i8", Type: row.TypeInt8}, {Name: "a", Type: row.TypeInt4, Nullable: true}}}
	outer, err := CompileMFP(schema, "v", parseWhere(t, "a = 3"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	outer = outer.Bind(EvalContext{})
	eq, ok := LeadingEquality([]*MFP{pick, outer})
	if got, want := fmt.Sprintf("%v %d %v", ok, eq.Col, eq.Values), "true 0 [3]"; got != want {
		t.Errorf("through a projection: got %s, want %s", got, want)
	}
	if _, ok := LeadingEquality([]*MFP{compute, outer}); ok {
		t.Errorf("through a computing stage: indexed, want not")
	}
}

// TestShapeKey: the key is equal for the same bound MFP, whatever the
// parameters' representation, and differs with a parameter's value or the
// expression.
func TestShapeKey(t *testing.T) {
	key := func(q string, params ...row.Datum) string { return bindSelect(t, q, params...).ShapeKey() }
	same := [][2]string{
		{key("SELECT b FROM t WHERE i8 = $1", "42"), key("SELECT b FROM t WHERE i8 = $1", int64(42))},
		{key("SELECT b FROM t WHERE a = 5"), key("SELECT b FROM t WHERE a = 5")},
	}
	for _, p := range same {
		if p[0] != p[1] {
			t.Errorf("keys differ:\n%s\n%s", p[0], p[1])
		}
	}
	differ := [][2]string{
		{key("SELECT b FROM t WHERE i8 = $1", "42"), key("SELECT b FROM t WHERE i8 = $1", "43")},
		{key("SELECT b FROM t WHERE a = 5"), key("SELECT b FROM t WHERE a = 6")},
		{key("SELECT b FROM t WHERE a = 5"), key("SELECT a FROM t WHERE a = 5")},
		{key("SELECT b FROM t WHERE b = $1", nil), key("SELECT b FROM t WHERE b = $1", "NULL")},
	}
	for _, p := range differ {
		if p[0] == p[1] {
			t.Errorf("keys equal: %s", p[0])
		}
	}
}

// parseWhere parses the WHERE clause of "SELECT * FROM t WHERE <src>".
func parseWhere(t testing.TB, src string) sql.Expr {
	t.Helper()
	st, err := sql.Parse("SELECT * FROM t WHERE " + src)
	if err != nil {
		t.Fatalf("parse %q: %v", src, err)
	}
	return st.(*sql.Select).Where
}
