package expr

import (
	"errors"
	"testing"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

func TestColumnType(t *testing.T) {
	tests := []struct {
		typ  string
		want string // the column's type with its modifier; "" when not a column type
		code string // the SQLSTATE when not a column type
	}{
		{typ: "int", want: "integer"}, {typ: "int8", want: "bigint"}, {typ: "double precision", want: "double precision"},
		{typ: "float", want: "double precision"}, {typ: "float(24)", want: "real"}, {typ: "float(25)", want: "double precision"},
		{typ: "numeric", want: "numeric"}, {typ: "numeric(10,2)", want: "numeric(10,2)"}, {typ: "decimal(5)", want: "numeric(5,0)"},
		{typ: "varchar", want: "text"}, {typ: "varchar(3)", want: "character varying(3)"},
		{typ: "character varying(10)", want: "character varying(10)"}, {typ: "text", want: "text"},
		{typ: "timestamp", want: "timestamp without time zone"}, {typ: "timestamp(0)", want: "timestamp(0) without time zone"},
		{typ: "timestamp(3) with time zone", want: "timestamp(3) with time zone"}, {typ: "timestamptz", want: "timestamp with time zone"},
		{typ: "jsonb", want: "jsonb"}, {typ: "json", want: "jsonb"}, {typ: "pg_catalog.bool", want: "boolean"}, {typ: "uuid", want: "uuid"},
		{typ: "text[]", code: "42704"}, {typ: "interval", code: "42704"}, {typ: "mz_timestamp", code: "42704"},
		{typ: `"INT"`, code: "42704"}, {typ: "other.int4", code: "42704"}, {typ: "char(3)", code: "42704"},
		{typ: "varchar(0)", code: "22023"}, {typ: "numeric(1001)", code: "22023"}, {typ: "int(3)", code: "42601"},
	}
	for _, tt := range tests {
		st, err := sql.Parse("SELECT x::" + tt.typ)
		if err != nil {
			t.Fatal(err)
		}
		c := st.(*sql.Select).Items[0].Expr.(*sql.Cast)
		typ, mod, err := ColumnType(c.Type)
		got, code := "", ""
		if err == nil {
			got = row.Column{Type: typ, Mod: mod}.TypeName()
		} else {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%s: error %T %v, want *Error", tt.typ, err, err)
			}
			code = e.SQLState()
		}
		if got != tt.want || code != tt.code {
			t.Errorf("%s: ColumnType = %q (%s), want %q (%s)", tt.typ, got, code, tt.want, tt.code)
		}
	}
}

func TestColumnAssign(t *testing.T) {
	col := func(typ string) row.Column {
		st, err := sql.Parse("SELECT x::" + typ)
		if err != nil {
			t.Fatal(err)
		}
		ty, mod, err := ColumnType(st.(*sql.Select).Items[0].Expr.(*sql.Cast).Type)
		if err != nil {
			t.Fatal(err)
		}
		return row.Column{Name: "c", Type: ty, Mod: mod}
	}
	tests := []struct {
		typ  string
		in   row.Datum
		want row.Datum // nil when the assignment fails
		code string
	}{
		{typ: "varchar(3)", in: "abc", want: "abc"},
		{typ: "varchar(3)", in: "abcdef", code: "22001"},
		{typ: "varchar(3)", in: "ab    ", want: "ab "},
		{typ: "varchar(3)", in: "abc d", code: "22001"},
		{typ: "varchar(3)", in: "héé", want: "héé"},
		{typ: "numeric(5,2)", in: row.Numeric("2.345"), want: row.Numeric("2.35")},
		{typ: "numeric(5,2)", in: row.Numeric("-2.345"), want: row.Numeric("-2.35")},
		{typ: "numeric(5,2)", in: row.Numeric("999.994"), want: row.Numeric("999.99")},
		{typ: "numeric(5,2)", in: row.Numeric("999.995"), code: "22003"},
		{typ: "numeric(5,2)", in: row.Numeric("9999.999"), code: "22003"},
		{typ: "numeric(5,2)", in: row.Numeric("NaN"), want: row.Numeric("NaN")},
		{typ: "numeric(3)", in: row.Numeric("12.5"), want: row.Numeric("13")},
		{typ: "timestamp(0)", in: row.Timestamp(1_500_000), want: row.Timestamp(2_000_000)},
	}
	for _, tt := range tests {
		f := ColumnAssign(col(tt.typ))
		got, err := f(tt.in)
		code := ""
		if err != nil {
			code = err.(*Error).SQLState()
		}
		if got != tt.want || code != tt.code {
			t.Errorf("%s := %v: got %v (%s, %v), want %v (%s)", tt.typ, tt.in, got, code, err, tt.want, tt.code)
		}
	}
	if f := ColumnAssign(row.Column{Name: "c", Type: row.TypeText}); f != nil {
		t.Errorf("ColumnAssign of a column without modifier is not nil")
	}
}
