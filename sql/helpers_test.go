package sql

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// clearPos zeroes every field named Pos in the tree under v, so that trees
// parsed from differently spelled text can be compared.
func clearPos(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			clearPos(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if v.Type().Field(i).Name == "Pos" && f.CanSet() {
				f.SetInt(0)
				continue
			}
			clearPos(f)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			clearPos(v.Index(i))
		}
	}
}

// equalIgnoringPos reports whether two trees are equal apart from positions.
// It clears the positions of both trees.
func equalIgnoringPos(a, b any) bool {
	clearPos(reflect.ValueOf(&a))
	clearPos(reflect.ValueOf(&b))
	return reflect.DeepEqual(a, b)
}

func mustParse(t *testing.T, sql string) Statement {
	t.Helper()
	s, err := Parse(sql)
	if err != nil {
		t.Fatalf("Parse(%.200q): %v", sql, describe(err))
	}
	return s
}

func mustParseAll(t *testing.T, sql string) []Statement {
	t.Helper()
	s, err := ParseAll(sql)
	if err != nil {
		t.Fatalf("ParseAll(%.200q): %v", sql, describe(err))
	}
	return s
}

func describe(err error) string {
	if pe, ok := err.(*ParseError); ok {
		return pe.SQLState() + " " + pe.Message + " at " + strconv.Itoa(pe.Position)
	}
	return err.Error()
}

// parseExpr parses "SELECT <expr>" and returns the expression.
func parseExpr(t *testing.T, expr string) Expr {
	t.Helper()
	s := mustParse(t, "SELECT "+expr)
	return s.(*Select).Items[0].Expr
}

// paren renders an expression with every operator parenthesized, to show the
// shape of the tree in tests.
func paren(e Expr) string {
	switch e := e.(type) {
	case *BinaryExpr:
		return "(" + paren(e.Left) + " " + string(e.Op) + " " + paren(e.Right) + ")"
	case *UnaryExpr:
		return "(" + string(e.Op) + " " + paren(e.X) + ")"
	case *IsExpr:
		not := ""
		if e.Not {
			not = "NOT "
		}
		return "(" + paren(e.X) + " IS " + not + e.Test.String() + ")"
	case *InExpr:
		var items []string
		for _, x := range e.List {
			items = append(items, paren(x))
		}
		not := ""
		if e.Not {
			not = "NOT "
		}
		return "(" + paren(e.X) + " " + not + "IN (" + strings.Join(items, ", ") + "))"
	case *BetweenExpr:
		return "(" + paren(e.X) + " BETWEEN " + paren(e.Low) + " AND " + paren(e.High) + ")"
	case *Cast:
		return "(" + paren(e.X) + "::" + e.Type.String() + ")"
	}
	return e.String()
}
