package sql

import (
	"strconv"
	"strings"
)

// Node is any AST node: a Statement, an Expr, a TableExpr, or one of the value
// types they are built from (ObjectName, TypeName, ...). String renders the
// node as canonical SQL that parses back to an equal node.
type Node interface {
	String() string
	format(w *printer)
}

// Statement is one parsed SQL statement. The concrete types are listed in doc.go.
type Statement interface {
	Node
	statementNode()
}

// Expr is a scalar expression. The concrete types are listed in doc.go.
type Expr interface {
	Node
	exprNode()
}

// TableExpr is an item of a FROM clause: *TableName, *DerivedTable,
// *TableFunc or *Join.
type TableExpr interface {
	Node
	tableExprNode()
}

// printer accumulates canonical SQL.
type printer struct{ strings.Builder }

func render(n Node) string {
	var w printer
	n.format(&w)
	return w.String()
}

func (w *printer) ident(name string) { w.WriteString(QuoteIdent(name)) }

func (w *printer) identList(names []string) {
	for i, n := range names {
		if i > 0 {
			w.WriteString(", ")
		}
		w.ident(n)
	}
}

func (w *printer) parenIdentList(names []string) {
	w.WriteByte('(')
	w.identList(names)
	w.WriteByte(')')
}

func (w *printer) exprList(es []Expr) {
	for i, e := range es {
		if i > 0 {
			w.WriteString(", ")
		}
		e.format(w)
	}
}

// ObjectName is a possibly qualified name of a table, view, source, role or
// function: name, schema.name or database.schema.name. Unquoted parts are
// folded to lower case; quoted parts keep their case.
type ObjectName struct {
	Database string // "" unless written with three parts
	Schema   string // "" unless written with two or three parts
	Name     string
	// Pos is the 1-based character position of the name in the SQL text, for
	// errors such as "relation does not exist"; 0 when not parsed from text.
	Pos int
}

// Parts returns the written parts, outermost first.
func (n ObjectName) Parts() []string {
	switch {
	case n.Database != "":
		return []string{n.Database, n.Schema, n.Name}
	case n.Schema != "":
		return []string{n.Schema, n.Name}
	case n.Name != "":
		return []string{n.Name}
	}
	return nil
}

// IsZero reports whether the name is absent.
func (n ObjectName) IsZero() bool { return n.Name == "" }

func (n ObjectName) String() string { return render(n) }

func (n ObjectName) format(w *printer) {
	for i, p := range n.Parts() {
		if i > 0 {
			w.WriteByte('.')
		}
		w.ident(p)
	}
}

// TypeName is a type as written in a column definition, a cast or a typed
// literal. It is syntactic: the parser accepts any name, and the planner
// resolves it (expr.ColumnType for column types; casts also know mz_timestamp,
// interval, regclass and so on).
type TypeName struct {
	Schema string // "" unless schema-qualified (pg_catalog.int4)
	// Name is the type name in lower case (unless quoted). Multiword names are
	// joined by single spaces in their canonical spelling: "double precision",
	// "character varying", "timestamp with time zone",
	// "timestamp without time zone", "time with time zone".
	Name      string
	Modifiers []int // type modifiers: numeric(10,2) → [10 2]; nil when none
	Array     bool  // written with a trailing []
	Pos       int   // 1-based character position; 0 when not parsed from text
}

func (t TypeName) String() string { return render(t) }

// multiwordTypes are the type names written as several keywords.
var multiwordTypes = setOf(
	"double precision", "character varying",
	"timestamp with time zone", "timestamp without time zone",
	"time with time zone", "time without time zone",
)

func (t TypeName) format(w *printer) {
	mods := func() {
		if t.Modifiers == nil {
			return
		}
		w.WriteByte('(')
		for i, m := range t.Modifiers {
			if i > 0 {
				w.WriteString(", ")
			}
			w.WriteString(strconv.Itoa(m))
		}
		w.WriteByte(')')
	}
	switch {
	case t.Schema != "":
		w.ident(t.Schema)
		w.WriteByte('.')
		w.ident(t.Name)
		mods()
	case multiwordTypes[t.Name]:
		// timestamp(3) with time zone: the precision follows the first word.
		if first, rest, ok := strings.Cut(t.Name, " "); ok && (first == "timestamp" || first == "time") {
			w.WriteString(first)
			mods()
			w.WriteString(" " + rest)
		} else {
			w.WriteString(t.Name)
			mods()
		}
	default:
		w.ident(t.Name)
		mods()
	}
	if t.Array {
		w.WriteString("[]")
	}
}

// ObjectKind is the kind of catalog object a statement names.
type ObjectKind uint8

// The object kinds of DROP, ALTER, SHOW and SHOW CREATE.
const (
	KindTable ObjectKind = iota + 1
	KindView
	KindMaterializedView
	KindSource
	KindRole
)

// String returns the kind as SQL keywords: "TABLE", "MATERIALIZED VIEW", ...
func (k ObjectKind) String() string {
	switch k {
	case KindTable:
		return "TABLE"
	case KindView:
		return "VIEW"
	case KindMaterializedView:
		return "MATERIALIZED VIEW"
	case KindSource:
		return "SOURCE"
	case KindRole:
		return "ROLE"
	}
	return "OBJECT"
}

// plural returns the kind as SHOW writes it: "TABLES", "MATERIALIZED VIEWS".
func (k ObjectKind) plural() string { return k.String() + "S" }
