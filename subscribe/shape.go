package subscribe

import "github.com/shardtail/shardtail/row"

// MFP is a map/filter/project over the rows of a collection: it returns the
// output row and whether the row passes. It must be a pure function of the
// row, so that applying it to updates and re-consolidating is correct, and
// safe for concurrent use (the fast path evaluates it from any subscriber
// of its shape).
type MFP interface {
	Apply(r row.Row) (row.Row, bool, error)
}

// Shape is what a subscribe to a query or view over one collection applies
// to the collection's rows (a bare collection has none): the MFP, bound to
// its parameter values, and a canonical key. Subscribes whose shapes have
// the same Key are served by one evaluation per batch on the fast path.
type Shape struct {
	// Key identifies the function: two shapes over one collection with
	// equal keys map every row alike (the adapter renders the bound,
	// constant-folded MFP).
	Key string
	// MFP maps the collection's rows to the subscribed relation.
	MFP MFP
	// Index, when set, is an equality the MFP's filter starts with: a row
	// whose column Index.Col holds none of Index.Values is filtered out
	// without error, so the fast path may skip it without evaluating MFP.
	Index *Index
}

// Index is an equality (col = v, col IN (v1, v2)) a shape's filter
// requires of every row it passes, and nothing evaluated before it can
// fail. Values are comparable Go values (row.Datum of the column's type,
// never NULL) for which Go equality is SQL equality: a row is a candidate
// exactly when its column's value == one of them, or is NULL with Nulls
// (the filter may then still fail after the equality, see
// expr.Equality.Nulls).
type Index struct {
	Col    int
	Values []row.Datum
	Nulls  bool
}

// Keys are the values a candidate row's column holds: Values, and nil
// (NULL) with Nulls.
func (x *Index) Keys() []row.Datum {
	if !x.Nulls {
		return x.Values
	}
	return append(append([]row.Datum(nil), x.Values...), nil)
}
