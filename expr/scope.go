package expr

import (
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// Scope is what an expression is compiled against: the relations whose
// columns it may name, laid side by side in the input row, and the types
// of the parameters $1, $2, ... A Scope collects what compiling learns:
// parameter types inferred from context, and whether now() was used.
//
// A Scope is not safe for concurrent use; compile with one at a time.
type Scope struct {
	rels    []scopeRel
	width   int
	params  []Type // TypeUnknown: not yet known
	fixed   int    // params[:fixed] were declared by the client
	usesNow bool
}

type scopeRel struct {
	name   string // table name or alias; "" if none
	schema row.Schema
	offset int // index of its first column in the input row
}

// NewScope returns a scope over one relation: the input row has schema's
// columns, which may be qualified by table (the relation's name or alias;
// "" if it has none).
func NewScope(schema row.Schema, table string) *Scope {
	s := &Scope{}
	s.AddRelation(table, schema)
	return s
}

// AddRelation appends a relation's columns to the input row (a join's
// right side). Its columns are at indexes [Width(), Width()+len(columns)).
func (s *Scope) AddRelation(table string, schema row.Schema) {
	s.rels = append(s.rels, scopeRel{name: table, schema: schema, offset: s.width})
	s.width += len(schema.Columns)
}

// Width is the number of columns of the input row.
func (s *Scope) Width() int { return s.width }

// SetParamTypes declares the parameter types the client gave (Parse's
// parameter OIDs); TypeUnknown (or a shorter list) leaves a parameter to
// be inferred from context.
func (s *Scope) SetParamTypes(types []Type) {
	s.params = append(s.params[:0], types...)
	s.fixed = len(types)
}

// ParamTypes returns the type of every parameter referenced or declared:
// declared types, types inferred from context (in `a = $1`, a's type), and
// text for a parameter whose type nothing determined. The extended
// protocol reports these in ParameterDescription.
func (s *Scope) ParamTypes() []Type {
	out := make([]Type, len(s.params))
	for i, t := range s.params {
		if t == TypeUnknown || t == TypeInvalid {
			t = TypeText
		}
		out[i] = t
	}
	return out
}

// UsesNow reports whether a compiled expression reads the query timestamp
// (now(), current_timestamp, mz_now()), which a materialized view, whose
// rows must not depend on when they were computed, may not do.
func (s *Scope) UsesNow() bool { return s.usesNow }

// paramType returns $n's type so far, growing the list as needed.
func (s *Scope) paramType(n int) Type {
	for len(s.params) < n {
		s.params = append(s.params, TypeUnknown)
	}
	return s.params[n-1]
}

func (s *Scope) setParamType(n int, t Type) {
	s.paramType(n)
	s.params[n-1] = t
}

// resolvedColumn is a column a name resolved to.
type resolvedColumn struct {
	index int
	col   row.Column
}

// resolve finds the column a reference names. Qualifiers match the
// relation's name; a schema or database part, if written, is not checked
// (the planner resolved the relation already).
func (s *Scope) resolve(ref *sql.ColumnRef) (resolvedColumn, error) {
	var found []resolvedColumn
	qualified := !ref.Table.IsZero()
	matchedRel := false
	for _, r := range s.rels {
		if qualified && r.name != ref.Table.Name {
			continue
		}
		matchedRel = true
		for i, c := range r.schema.Columns {
			if c.Name == ref.Column {
				found = append(found, resolvedColumn{index: r.offset + i, col: c})
			}
		}
	}
	switch {
	case qualified && !matchedRel:
		return resolvedColumn{}, errf(CodeUndefinedTable, "missing FROM-clause entry for table %q", ref.Table.Name)
	case len(found) == 0 && qualified:
		return resolvedColumn{}, errf(CodeUndefinedColumn, "column %s.%s does not exist", ref.Table.Name, ref.Column)
	case len(found) == 0:
		return resolvedColumn{}, errf(CodeUndefinedColumn, "column %q does not exist", ref.Column)
	case len(found) > 1:
		return resolvedColumn{}, errf(CodeAmbiguousColumn, "column reference %q is ambiguous", ref.Column)
	}
	return found[0], nil
}

// star returns the columns * or t.* expands to, in input order.
func (s *Scope) star(table sql.ObjectName) ([]resolvedColumn, error) {
	var out []resolvedColumn
	matched := false
	for _, r := range s.rels {
		if !table.IsZero() && r.name != table.Name {
			continue
		}
		matched = true
		for i, c := range r.schema.Columns {
			out = append(out, resolvedColumn{index: r.offset + i, col: c})
		}
	}
	if !table.IsZero() && !matched {
		return nil, errf(CodeUndefinedTable, "missing FROM-clause entry for table %q", table.Name)
	}
	if len(s.rels) == 0 && table.IsZero() {
		return nil, errf(CodeSyntaxError, "SELECT * with no tables specified is not valid")
	}
	return out, nil
}
