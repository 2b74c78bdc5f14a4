package feed

import (
	"strconv"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/row"
)

// jsonWire encodes a subscribe's data rows as JSON objects, one per row:
//
//	{"mz_timestamp":"1700000000123","mz_diff":1,"id":"42","name":"x"}
//
// mz_timestamp is a string (a uint64 does not fit a JavaScript double),
// mz_diff a number, mz_state a string, and every relation column what
// pgrepr.AppendJSONValue makes of it. mz_progressed is left out: progress
// travels as its own event. Each object is followed by its framing's
// separator (',' in an SSE event's array, '\n' in NDJSON), so that the
// objects of a run of rows, back to back, are the bytes the client gets
// (formatter.Runs). It implements formatter.Wire, so rows shared by the
// subscribers of one shape (the fast path) are encoded once for all of
// them, as pgwire's DataRows are, and a snapshot piece is written to every
// subscriber from those bytes.
type jsonWire struct {
	// open starts an object: {"mz_timestamp":" or, in a stream of several
	// collections, {"mz_collection":"a","mz_timestamp":".
	open []byte
	key  string
	// keys are the JSON object keys of the tail columns with their
	// punctuation: `,"mz_diff":`, `,"id":`.
	keys  [][]byte
	types []formatter.ColType
	sep   byte // after each object
}

// newJSONWire returns the wire of a shape's output columns (mz_timestamp
// first, mz_progressed second when present). collection, when not "",
// names the collection in every object (mz_collection), for a stream of
// several. sep follows each object.
func newJSONWire(cols []formatter.Column, collection string, sep byte) *jsonWire {
	w := &jsonWire{open: []byte(`{"mz_timestamp":"`), key: "json" + string(sep), sep: sep}
	if collection != "" {
		w.open = pgrepr.AppendJSONValue([]byte(`{"mz_collection":`), row.TypeText, collection)
		w.open = append(w.open, `,"mz_timestamp":"`...)
		w.key += " mz_collection=" + collection
	}
	for _, c := range cols[1:] {
		if c.Type.Meta == formatter.MetaProgress {
			continue
		}
		key := pgrepr.AppendJSONValue([]byte(","), row.TypeText, c.Name)
		w.keys = append(w.keys, append(key, ':'))
		w.types = append(w.types, c.Type)
	}
	return w
}

// checkKeys fails when two fields of the objects newJSONWire(cols,
// collection, ...) makes would have one name: a column named as a field
// of the feed's own (mz_diff, mz_timestamp, mz_state, mz_collection) or
// named twice (columns=a,a). A JSON parser keeps one of them, so that a
// column mz_diff replaced each row's diff.
func checkKeys(cols []formatter.Column, collection string) error {
	seen := map[string]bool{}
	if collection != "" {
		seen["mz_collection"] = true
	}
	for _, c := range cols {
		if c.Type.Meta == formatter.MetaProgress {
			continue
		}
		if seen[c.Name] {
			return pgwire.Errorf("42701", "the feed's rows would have two fields named \"%s\" (a column named as a field of the feed's own, or twice): choose columns= without it", c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}

// Key implements formatter.Wire. A shape has a JSON encoding per
// separator, and one more per stream of several collections it is part
// of.
func (w *jsonWire) Key() string { return w.key }

// AppendMessage implements formatter.Wire: it appends r's object and the
// separator.
func (w *jsonWire) AppendMessage(buf []byte, r formatter.Row) []byte {
	buf = append(buf, w.open...)
	buf = strconv.AppendUint(buf, r.Time, 10)
	buf = append(buf, '"')
	for i, key := range w.keys {
		buf = append(buf, key...)
		d := r.Column(i)
		switch t := w.types[i]; {
		case d == nil:
			buf = append(buf, "null"...)
		case t.Meta == formatter.MetaDiff:
			buf = strconv.AppendInt(buf, d.(int64), 10)
		default:
			buf = pgrepr.AppendJSONValue(buf, t.RelType(), d)
		}
	}
	return append(buf, '}', w.sep)
}
