package feed

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/sql"
)

// transport is how a response streams.
type transport int

const (
	transportSSE      transport = iota // text/event-stream
	transportNDJSON                    // application/x-ndjson
	transportSnapshot                  // ?live=false: one JSON document
)

// String is the transport's metrics label.
func (t transport) String() string {
	switch t {
	case transportNDJSON:
		return "ndjson"
	case transportSnapshot:
		return "snapshot"
	}
	return "sse"
}

// request is one GET /v1/subscribe/{collection} as its query parameters
// and headers describe it.
type request struct {
	collection string
	// collections are the collections of a multi-collection stream
	// (GET /v1/subscribe?collection=a&collection=b); nil for one.
	collections []string
	columns     []string
	where       sql.Expr // nil without ?where=
	envelope    sql.EnvelopeKind
	key         []string
	snapshot    bool
	asOf        *uint64
	upTo        *uint64
	// after is the resume point (Last-Event-ID or ?after=): a frontier the
	// client has seen, every update below it delivered.
	after     *uint64
	transport transport
}

// parseRequest reads a subscribe request. Unknown parameters are errors,
// so that a typo does not silently subscribe to something else.
func parseRequest(r *http.Request, collection string) (*request, error) {
	q := r.URL.Query()
	req := &request{collection: collection, snapshot: true}
	for name := range q {
		switch name {
		case "snapshot", "envelope", "key", "columns", "where", "up_to", "as_of", "after", "live":
			if len(q[name]) > 1 {
				return nil, fmt.Errorf("%w: %s given more than once", ErrBadParameter, name)
			}
		case "collection":
			if collection != "" {
				return nil, fmt.Errorf("%w: collection is a parameter of /v1/subscribe alone", ErrBadParameter)
			}
		default:
			return nil, fmt.Errorf("%w: unknown parameter %q", ErrBadParameter, name)
		}
	}
	if collection == "" {
		if err := req.parseCollections(q); err != nil {
			return nil, err
		}
	}
	var err error
	if v := q.Get("snapshot"); v != "" {
		if req.snapshot, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("%w: snapshot=%q is not true or false", ErrBadParameter, v)
		}
	}
	live := true
	if v := q.Get("live"); v != "" {
		if live, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("%w: live=%q is not true or false", ErrBadParameter, v)
		}
	}
	switch env := q.Get("envelope"); env {
	case "":
		if q.Has("key") {
			return nil, fmt.Errorf("%w: key needs envelope=upsert or envelope=debezium", ErrBadParameter)
		}
	case "upsert", "debezium":
		req.envelope = sql.EnvelopeUpsert
		if env == "debezium" {
			req.envelope = sql.EnvelopeDebezium
		}
		if req.key, err = nameList("key", q.Get("key")); err != nil {
			return nil, err
		}
		if len(req.key) == 0 {
			return nil, fmt.Errorf("%w: envelope=%s needs key=col,...", ErrBadParameter, env)
		}
	default:
		return nil, fmt.Errorf("%w: envelope=%q is not upsert or debezium", ErrBadParameter, env)
	}
	if q.Has("columns") {
		if req.columns, err = nameList("columns", q.Get("columns")); err != nil {
			return nil, err
		}
	}
	if q.Has("where") {
		if req.where, err = parseWhere(q.Get("where")); err != nil {
			return nil, err
		}
	}
	for _, p := range []struct {
		name string
		dst  **uint64
	}{{"as_of", &req.asOf}, {"up_to", &req.upTo}, {"after", &req.after}} {
		if v := q.Get(p.name); v != "" {
			if *p.dst, err = parseTimestamp(p.name, v); err != nil {
				return nil, err
			}
		}
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		// The browser's own reconnect: it wins over the ?after= it was
		// first opened with, which is older.
		if req.after, err = parseTimestamp("Last-Event-ID", id); err != nil {
			return nil, err
		}
	}
	// A browser reconnects with the URL it was opened with: the resume
	// point replaces as_of, which must lie before it (every progress event
	// of a stream from as_of is above it).
	if req.after != nil && req.asOf != nil && *req.after <= *req.asOf {
		return nil, fmt.Errorf("%w: the resume point %d is not after as_of %d", ErrBadParameter, *req.after, *req.asOf)
	}
	switch {
	case !live:
		if req.after != nil || req.upTo != nil {
			return nil, fmt.Errorf("%w: live=false takes neither after nor up_to", ErrBadParameter)
		}
		if !req.snapshot {
			return nil, fmt.Errorf("%w: live=false needs the snapshot", ErrBadParameter)
		}
		req.transport = transportSnapshot
	case acceptsNDJSON(r.Header.Get("Accept")):
		req.transport = transportNDJSON
	}
	return req, nil
}

// MaxCollections is the most collections one stream may carry.
const MaxCollections = 16

// parseCollections reads the collections of a multi-collection stream,
// which takes no shape: the same columns or predicate rarely fit several
// relations.
func (req *request) parseCollections(q url.Values) error {
	req.collections = q["collection"]
	switch {
	case len(req.collections) == 0:
		return fmt.Errorf("%w: /v1/subscribe needs collection=name (one or more)", ErrBadParameter)
	case len(req.collections) > MaxCollections:
		return fmt.Errorf("%w: more than %d collections in one stream", ErrBadParameter, MaxCollections)
	}
	for i, c := range req.collections {
		if slices.Contains(req.collections[:i], c) {
			return fmt.Errorf("%w: collection %q given twice", ErrBadParameter, c)
		}
	}
	for _, p := range []string{"columns", "where", "envelope", "key"} {
		if q.Has(p) {
			return fmt.Errorf("%w: %s applies to one collection (/v1/subscribe/{collection})", ErrBadParameter, p)
		}
	}
	return nil
}

// acceptsNDJSON reports whether an Accept header asks for NDJSON rather
// than Server-Sent Events.
func acceptsNDJSON(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(part, ";")
		switch strings.TrimSpace(mt) {
		case "application/x-ndjson", "application/ndjson", "application/jsonl":
			return true
		}
	}
	return false
}

// nameList reads a comma-separated list of column names, taken as
// written (case included), as quoted identifiers are.
func nameList(param, v string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" || !utf8.ValidString(n) {
			return nil, fmt.Errorf("%w: %s=%q has an empty or malformed column name", ErrBadParameter, param, v)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseTimestamp reads an mz_timestamp: a uint64 in decimal.
func parseTimestamp(param, v string) (*uint64, error) {
	t, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: %s=%q is not a timestamp (0 to 18446744073709551615)", ErrBadParameter, param, v)
	}
	return &t, nil
}

// parseWhere parses a predicate with the SQL parser. It parses a whole
// SELECT around it and keeps only the WHERE clause, so that text that
// closes the predicate early ("true) UNION ...", "a = 1 ORDER BY a",
// "true; DROP ...") fails instead of changing the statement. Only
// filters are taken: no subquery, since a shape is one map, filter and
// project over one collection.
func parseWhere(pred string) (sql.Expr, error) {
	st, err := sql.Parse(wherePrefix + pred)
	if err != nil {
		return nil, whereError(pred, err)
	}
	sel, ok := st.(*sql.Select)
	if !ok || sel.Where == nil || len(sel.Items) != 1 || len(sel.From) != 1 || sel.Distinct || sel.GroupBy != nil ||
		sel.Having != nil || sel.OrderBy != nil || sel.Limit != nil || sel.Offset != nil || sel.AsOf != nil {
		return nil, fmt.Errorf("%w: where=%q is not one predicate", ErrBadParameter, pred)
	}
	var bad error
	sql.Inspect(sel.Where, func(n sql.Node) bool {
		switch n.(type) {
		case *sql.Subquery, *sql.Exists, *sql.Select:
			bad = fmt.Errorf("%w: where: subqueries are not supported in a shape", ErrBadParameter)
		}
		return bad == nil
	})
	if bad != nil {
		return nil, bad
	}
	return sel.Where, nil
}

// wherePrefix is the text parseWhere parses a predicate after.
const wherePrefix = "SELECT * FROM t WHERE "

// whereError is the parse error of where=pred as the client sees it: the
// parser's SQLSTATE (42601 for a syntax error, as over pgwire) and its
// position, which counts characters of pred rather than of the SELECT
// parseWhere wraps it in. One without a position is text that holds
// several statements ("true; DROP ..."): not one predicate, as others
// that close it early are.
func whereError(pred string, err error) error {
	var pe *sql.ParseError
	if !errors.As(err, &pe) || pe.Position == 0 {
		return fmt.Errorf("%w: where=%q is not one predicate", ErrBadParameter, pred)
	}
	e := pgwire.Errorf(pe.SQLState(), "where: %s", pe.Message)
	if pos := pe.Position - utf8.RuneCountInString(wherePrefix); pos > 0 {
		e = e.WithPosition(pos)
	}
	return e
}

// collectionName reads the {collection} path segment or collection
// parameter, both unescaped already: name, schema.name or
// database.schema.name, each part taken as written; a name that holds a
// dot is reached as database.schema.name (its dots are the name's).
func collectionName(seg string) (sql.ObjectName, error) {
	if !utf8.ValidString(seg) {
		return sql.ObjectName{}, fmt.Errorf("%w: collection %q", ErrBadParameter, seg)
	}
	parts := strings.SplitN(seg, ".", 3)
	for _, p := range parts {
		if p == "" {
			return sql.ObjectName{}, fmt.Errorf("%w: collection %q", ErrBadParameter, seg)
		}
	}
	switch len(parts) {
	case 1:
		return sql.ObjectName{Name: parts[0]}, nil
	case 2:
		return sql.ObjectName{Schema: parts[0], Name: parts[1]}, nil
	}
	return sql.ObjectName{Database: parts[0], Schema: parts[1], Name: parts[2]}, nil
}

// resumeStart is the AS OF and SNAPSHOT a resume from frontier after
// starts with: AS OF after-1 WITH (SNAPSHOT = false) yields exactly the
// updates at after and later (SUBSCRIBE-SPEC.md, "Timestamps"). A resume
// from 0 has seen nothing: it starts with the snapshot at 0.
func resumeStart(after uint64) (asOf uint64, snapshot bool) {
	if after == 0 {
		return 0, true
	}
	return after - 1, false
}

// statement is the SUBSCRIBE the request stands for, as a pgwire client
// would write it: SUBSCRIBE coll, or SUBSCRIBE (SELECT cols FROM coll
// WHERE pred) for a shape, with the envelope, WITH (SNAPSHOT, PROGRESS),
// AS OF and UP TO. PROGRESS is always on: progress rows become the
// stream's progress events.
func (req *request) statement() (*sql.Subscribe, error) {
	name, err := collectionName(req.collection)
	if err != nil {
		return nil, err
	}
	st := &sql.Subscribe{Relation: name, Envelope: sql.Envelope{Kind: req.envelope, Key: req.key}}
	if req.columns != nil || req.where != nil {
		sel := &sql.Select{From: []sql.TableExpr{&sql.TableName{Name: name}}, Where: req.where}
		if req.columns == nil {
			sel.Items = []sql.SelectItem{{Expr: &sql.Star{}}}
		}
		for _, c := range req.columns {
			sel.Items = append(sel.Items, sql.SelectItem{Expr: &sql.ColumnRef{Column: c}})
		}
		st.Relation, st.Query = sql.ObjectName{}, sel
	}
	snapshot, asOf := req.snapshot, req.asOf
	if req.after != nil {
		t, snap := resumeStart(*req.after)
		asOf, snapshot = &t, snap
	}
	st.Options = []sql.Option{{Name: "SNAPSHOT", Value: &sql.BoolLit{Value: snapshot}}, {Name: "PROGRESS"}}
	if asOf != nil {
		st.AsOf = &sql.AsOf{Expr: &sql.NumberLit{Text: strconv.FormatUint(*asOf, 10)}}
	}
	if req.upTo != nil {
		st.UpTo = &sql.NumberLit{Text: strconv.FormatUint(*req.upTo, 10)}
	}
	return st, nil
}
