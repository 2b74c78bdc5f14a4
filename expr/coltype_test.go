package expr

import (
	"testing"

	"github.com/shardtail/shardtail/sql"
)

func TestColumnType(t *testing.T) {
	tests := []struct {
		typ  string
		want string // "" when not a column type
	}{
		{"int", "integer"}, {"int8", "bigint"}, {"double precision", "double precision"},
		{"float", "double precision"}, {"numeric(10,2)", "numeric"}, {"varchar(3)", "text"},
		{"character varying", "text"}, {"timestamp", "timestamp without time zone"},
		{"timestamp(3) with time zone", "timestamp with time zone"}, {"timestamptz", "timestamp with time zone"},
		{"jsonb", "jsonb"}, {"json", "jsonb"}, {"pg_catalog.bool", "boolean"}, {"uuid", "uuid"},
		{"text[]", ""}, {"interval", ""}, {"mz_timestamp", ""}, {`"INT"`, ""}, {"other.int4", ""},
	}
	for _, tt := range tests {
		st, err := sql.Parse("SELECT x::" + tt.typ)
		if err != nil {
			t.Fatal(err)
		}
		c := st.(*sql.Select).Items[0].Expr.(*sql.Cast)
		typ, ok := ColumnType(c.Type)
		got := ""
		if ok {
			got = typ.String()
		}
		if got != tt.want {
			t.Errorf("%s: ColumnType = %q, want %q", tt.typ, got, tt.want)
		}
	}
}
