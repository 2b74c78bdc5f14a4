package expr

import (
	"errors"
	"testing"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// testSchema is the relation t the expression tests evaluate over.
var testSchema = row.Schema{Columns: []row.Column{
	{Name: "a", Type: row.TypeInt4, Nullable: true},
	{Name: "b", Type: row.TypeText, Nullable: true},
	{Name: "c", Type: row.TypeNumeric, Nullable: true},
	{Name: "f", Type: row.TypeFloat8, Nullable: true},
	{Name: "ts", Type: row.TypeTimestampTZ, Nullable: true},
	{Name: "d", Type: row.TypeDate, Nullable: true},
	{Name: "j", Type: row.TypeJSONB, Nullable: true},
	{Name: "n", Type: row.TypeInt4, Nullable: true},
	{Name: "i8", Type: row.TypeInt8, Nullable: false},
	{Name: "s", Type: row.TypeInt2, Nullable: true},
	{Name: "bo", Type: row.TypeBool, Nullable: true},
}}

// testRow is a = 5, b = 'hello', c = 1.5, f = 2.5, ts = 2024-03-15
// 12:34:56.789+00, d = 2024-02-29, j = {"k": [1, "x", null], "n": 2},
// n = NULL, i8 = 9000000000, s = 7, bo = true.
var testRow = row.Row{
	int32(5), "hello", row.Numeric("1.5"), 2.5,
	row.TimestampTZ(1710506096789000), row.Date(19782),
	row.JSON(`{"k": [1, "x", null], "n": 2}`), nil, int64(9000000000), int16(7), true,
}

// testNow is the query timestamp of the tests: 2024-01-01 00:00:00 UTC.
const testNow = 1704067200000

// parseExpr parses the select item of "SELECT <src> FROM t".
func parseExpr(t testing.TB, src string) sql.Expr {
	t.Helper()
	st, err := sql.Parse("SELECT " + src + " FROM t")
	if err != nil {
		t.Fatalf("parse %q: %v", src, err)
	}
	return st.(*sql.Select).Items[0].Expr
}

// evalText compiles src over testSchema, evaluates it on testRow and
// returns its text output ("NULL" for NULL), or "ERROR <sqlstate>: msg".
func evalText(t testing.TB, src string, params ...row.Datum) string {
	t.Helper()
	st, err := sql.Parse("SELECT " + src + " FROM t")
	if err != nil {
		return "PARSE " + err.Error()
	}
	e := st.(*sql.Select).Items[0].Expr
	x, err := Compile(e, NewScope(testSchema, "t"))
	if err != nil {
		return errText(err)
	}
	v, err := x.Eval(&EvalContext{Now: testNow, Params: params}, testRow)
	if err != nil {
		return errText(err)
	}
	if v == nil {
		return "NULL"
	}
	if !datumHasType(x.Type(), v) {
		t.Errorf("%s: value %#v is not of type %s", src, v, x.Type())
	}
	return formatText(x.Type(), v)
}

func errText(err error) string {
	var e interface{ SQLState() string }
	if errors.As(err, &e) {
		return "ERROR " + e.SQLState() + ": " + err.Error()
	}
	return "ERROR: " + err.Error()
}
