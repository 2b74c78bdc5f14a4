package consumer

import (
	"errors"
	"fmt"

	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/row"
)

// The key contract of the key-value sinks (the Redis sink, and any Go host
// that lands the feed itself): how a row becomes the key a reader looks it
// up by, and the value it finds there. Both are frozen: a key written by
// one release is read by the next, so a change here is a breaking change
// of every landed store, pinned by testdata/contract.golden.
//
// Every cell, in the key and in the value alike, is rendered by
// pgrepr.AppendJSONValue (see its doc for the per-type mapping: int8,
// numeric and mz_timestamp as strings, NaN and ±Infinity as null,
// timestamps as Postgres text), so a key and a value agree byte for byte
// on a shared column and there is one encoder to keep frozen, not two.

// ErrKeyColumn means a KEY column names no column of the relation, or
// names one twice.
//
// It lives here rather than in errors.go while the consumer core lands on
// another branch; it belongs with the package's other sentinels.
var ErrKeyColumn = errors.New("bad key column")

// KeyColumns resolves the KEY column names of a sink (in KEY order, as the
// user gave them) to their positions in cols. The result is what KeyJSON
// takes.
func KeyColumns(cols []row.Column, names []string) ([]int, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no key column", ErrKeyColumn)
	}
	key := make([]int, len(names))
	seen := make(map[string]bool, len(names))
	for i, name := range names {
		if seen[name] {
			return nil, fmt.Errorf("%w: %q named twice", ErrKeyColumn, name)
		}
		seen[name] = true
		key[i] = -1
		for j, c := range cols {
			if c.Name == name {
				key[i] = j
				break
			}
		}
		if key[i] < 0 {
			return nil, fmt.Errorf("%w: %q is not a column of the relation", ErrKeyColumn, name)
		}
	}
	return key, nil
}

// KeyJSON appends the key of r to buf: prefix (the namespace, e.g.
// "orders:", and for the Redis sink the generation, "orders:g2:"), then a
// JSON array of the key columns' cells in KEY order, no spaces:
//
//	orders:g2:["acme","2026-07-18 10:00:00"]
//
// key holds positions in cols and r (see KeyColumns). A NULL key cell is
// null. It panics, like pgrepr.AppendJSONValue, if a datum's Go type is
// not its column's.
func KeyJSON(buf []byte, prefix string, cols []row.Column, key []int, r row.Row) []byte {
	buf = append(buf, prefix...)
	buf = append(buf, '[')
	for i, k := range key {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = pgrepr.AppendJSONValue(buf, cols[k].Type, r[k])
	}
	return append(buf, ']')
}

// ValueJSON appends r as one JSON object to buf: every column of cols, in
// the relation's column order (not sorted by name), each cell rendered by
// pgrepr.AppendJSONValue, no spaces:
//
//	{"customer":"acme","placed":"2026-07-18 10:00:00","total":"12.5"}
//
// The key columns are in the value too, so a reader needs no second
// lookup to know the row's key. Column names are escaped as JSON strings
// by the same encoder as text cells (pgrepr.AppendJSONString).
func ValueJSON(buf []byte, cols []row.Column, r row.Row) []byte {
	buf = append(buf, '{')
	for i, c := range cols {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = pgrepr.AppendJSONString(buf, c.Name)
		buf = append(buf, ':')
		buf = pgrepr.AppendJSONValue(buf, c.Type, r[i])
	}
	return append(buf, '}')
}
