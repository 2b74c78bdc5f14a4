package conformance

import (
	"slices"
	"testing"
)

func TestSplitStatements(t *testing.T) {
	for _, tc := range []struct {
		name, sql string
		want      []string
	}{
		{"One", "SELECT 1", []string{"SELECT 1"}},
		{"TrailingSemicolon", "SELECT 1;", []string{"SELECT 1"}},
		{"Several", " BEGIN; DECLARE c CURSOR FOR SUBSCRIBE t ;FETCH ALL c", []string{"BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE t", "FETCH ALL c"}},
		{"EmptyStatements", ";; SELECT 1 ;;", []string{"SELECT 1"}},
		{"SemicolonInString", "INSERT INTO t VALUES ('a;b'); SELECT 2", []string{"INSERT INTO t VALUES ('a;b')", "SELECT 2"}},
		{"SemicolonInIdentifier", `SELECT 1 AS "x;y"; SELECT 2`, []string{`SELECT 1 AS "x;y"`, "SELECT 2"}},
		{"OtherQuoteInside", `SELECT 'it"s;'; SELECT "a'b;"`, []string{`SELECT 'it"s;'`, `SELECT "a'b;"`}},
		{"Blank", "  ", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := splitStatements(tc.sql); !slices.Equal(got, tc.want) {
				t.Errorf("splitStatements(%q) = %q, want %q", tc.sql, got, tc.want)
			}
		})
	}
}

func TestInnerQuery(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{"COPY (SUBSCRIBE t) TO STDOUT", "SUBSCRIBE t"},
		{"COPY (SUBSCRIBE (SELECT a FROM t WHERE (a > 1))) TO STDOUT", "SUBSCRIBE (SELECT a FROM t WHERE (a > 1))"},
		{"COPY t TO STDOUT", ""},
		{"COPY (SUBSCRIBE t", ""},
	} {
		if got := innerQuery(tc.sql); got != tc.want {
			t.Errorf("innerQuery(%q) = %q, want %q", tc.sql, got, tc.want)
		}
	}
}
