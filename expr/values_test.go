package expr

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// valuesText compiles and evaluates a VALUES statement and renders its
// columns as "name type [null]" and its rows as "v1|v2" (NULL for NULL),
// or "ERROR <sqlstate>: msg".
func valuesText(t *testing.T, src string, params ...row.Datum) (cols, rows string) {
	t.Helper()
	st, err := sql.Parse(src)
	if err != nil {
		t.Fatalf("parse %q: %v", src, err)
	}
	v, err := CompileValues(st.(*sql.Select).Values, nil)
	if err != nil {
		return errText(err), ""
	}
	var cs []string
	for _, c := range v.OutputSchema().Columns {
		s := c.Name + " " + c.Type.String()
		if c.Nullable {
			s += " null"
		}
		cs = append(cs, s)
	}
	out, err := v.Eval(&EvalContext{Now: testNow, Params: params})
	if err != nil {
		return strings.Join(cs, ", "), errText(err)
	}
	var rs []string
	for _, r := range out {
		var ds []string
		for _, d := range r {
			if d == nil {
				ds = append(ds, "NULL")
			} else {
				ds = append(ds, fmt.Sprint(d))
			}
		}
		rs = append(rs, strings.Join(ds, "|"))
	}
	return strings.Join(cs, ", "), strings.Join(rs, " ")
}

func TestValues(t *testing.T) {
	for _, tc := range []struct {
		src, cols, rows string
	}{
		{"VALUES ('a', 'b'), ('c', 'd')", "column1 text, column2 text", "a|b c|d"},
		{"VALUES (1), (2)", "column1 integer", "1 2"},
		// A literal or NULL takes the other rows' type; integers widen.
		{"VALUES (1, NULL), ('2', 'x')", "column1 integer, column2 text null", "1|NULL 2|x"},
		{"VALUES (1), (2.5), (9000000000)", "column1 numeric", "1 2.5 9000000000"},
		{"VALUES (NULL)", "column1 text null", "NULL"},
		{"VALUES (1::mz_timestamp)", "column1 numeric", "1"},
		{"VALUES (now())", "column1 timestamp with time zone", "1704067200000000"},
		{"VALUES (1), ('x')", "ERROR 22P02: invalid input syntax for type integer: \"x\"", ""},
		{"VALUES (1), (true)", "ERROR 42804: VALUES types integer and boolean cannot be matched", ""},
		{"VALUES (a)", `ERROR 42703: column "a" does not exist`, ""},
		{"VALUES (1 / 0)", "column1 integer", "ERROR 22012: division by zero"},
	} {
		cols, rows := valuesText(t, tc.src)
		if cols != tc.cols || rows != tc.rows {
			t.Errorf("%s:\n got: %s / %s\nwant: %s / %s", tc.src, cols, rows, tc.cols, tc.rows)
		}
	}
}

func TestValuesParams(t *testing.T) {
	st, err := sql.Parse("VALUES ($1, $2), (1, 'x')")
	if err != nil {
		t.Fatal(err)
	}
	v, err := CompileValues(st.(*sql.Select).Values, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.ParamTypes(); len(got) != 2 || got[0] != TypeInt4 || got[1] != TypeText {
		t.Fatalf("param types %v, want [integer text]", got)
	}
	rows, err := v.Eval(&EvalContext{Params: []row.Datum{int32(7), "y"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rows); got != "[[7 y] [1 x]]" {
		t.Fatalf("rows %s, want [[7 y] [1 x]]", got)
	}
}
