package expr

import (
	"strings"
	"testing"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// compileSelect compiles the WHERE clause and select list of a SELECT
// over t into an MFP.
func compileSelect(t *testing.T, query string, params []Type) (*MFP, error) {
	t.Helper()
	st, err := sql.Parse(query)
	if err != nil {
		t.Fatalf("parse %q: %v", query, err)
	}
	sel := st.(*sql.Select)
	table := ""
	if tn, ok := sel.From[0].(*sql.TableName); ok {
		table = tn.Name.Name
		if tn.Alias != "" {
			table = tn.Alias
		}
	}
	return CompileMFP(testSchema, table, sel.Where, sel.Items, params)
}

func TestMFPSchema(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  string // name type nullable, ...
	}{
		{"SELECT a, b FROM t", "a integer true, b text true"},
		{"SELECT i8 AS id, upper(b) FROM t", "id bigint false, upper text true"},
		{"SELECT a + 1, 'x', NULL, true FROM t", "?column? integer true, ?column? text false, ?column? text true, bool boolean false"},
		{"SELECT a::text, 1::integer, 2::bigint, CAST(c AS float) FROM t", "a text true, int4 integer false, int8 bigint false, c double precision true"},
		{"SELECT CASE WHEN a > 1 THEN 1 ELSE 0 END, coalesce(a, 0), now(), interval '1s' FROM t", "case integer false, coalesce integer false, now timestamp with time zone false, interval text false"},
		{"SELECT mz_now(), t.i8 FROM t", "mz_now numeric false, i8 bigint false"},
		{"SELECT x.s FROM t AS x", "s smallint true"},
		{"SELECT t.* FROM t", "a integer true, b text true, c numeric true, f double precision true, ts timestamp with time zone true, d date true, j jsonb true, n integer true, i8 bigint false, s smallint true, bo boolean true"},
		{"SELECT n, *, n FROM t", "n integer true, a integer true, b text true, c numeric true, f double precision true, ts timestamp with time zone true, d date true, j jsonb true, n integer true, i8 bigint false, s smallint true, bo boolean true, n integer true"},
	} {
		m, err := compileSelect(t, tc.query, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		var parts []string
		for _, c := range m.OutputSchema().Columns {
			parts = append(parts, c.Name+" "+c.Type.String()+" "+map[bool]string{true: "true", false: "false"}[c.Nullable])
		}
		if got := strings.Join(parts, ", "); got != tc.want {
			t.Errorf("%s\n   got:  %s\n   want: %s", tc.query, got, tc.want)
		}
	}
}

func TestMFPApply(t *testing.T) {
	rows := []row.Row{
		testRow,
		{int32(20), "xyz", nil, nil, nil, nil, nil, nil, int64(1), nil, nil},
		{nil, "xa", nil, nil, nil, nil, nil, nil, int64(2), nil, nil},
		{int32(30), nil, nil, nil, nil, nil, nil, nil, int64(3), nil, nil},
	}
	m, err := compileSelect(t, "SELECT i8, a * 2 AS double, mz_now() AS ts, interval '90 minutes' AS iv FROM t WHERE a + 1 > 10 AND b LIKE 'x%'", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.UsesNow() != true {
		t.Error("UsesNow is false")
	}
	m = m.Bind(EvalContext{Now: testNow})
	var got []string
	for _, r := range rows {
		out, ok, err := m.Apply(r)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		if err := row.CheckRow(m.OutputSchema(), out); err != nil {
			t.Errorf("output %v does not fit the schema: %v", out, err)
		}
		got = append(got, strings.Join([]string{
			formatText(TypeInt8, out[0]), formatText(TypeInt4, out[1]), string(out[2].(row.Numeric)), out[3].(string),
		}, " "))
	}
	if want := []string{"1 40 1704067200000 01:30:00"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
	wantDef := "Filter (((a + 1) > 10) AND (b LIKE 'x%'))\nProject i8, (a * 2) AS double, mz_now() AS ts, '01:30:00'::interval AS iv"
	if m.String() != wantDef {
		t.Errorf("String() =\n%s\nwant\n%s", m, wantDef)
	}
}

func TestMFPIdentity(t *testing.T) {
	m, err := compileSelect(t, "SELECT * FROM t", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, ok, err := m.Apply(testRow)
	if err != nil || !ok || &out[0] != &testRow[0] {
		t.Errorf("SELECT * should pass rows through: %v %v %v", out, ok, err)
	}
	m, err = compileSelect(t, "SELECT * FROM t WHERE n IS NULL AND true", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := m.Apply(testRow); !ok {
		t.Error("WHERE n IS NULL filtered out a row with n NULL")
	}
}

func TestMFPWhereNull(t *testing.T) {
	m, err := compileSelect(t, "SELECT a FROM t WHERE n > 1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := m.Apply(testRow); ok || err != nil {
		t.Errorf("WHERE NULL: ok %v err %v, want false nil", ok, err)
	}
}

func TestMFPParams(t *testing.T) {
	m, err := compileSelect(t, "SELECT a, $2 FROM t WHERE a = $1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.ParamTypes(); len(got) != 2 || got[0] != TypeInt4 || got[1] != TypeText {
		t.Fatalf("ParamTypes = %v", got)
	}
	out, ok, err := m.Bind(EvalContext{Params: []row.Datum{"5", "p"}}).Apply(testRow)
	if err != nil || !ok || out[1] != "p" {
		t.Errorf("Apply = %v %v %v", out, ok, err)
	}
	if _, ok, _ := m.Bind(EvalContext{Params: []row.Datum{int32(6), "p"}}).Apply(testRow); ok {
		t.Error("a = 6 passed a = 5")
	}
}

func TestMFPErrors(t *testing.T) {
	for query, code := range map[string]string{
		"SELECT x FROM t":               CodeUndefinedColumn,
		"SELECT a FROM t WHERE a":       CodeDatatypeMismatch,
		"SELECT a FROM t WHERE a = 'x'": CodeInvalidTextRepresentation,
		"SELECT u.* FROM t":             CodeUndefinedTable,
		"SELECT count(*) FROM t":        CodeFeatureNotSupported,
		"SELECT t.a FROM t AS x":        CodeUndefinedTable,
		"SELECT a + b FROM t":           CodeUndefinedFunction,
	} {
		_, err := compileSelect(t, query, nil)
		if got := sqlState(err); got != code {
			t.Errorf("%s: %v (%s), want %s", query, err, got, code)
		}
	}
	// WHERE errors at evaluation are Apply's.
	m, err := compileSelect(t, "SELECT a FROM t WHERE a / (a - 5) > 0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Apply(testRow); sqlState(err) != CodeDivisionByZero {
		t.Errorf("Apply: %v, want division by zero", err)
	}
	m, err = compileSelect(t, "SELECT a FROM t WHERE false", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := m.Apply(testRow); ok {
		t.Error("WHERE false passed a row")
	}
}

// dataflowMFP is dataflow.MFP, which *MFP must implement (expr cannot
// import dataflow: the dependency points the other way).
type dataflowMFP interface {
	Apply(r row.Row) (row.Row, bool, error)
}

var _ dataflowMFP = (*MFP)(nil)
