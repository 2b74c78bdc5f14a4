package expr

import (
	"fmt"
	"strings"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// This file is what the fast path needs to share an MFP between
// subscribes: a canonical key of a bound MFP, and the equality its filter
// starts with, through which rows are routed to the shapes that want them.

// ShapeKey renders the bound MFP canonically: its filter and output
// expressions as String prints them (constants folded) followed by the
// value of each parameter. Two MFPs over one relation with the same key
// map every row alike. The parameters' values are the ones Bind gave,
// as their type's SQL literal where they parse, raw otherwise (the MFP
// then fails on its first row, whatever the key).
func (m *MFP) ShapeKey() string {
	var b strings.Builder
	b.WriteString(m.String())
	for i, t := range m.params {
		fmt.Fprintf(&b, "\n$%d = ", i+1)
		v, err := (&param{n: i + 1, typ: t}).Eval(m.ctx, nil)
		switch {
		case err == nil:
			b.WriteString(literalSQL(t, v))
		case m.ctx != nil && i < len(m.ctx.Params):
			fmt.Fprintf(&b, "%T(%v)", m.ctx.Params[i], m.ctx.Params[i])
		default:
			b.WriteString("unbound")
		}
	}
	return b.String()
}

// Identity reports whether the MFP passes every row unchanged (no filter,
// and the output is the input row): such a stage does not change a shape.
func (m *MFP) Identity() bool { return m.identity }

// Equality is an equality every row passed by a chain of MFPs must
// satisfy: the input row's column Col equals one of Values. See
// LeadingEquality.
type Equality struct {
	Col int
	// Values are the constants, of the column's Go type, never NULL.
	Values []row.Datum
	// Nulls reports that a row whose column is NULL may still fail the
	// MFP with an error rather than be filtered out: such rows must be
	// evaluated.
	Nulls bool
}

// LeadingEquality returns the equality (col = c, col IN (c1, c2)) that the
// bound MFPs stages, applied in order, require of every row they pass, if
// the filter has one that no error can precede: every conjunct evaluated
// before it cannot fail, and the stages before its filter only pick
// columns. A row whose column holds none of the values (nor NULL, see
// Equality.Nulls) is then filtered out without error, so skipping it is
// exactly what evaluating it would do. Only column types whose Go values
// compare equal exactly when SQL says so are indexed (integers, text,
// bool).
func LeadingEquality(stages []*MFP) (Equality, bool) {
	// cols maps the current stage's input columns to the first stage's.
	var cols []int
	through := func(i int) int {
		if cols == nil {
			return i
		}
		return cols[i]
	}
	for _, m := range stages {
		if m.filter == nil {
			next := make([]int, len(m.items))
			for i, x := range m.items {
				c, ok := x.(*column)
				if !ok {
					return Equality{}, false // evaluated for every row: may fail
				}
				next[i] = through(c.index)
			}
			cols = next
			continue
		}
		conj := []Expr{m.filter}
		if a, ok := m.filter.(*and); ok {
			conj = a.xs
		}
		for i, x := range conj {
			eq, hasNull, ok := equalityOf(m.ctx, x)
			if ok {
				rest := true
				for _, y := range conj[i+1:] {
					rest = rest && cannotFail(m.ctx, y)
				}
				// A NULL constant makes the conjunct NULL for every row,
				// so the conjuncts after it run on every row.
				if hasNull && !rest {
					return Equality{}, false
				}
				eq.Col = through(eq.Col)
				eq.Nulls = !rest
				return eq, true
			}
			if !cannotFail(m.ctx, x) {
				return Equality{}, false
			}
		}
		return Equality{}, false
	}
	return Equality{}, false
}

// equalityOf recognizes col = c, c = col and col IN (c1, ...) over an
// indexable column, with the non-NULL constants' values; hasNull reports a
// NULL among the constants.
func equalityOf(ctx *EvalContext, x Expr) (eq Equality, hasNull, ok bool) {
	var col *column
	var consts []Expr
	switch x := x.(type) {
	case *compare:
		if x.op != sql.OpEq {
			return eq, false, false
		}
		if c, ok := x.l.(*column); ok {
			col, consts = c, []Expr{x.r}
		} else if c, ok := x.r.(*column); ok {
			col, consts = c, []Expr{x.l}
		}
	case *inList:
		if x.not {
			return eq, false, false
		}
		if c, ok := x.x.(*column); ok {
			col, consts = c, x.list
		}
	}
	if col == nil || !indexable(col.typ) {
		return eq, false, false
	}
	eq.Col = col.index
	for _, k := range consts {
		switch k.(type) {
		case *constant, *param:
		default:
			return eq, false, false
		}
		v, err := k.Eval(ctx, nil)
		if err != nil {
			return eq, false, false
		}
		if v == nil {
			hasNull = true
			continue
		}
		if !datumHasType(col.typ, v) {
			return eq, false, false
		}
		eq.Values = append(eq.Values, v)
	}
	return eq, hasNull, true
}

// indexable reports whether values of t are equal in SQL exactly when
// their Go values are ==.
func indexable(t Type) bool {
	switch t {
	case TypeBool, TypeInt2, TypeInt4, TypeInt8, TypeText:
		return true
	}
	return false
}

// cannotFail reports whether evaluating x can never return an error:
// columns, constants, bound parameters and logic and comparisons over
// them.
func cannotFail(ctx *EvalContext, x Expr) bool {
	all := func(xs ...Expr) bool {
		for _, y := range xs {
			if !cannotFail(ctx, y) {
				return false
			}
		}
		return true
	}
	switch x := x.(type) {
	case *column, *constant:
		return true
	case *param:
		_, err := x.Eval(ctx, nil)
		return err == nil
	case *compare:
		return all(x.l, x.r)
	case *distinct:
		return all(x.l, x.r)
	case *and:
		return all(x.xs...)
	case *or:
		return all(x.xs...)
	case *not:
		return all(x.x)
	case *isTest:
		return all(x.x)
	case *inList:
		return all(x.x) && all(x.list...)
	}
	return false
}
