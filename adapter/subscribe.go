package adapter

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/shardtail/shardtail/catalog"
	"github.com/shardtail/shardtail/dataflow"
	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/txnwal"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
	"github.com/shardtail/shardtail/stmtlog"
	"github.com/shardtail/shardtail/storage"
	"github.com/shardtail/shardtail/subscribe"
)

// subscribePlan is a planned SUBSCRIBE: its output and how to start it.
// Planning does no work; start chooses the timestamp and begins reading,
// so a cursor's errors surface at its first FETCH.
type subscribePlan struct {
	s      *Session
	st     *sql.Subscribe
	item   *catalog.Item
	source *catalog.Item // the collection read (item itself unless a view/query)
	q      *queryPlan
	opts   *formatter.Options
	snap   bool
	asOf   *asOfClause // nil: none
	upToAt *constant   // UP TO; nil: none
	params []uint32    // the parameter types the statement inferred
}

// planSubscribeStmt resolves a SUBSCRIBE's relation and output shape.
// paramOIDs are the client's parameter types (extended protocol), nil for
// none.
func (s *Session) planSubscribeStmt(st *sql.Subscribe, paramOIDs []uint32) (*subscribePlan, error) {
	p := &subscribePlan{s: s, st: st, snap: true, opts: &formatter.Options{}}
	for _, o := range st.Options {
		b, err := o.Bool()
		if err != nil {
			return nil, errorf(codeInvalidParamValue, "%v", err)
		}
		switch o.Name {
		case "SNAPSHOT":
			p.snap = b
		case "PROGRESS":
			p.opts.Progress = b
		default:
			return nil, errorf(codeSyntax, "unexpected option %s", o.Name)
		}
	}
	var err error
	if st.Query != nil {
		if p.q, err = s.planQuery(st.Query, paramOIDs); err != nil {
			return nil, err
		}
		p.source = p.q.input
	} else {
		if name, err := resolveName(st.Relation); err == nil {
			if _, ok := systemRelations[name]; ok {
				return nil, errorf(codeInternal, "'%s' cannot be subscribed to because it is a system table", name)
			}
		}
		var it *catalog.Item
		if st.RelationID != "" {
			it, err = s.lookupID(st.RelationID)
		} else {
			it, err = s.lookup(st.Relation)
		}
		if err != nil {
			return nil, err
		}
		if err := s.checkPrivilege(it, "SELECT"); err != nil {
			return nil, err
		}
		p.item = it
		if it.Kind == catalog.KindView {
			if p.q, err = s.planView(it); err != nil {
				return nil, err
			}
			p.source = p.q.input
		} else {
			p.source = it
		}
	}
	if p.q != nil {
		if p.q.orderBy != nil || p.q.limit != nil {
			return nil, errorf(codeFeatureNotSupp, "ORDER BY and LIMIT in SUBSCRIBE are not supported")
		}
		p.opts.Relation = p.q.schema()
	} else {
		p.opts.Relation = p.item.Schema
	}
	rel := p.opts.Relation
	switch st.Envelope.Kind {
	case sql.EnvelopeUpsert, sql.EnvelopeDebezium:
		p.opts.Envelope = formatter.EnvelopeUpsert
		if st.Envelope.Kind == sql.EnvelopeDebezium {
			p.opts.Envelope = formatter.EnvelopeDebezium
		}
		for _, k := range st.Envelope.Key {
			i := rel.Index(k)
			if i < 0 {
				return nil, errorf(codeUndefinedColumn, "column \"%s\" does not exist", k)
			}
			p.opts.Keys = append(p.opts.Keys, i)
		}
	}
	cols := p.opts.Columns()
	for _, o := range st.WithinTimestampOrderBy {
		ref, ok := o.Expr.(*sql.ColumnRef)
		if !ok || !ref.Table.IsZero() {
			return nil, errorf(codeFeatureNotSupp, "WITHIN TIMESTAMP ORDER BY supports only column names")
		}
		idx := -1
		first := 1
		if p.opts.Progress {
			first = 2
		}
		for i := first; i < len(cols); i++ {
			if cols[i].Name == ref.Column {
				idx = i - first
			}
		}
		if idx < 0 {
			return nil, errorf(codeUndefinedColumn, "column \"%s\" does not exist", ref.Column)
		}
		p.opts.Order = append(p.opts.Order, formatter.OrderItem{Col: idx, Desc: o.Desc, NullsFirst: nullsFirst(o)})
	}
	// AS OF and UP TO last, so that a parameter only they use is typed by
	// them (see constScope).
	params := paramOIDs
	if p.q != nil {
		params = p.q.params
	}
	scope := constScope(params)
	if p.asOf, err = compileAsOf(st.AsOf, scope); err != nil {
		return nil, err
	}
	if p.upToAt, err = compileTimestamp(st.UpTo, scope); err != nil {
		return nil, err
	}
	p.params = paramOIDsOf(scope)
	return p, nil
}

// paramOIDs are the parameter types the subscribe inferred.
func (p *subscribePlan) paramOIDs() []uint32 { return p.params }

// fields describes the subscribe's output columns.
func (p *subscribePlan) fields(formats []int16) []pgwire.Field {
	cols := p.opts.Columns()
	out := make([]pgwire.Field, len(cols))
	for i, c := range cols {
		out[i] = pgwire.Field{Name: c.Name, TypeOID: c.Type.OID(), TypeSize: c.Type.Size(), TypeMod: c.Type.Typmod(), Format: int16(resultFormat(formats, i))}
	}
	return out
}

// relationName is how errors name the subscribed relation; "" for a
// query that reads no collection.
func (p *subscribePlan) relationName() string {
	switch {
	case p.item != nil:
		return p.item.Name
	case p.source != nil:
		return p.source.Name
	}
	return ""
}

// start chooses the timestamps and starts the subscription with the
// parameter values params on the fast path when eligible, else on the
// dataflow path. e is the record of the statement the subscription
// belongs to (nil when not sampled).
func (p *subscribePlan) start(ctx context.Context, params []row.Datum, e *stmtlog.Execution) (subscribe.Subscription, error) {
	s := p.s
	if p.q != nil && p.q.values != nil {
		return p.startConstant(params, e)
	}
	src := s.c.catalog.State().ItemByID(p.source.ID)
	if src == nil {
		return nil, errDropped(p.relationName())
	}
	readAt := time.Now()
	asOf, upTo, err := p.timestamps(ctx, src, params)
	if err != nil {
		return nil, err
	}
	req := p.request(src, asOf, upTo)
	// Live from now: what is below the clock was complete before the
	// statement began (timestamps are the oracle's, epoch milliseconds).
	req.ReadAt, req.Live = readAt, uint64(readAt.UnixMilli())
	var bound *mfp
	if p.q != nil {
		bound = p.q.mfp.bind(params)
	}
	if !takesFastPath(p, s.fastPath()) {
		return s.c.trackSubscribe(s, p, src, "dataflow", asOf, p.startDataflow(req, bound, nil), e), nil
	}
	if bound != nil && !bound.identity() {
		req.Shape = bound.shape()
	}
	ts, err := s.c.tails.Subscribe(ctx, req)
	if err != nil {
		return nil, mapPersistErr(err, p.relationName())
	}
	return s.c.trackSubscribe(s, p, src, "fast", asOf, ts, e), nil
}

// takesFastPath is the fast-path eligibility rule, the one place both
// routing (which SUBSCRIBEs a tail process serves itself) and start (which
// path serves it) decide it, with enable_subscribe_persist_fast_path on:
// a SUBSCRIBE of a table, source or materialized view, bare or through a
// map/filter/project (a query, a view of one, nested: a shape the
// collection's SharedTail evaluates once for all its subscribers). Every
// query that plans is one MFP over one input (joins, aggregates and
// DISTINCT do not plan yet); what stays on the dataflow path is a query
// that reads no collection (VALUES) and one that reads now(), whose value
// would make every subscribe a shape of its own.
func takesFastPath(p *subscribePlan, flag bool) bool {
	if !flag || p.source == nil {
		return false
	}
	return p.q == nil || (p.q.values == nil && !p.q.mfp.usesNow())
}

// request is the subscription contract's request for reading src (nil for
// a constant input) from asOf to upTo.
func (p *subscribePlan) request(src *catalog.Item, asOf uint64, upTo *uint64) subscribe.Request {
	req := subscribe.Request{
		AsOf:             asOf,
		AsOfAtLeast:      p.asOfAtLeast(),
		UpTo:             upTo,
		Snapshot:         p.snap,
		Output:           p.opts,
		MaxBufferedBytes: p.s.maxBufferedBytes(),
		MaxResultSize:    p.s.maxResultSize(),
	}
	// A timestamp held back whole cannot be shed: one larger than the
	// process's memory budget fails the subscribe (mapErr names the budget).
	if b := p.budget(); b > 0 && b < req.MaxResultSize {
		req.MaxResultSize = b
	}
	if src != nil {
		req.Shard = src.Shard
	}
	return req
}

// budget is the process's memory budget in bytes, 0 when unlimited.
func (p *subscribePlan) budget() int64 { return p.s.c.cfg.Tail.Budget.Limit() }

// startConstant starts a subscribe to a query that reads no collection
// (SUBSCRIBE (VALUES ...), a view of one) on the dataflow path with a
// constant input. Its rows hold from the beginning of time, so every AS
// OF is valid (there is no since); without one it reads now, like a
// collection's latest complete time.
func (p *subscribePlan) startConstant(params []row.Datum, e *stmtlog.Execution) (subscribe.Subscription, error) {
	s := p.s
	if p.item != nil && s.c.catalog.State().ItemByID(p.item.ID) == nil {
		return nil, errDropped(p.relationName())
	}
	asOf := max(uint64(time.Now().UnixMilli()), s.c.oracle.Peek())
	if p.asOf != nil {
		t, err := evalTimestamp(p.asOf.at, params)
		if err != nil {
			return nil, err
		}
		asOf = t
	}
	upTo, err := p.upTo(asOf, params)
	if err != nil {
		return nil, err
	}
	rows, err := p.q.values.updates(params, asOf)
	if err != nil {
		return nil, err
	}
	return s.c.trackSubscribe(s, p, nil, "dataflow", asOf, p.startDataflow(p.request(nil, asOf, upTo), p.q.mfp.bind(params), rows), e), nil
}

// startDataflow starts the private pipeline of the dataflow path for req
// through the bound MFP m (nil for a bare collection), reading constant
// instead of a shard when req.Shard is "".
func (p *subscribePlan) startDataflow(req subscribe.Request, m *mfp, constant []row.Update) *dataflow.Subscribe {
	cfg := dataflow.SubscribeConfig{Request: req, Persist: p.s.c.persist, Constant: constant, Purpose: "subscribe",
		// The same rate as the fast path's listen reader.
		DowngradeInterval: p.s.c.cfg.Tail.DowngradeInterval, Budget: p.s.c.cfg.Tail.Budget}
	if m != nil {
		cfg.MFP = m
	}
	return dataflow.StartSubscribe(cfg)
}

// asOfAtLeast reports whether the subscribe may start later than the AS OF
// chosen for it: the statement named no AS OF (any time after its
// acknowledged writes will do) or AS OF AT LEAST.
func (p *subscribePlan) asOfAtLeast() bool { return p.asOf == nil || p.asOf.atLeast }

// timestamps selects AS OF and UP TO (SUBSCRIBE-SPEC.md, "Timestamps")
// with the statement's parameter values.
func (p *subscribePlan) timestamps(ctx context.Context, src *catalog.Item, params []row.Datum) (uint64, *uint64, error) {
	s := p.s
	// A linearizable read of the shard's frontiers: every write acknowledged
	// before this statement is below the upper. Concurrent subscribes in
	// this process share one consensus read.
	state, err := s.c.persist.ReadState(ctx, src.Shard)
	if err != nil {
		return 0, nil, mapPersistErr(err, p.relationName())
	}
	asOf, err := s.chooseTimestamp(ctx, src, state, p.asOf, params, state.Since)
	if err != nil {
		return 0, nil, err
	}
	upTo, err := p.upTo(asOf, params)
	return asOf, upTo, err
}

// upTo evaluates UP TO (nil without one) with the statement's parameter
// values; it must not be below asOf.
func (p *subscribePlan) upTo(asOf uint64, params []row.Datum) (*uint64, error) {
	if p.upToAt == nil {
		return nil, nil
	}
	u, err := evalTimestamp(p.upToAt, params)
	if err != nil {
		return nil, err
	}
	if u < asOf {
		return nil, errorf(codeDataException, "subscription lower (\"as of\") bound is beyond its upper (\"up to\") bound: %d < %d", u, asOf)
	}
	return &u, nil
}

// errAsOfNotValid is a read's AS OF below its collection's since: the
// position is no longer in history (HistoryLost reports it). Its DETAIL is
// the one a subscribe that lost its position gets, so a resuming client
// tells both apart from a resumable failure the same way.
func errAsOfNotValid(asOf, since uint64) *Error {
	e := errorf(codeInternal, "Timestamp (%d) is not valid for all inputs: [Antichain { elements: [%d] }]", asOf, since)
	e.historyLost = true
	e.detail = subscribe.DetailHistoryLost
	return e
}

func errDropped(name string) *Error {
	return errorf(codeUndefinedObject, "relation '%s' was dropped", qualified(name))
}

// mapPersistErr turns persist errors from reading or writing relation
// into client errors: the relation's own conditions (dropped, compacted
// past), then storage faults as storageError maps them for every statement.
func mapPersistErr(err error, relation string) error {
	switch {
	case errors.Is(err, persist.ErrShardTombstoned), errors.Is(err, subscribe.ErrDropped),
		errors.Is(err, txnwal.ErrNotRegistered), errors.Is(err, storage.ErrNotOwned): // a write racing DROP TABLE
		return errDropped(relation)
	case errors.Is(err, persist.ErrSinceAdvanced):
		var se *persist.SinceError
		if errors.As(err, &se) {
			return errAsOfNotValid(se.AsOf, se.Since)
		}
	}
	return storageError(err)
}

// subscribeNotice is the NOTICE a bare SUBSCRIBE sends after
// RowDescription.
func (s *Session) subscribeNotice() []byte {
	hint := ""
	if app, _ := s.getVar("application_name"); app == "psql" {
		hint = "Wrap your SUBSCRIBE statement in `COPY (SUBSCRIBE ...) TO STDOUT`."
	}
	return notice("01000", "streaming SUBSCRIBE rows directly requires a client that does not buffer output", hint)
}

func (s *Session) planSubscribe(st *sql.Subscribe, paramOIDs []uint32) (*plan, error) {
	p, err := s.planSubscribeStmt(st, paramOIDs)
	if err != nil {
		return nil, err
	}
	return &plan{fields: p.fields(nil), params: p.paramOIDs(), exec: func(ctx context.Context, params []row.Datum, formats []int16) (pgwire.Result, error) {
		if err := s.noteRead(true); err != nil {
			return nil, err
		}
		sub, err := p.start(ctx, params, s.current)
		if err != nil {
			return nil, err
		}
		return &subscribeResult{p: p, sub: sub, enc: formatter.NewEncoder(p.opts, formats), fields: p.fields(formats),
			pre: [][]byte{s.subscribeNotice()}}, nil
	}}, nil
}

// noteUpstreamRead records a read a tail process proxied upstream in the
// transaction block, for noteRead's rule on the statements it runs here.
// A read here and a read upstream are checked against each other before
// the upstream one is sent.
func (s *Session) noteUpstreamRead(subscribe bool) error {
	if !s.inBlock() {
		return nil
	}
	if (subscribe && s.txReads > 0) || (!subscribe && s.txSubscribe) {
		return errorf(codeInvalidTxState, "SUBSCRIBE in transactions must be the only read statement")
	}
	s.upReads++
	s.upSubscribe = s.upSubscribe || subscribe
	return nil
}

// noteRead enforces that a SUBSCRIBE is the only read of its transaction,
// and, as Materialize does, that it follows no write: it could not show
// the transaction's writes, which wait for COMMIT (the client gets 25000
// instead of a snapshot without them).
func (s *Session) noteRead(subscribe bool) error {
	if !s.inBlock() {
		return nil
	}
	if subscribe && s.txWrote {
		return errWriteOnlyTx
	}
	if (subscribe && s.txReads+s.upReads > 0) || (!subscribe && (s.txSubscribe || s.upSubscribe)) {
		return errorf(codeInvalidTxState, "SUBSCRIBE in transactions must be the only read statement")
	}
	s.txReads++
	s.txSubscribe = s.txSubscribe || subscribe
	return nil
}

// subscribeResult streams a bare SUBSCRIBE as DataRows.
type subscribeResult struct {
	p      *subscribePlan
	sub    subscribe.Subscription
	enc    *formatter.Encoder
	fields []pgwire.Field
	pre    [][]byte
	n      int
	buf    []byte
}

func (r *subscribeResult) Describe() pgwire.Description {
	return pgwire.Description{Kind: pgwire.ResultRows, Fields: r.fields}
}

func (r *subscribeResult) Next(ctx context.Context) ([][]byte, error) {
	if r.pre != nil {
		pre := r.pre
		r.pre = nil
		return pre, nil
	}
	rows, err := r.sub.Next(ctx, 0)
	if err != nil {
		return nil, r.p.mapErr(err)
	}
	r.n += len(rows)
	return formatter.Messages(r.enc, rows, &r.buf), nil
}

// Ready implements pgwire.ReadyResult.
func (r *subscribeResult) Ready(wake func()) bool {
	if r.pre != nil {
		return true
	}
	return readyOf(r.sub, wake)
}

// readyOf is Ready(wake) of a subscription or result that has it
// (pgwire.ReadyResult: the fast path's subscriber, the results over it),
// else true: its Next then waits as usual.
func readyOf(x any, wake func()) bool {
	if r, ok := x.(interface{ Ready(func()) bool }); ok {
		return r.Ready(wake)
	}
	return true
}

func (r *subscribeResult) Tag() string { return fmt.Sprintf("SELECT %d", r.n) }
func (r *subscribeResult) Close()      { r.sub.Close() }

func (p *subscribePlan) mapErr(err error) error {
	var rs *formatter.ResultSizeError
	switch {
	case errors.Is(err, io.EOF):
		return io.EOF
	case errors.As(err, &rs) && rs.Max < p.s.maxResultSize() && rs.Max == p.budget():
		return errMemoryBudget(rs.Max)
	case errors.As(err, &rs):
		// A timestamp held back whole to order or envelope it: the same
		// error as any result over max_result_size.
		return errResultTooLarge(rs.Max)
	}
	return mapPersistErr(err, p.relationName())
}

// copySubscribeResult streams COPY (SUBSCRIBE ...) TO STDOUT.
type copySubscribeResult struct {
	p      *subscribePlan
	sub    subscribe.Subscription
	enc    *formatter.CopyEncoder
	format formatter.CopyFormat
	header bool
	done   bool
	n      int
	// buf holds the runs the last Next encoded itself (formatter.StreamRuns):
	// pgwire has written them by the next call of Next or Ready.
	buf formatter.RunBuffer
	// runs is the list of the last batch, reused by the next: pgwire
	// keeps neither past the next Next.
	runs [][]byte
}

// maxKeptRuns is the longest run list a COPY subscribe keeps between
// batches: enough for a tick's progress row and a few batches.
const maxKeptRuns = 64

func (r *copySubscribeResult) Describe() pgwire.Description {
	fields := r.p.fields(nil)
	f := pgwire.FormatText
	if r.format == formatter.CopyBinary {
		f = pgwire.FormatBinary
	}
	for i := range fields {
		fields[i].Format = f
	}
	return pgwire.Description{Kind: pgwire.ResultCopyOut, Fields: fields, CopyFormat: f}
}

func (r *copySubscribeResult) Next(ctx context.Context) ([][]byte, error) {
	if r.done {
		return nil, io.EOF
	}
	// pgwire has written the last batch: a Next that waits (pgwire did
	// not park: an Execute with a row limit) holds none of its bytes.
	r.buf.Release()
	clear(r.runs)
	rows, err := r.sub.Next(ctx, 0)
	if errors.Is(err, io.EOF) {
		r.done = true
		var b []byte
		if !r.header {
			b = r.enc.AppendHeader(b)
		}
		if b = r.enc.AppendTrailer(b); len(b) > 0 {
			return [][]byte{pgwire.AppendCopyData(nil, b)}, nil
		}
		return nil, io.EOF
	}
	if err != nil {
		return nil, r.p.mapErr(err)
	}
	r.n += len(rows)
	// Runs, not Messages: COPY has no row limit, so a snapshot piece goes
	// to pgwire as the one span of its shared encoding, written to the
	// socket without a copy or a slice header per row.
	clear(r.runs) // let go of the last batch's bytes
	if cap(r.runs) > maxKeptRuns {
		r.runs = nil // a catch-up's long list is not kept for the ticks after it
	}
	r.runs = formatter.AppendStreamRuns(r.runs[:0], r.enc, rows, &r.buf)
	runs := r.runs
	if !r.header && len(runs) > 0 {
		// Binary COPY's signature (or HEADER's line of names) travels
		// with the first row, as PostgreSQL sends it.
		r.header = true
		if hdr := r.enc.AppendHeader(nil); len(hdr) > 0 {
			// runs may be shared (cached) bytes: build a new list, the
			// first row's message again with the header, then the rest.
			first := pgwire.AppendCopyData(nil, r.enc.AppendRow(hdr, rows[0]))
			rest := runs[0][1+binary.BigEndian.Uint32(runs[0][1:]):]
			out := [][]byte{first}
			if len(rest) > 0 {
				out = append(out, rest)
			}
			runs = append(out, runs[1:]...)
		}
	}
	return runs, nil
}

// Ready implements pgwire.ReadyResult.
func (r *copySubscribeResult) Ready(wake func()) bool {
	// The last batch is written (pgwire calls Ready between Nexts): a
	// session about to wait holds no piece's encoding meanwhile.
	r.buf.Release()
	if r.done {
		return true
	}
	return readyOf(r.sub, wake)
}

func (r *copySubscribeResult) Tag() string { return fmt.Sprintf("COPY %d", r.n) }

func (r *copySubscribeResult) Close() {
	r.buf.Release()
	r.sub.Close()
}

// cursor is a DECLAREd cursor. A cursor over SUBSCRIBE starts its
// subscription at the first FETCH; rows of a batch that a FETCH did not
// take wait for the next.
type cursor struct {
	name    string
	sub     *subscribePlan
	query   *plan // a cursor over SELECT
	running subscribe.Subscription
	// params are the DECLARE's parameter values (extended protocol).
	params []row.Datum
	// exec is the DECLARE's record, handed off to the cursor: it ends
	// when the cursor's subscription does.
	exec    *stmtlog.Execution
	pending []formatter.Row
	done    bool
	// failed is an error a FETCH met polling after it had rows: it
	// returned them, and the next FETCH returns the error.
	failed error
	// selectRows buffers a SELECT cursor's rows.
	selectRes pgwire.Result
	selectBuf [][]byte
}

func (c *cursor) close() {
	if c.running != nil {
		c.running.Close()
	}
	c.exec.Release()
	if c.selectRes != nil {
		c.selectRes.Close()
	}
}

func (s *Session) planDeclare(st *sql.DeclareCursor, paramOIDs []uint32) (*plan, error) {
	var sub *subscribePlan
	var query *plan
	switch q := st.Query.(type) {
	case *sql.Subscribe:
		p, err := s.planSubscribeStmt(q, paramOIDs)
		if err != nil {
			return nil, err
		}
		sub = p
	default:
		p, err := s.plan(context.Background(), st.Query, nil)
		if err != nil {
			return nil, err
		}
		query = p
	}
	var params []uint32
	if sub != nil {
		params = sub.paramOIDs()
	}
	return &plan{params: params, exec: func(ctx context.Context, values []row.Datum, _ []int16) (pgwire.Result, error) {
		// A new cursor each time: a prepared DECLARE may run again. Its
		// subscription starts at the first FETCH, with these parameters.
		cur := &cursor{name: st.Name, sub: sub, query: query, params: values}
		if !s.inBlock() {
			return nil, errorf(codeNoActiveSQLTx, "DECLARE CURSOR can only be used in transaction blocks")
		}
		if _, ok := s.cursors[st.Name]; ok {
			return nil, errorf(codeDuplicateCursor, "cursor %q already exists", st.Name)
		}
		if cur.sub != nil {
			if err := s.noteRead(true); err != nil {
				return nil, err
			}
		}
		if s.cursors == nil {
			s.cursors = map[string]*cursor{}
		}
		if cur.sub != nil {
			cur.exec = s.current.Handoff()
		}
		s.cursors[st.Name] = cur
		return command("DECLARE CURSOR"), nil
	}}, nil
}

func (s *Session) planClose(st *sql.CloseCursor) (*plan, error) {
	return execOnly(func(ctx context.Context) (pgwire.Result, error) {
		if st.All {
			s.closeCursors()
			return command("CLOSE CURSOR"), nil
		}
		cur, ok := s.cursors[st.Name]
		if !ok {
			return nil, errorf(codeInvalidCursor, "cursor %q does not exist", st.Name)
		}
		cur.close()
		delete(s.cursors, st.Name)
		return command("CLOSE CURSOR"), nil
	}), nil
}

// maxFetchTimeout is the longest FETCH TIMEOUT accepted.
const maxFetchTimeout = 24 * time.Hour

func (s *Session) planFetch(st *sql.Fetch) (*plan, error) {
	var timeout *time.Duration
	for _, o := range st.Options {
		if o.Name != "TIMEOUT" {
			return nil, errorf(codeSyntax, "unexpected option %s", o.Name)
		}
		d, err := evalInterval(o.Value)
		if err != nil {
			return nil, err
		}
		if d < 0 || d > maxFetchTimeout {
			return nil, errorf(codeInvalidParamValue, "timeout out of range")
		}
		timeout = &d
	}
	cur, ok := s.cursors[st.Name]
	var fields []pgwire.Field
	if ok {
		if cur.sub != nil {
			fields = cur.sub.fields(nil)
		} else {
			fields = cur.query.fields
		}
	}
	return &plan{fields: fields, exec: func(ctx context.Context, _ []row.Datum, formats []int16) (pgwire.Result, error) {
		cur, ok := s.cursors[st.Name]
		if !ok {
			return nil, errorf(codeInvalidCursor, "cursor %q does not exist", st.Name)
		}
		count := int(st.Count)
		if st.All {
			count = -1
		}
		if cur.sub == nil {
			return s.fetchSelect(ctx, cur, count, formats)
		}
		rows, err := s.fetch(ctx, cur, count, timeout)
		if err != nil {
			return nil, err
		}
		var buf []byte
		msgs := formatter.Messages(formatter.NewEncoder(cur.sub.opts, formats), rows, &buf)
		var size int64
		for _, m := range msgs {
			size += int64(len(m))
		}
		if limit := s.maxResultSize(); size > limit {
			return nil, errResultTooLarge(limit)
		}
		cur.exec.AddResult(int64(len(rows)), size)
		return fetchResult(cur.sub.fields(formats), msgs, len(rows)), nil
	}}, nil
}

// fetchPollBytes bounds the rows a FETCH without TIMEOUT takes by polling
// after its first ones. A fast-path cursor's poll reads the snapshot's
// next piece from the shard (that history is ready, not waited for): a
// FETCH ALL on a new cursor over a large collection must not read its
// snapshot whole into one result, nor one over a stream that never pauses
// poll on forever. The dataflow path's pipeline reads its snapshot about
// as far ahead of the client (its snapshotAhead).
const fetchPollBytes = 4 << 20

// fetch takes rows from a SUBSCRIBE cursor with FETCH's semantics
// (SUBSCRIBE-SPEC.md, "Cursors"). count < 0 means ALL. Without TIMEOUT,
// what is ready is every row the subscription hands out without waiting
// for new data (pollReady), up to count.
func (s *Session) fetch(ctx context.Context, cur *cursor, count int, timeout *time.Duration) ([]formatter.Row, error) {
	if count == 0 {
		return nil, nil
	}
	if cur.running == nil && !cur.done {
		sub, err := cur.sub.start(ctx, cur.params, cur.exec)
		if err != nil {
			cur.exec.End(outcome(ctx, err))
			return nil, err
		}
		cur.running = sub
	}
	var out []formatter.Row
	take := func() {
		n := len(cur.pending)
		if count > 0 {
			n = min(n, count-len(out))
		}
		out = append(out, cur.pending[:n]...)
		cur.pending = cur.pending[n:]
	}
	full := func() bool { return count > 0 && len(out) >= count }
	take()
	if cur.failed != nil && len(out) == 0 {
		return nil, cur.failed
	}
	if full() || cur.done || cur.failed != nil {
		return out, nil
	}
	wait := ctx
	if timeout != nil {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	polled := int64(0)
	for !full() {
		if len(out) > 0 && timeout == nil {
			// Without TIMEOUT, return what is ready once there is
			// something: take what arrived already, without waiting,
			// until nothing more is (a poll on the fast path takes one
			// step of its subscriber: the snapshot's end, the window's
			// batches, the queue's), the subscribe completed, or the
			// polls took fetchPollBytes.
			rows, err := pollReady(cur.running)
			if err != nil && !errors.Is(err, io.EOF) {
				// The rows taken are the client's: the error waits for
				// the next FETCH, as the end of a failed scan would.
				cur.failed = cur.sub.mapErr(err)
				break
			}
			cur.pending = append(cur.pending, rows...)
			take()
			if errors.Is(err, io.EOF) {
				cur.done = true
			}
			for _, r := range rows {
				polled += r.Size()
			}
			if len(rows) == 0 || cur.done || polled >= fetchPollBytes {
				break
			}
			continue
		}
		rows, err := cur.running.Next(wait, 0)
		switch {
		case errors.Is(err, io.EOF):
			cur.done = true
			return out, nil
		case err != nil && wait.Err() != nil && ctx.Err() == nil:
			return out, nil // TIMEOUT passed
		case err != nil:
			return nil, cur.sub.mapErr(err)
		}
		cur.pending = append(cur.pending, rows...)
		take()
	}
	return out, nil
}

// pollReady returns rows that are ready without waiting for new data:
// the subscription's Next with a done context. The dataflow path returns
// its whole queue; the fast path one step of its subscriber (rows it
// holds, the snapshot's next piece, the window's or the queue's batches)
// and, once the rows are out, io.EOF at UP TO. nil, nil when nothing is
// ready.
func pollReady(sub subscribe.Subscription) ([]formatter.Row, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rows, err := sub.Next(ctx, 0)
	if errors.Is(err, context.Canceled) {
		return nil, nil
	}
	return rows, err
}

// fetchSelect serves FETCH from a cursor over a SELECT.
func (s *Session) fetchSelect(ctx context.Context, cur *cursor, count int, formats []int16) (pgwire.Result, error) {
	if cur.selectRes == nil {
		res, err := cur.query.exec(ctx, nil, formats)
		if err != nil {
			return nil, err
		}
		cur.selectRes = res
	}
	var out [][]byte
	for count < 0 || len(out) < count {
		if len(cur.selectBuf) == 0 {
			if cur.done {
				break
			}
			msgs, err := cur.selectRes.Next(ctx)
			if errors.Is(err, io.EOF) {
				cur.done = true
				break
			}
			if err != nil {
				return nil, err
			}
			for _, m := range msgs {
				cur.selectBuf = append(cur.selectBuf, append([]byte(nil), m...))
			}
			continue
		}
		out = append(out, cur.selectBuf[0])
		cur.selectBuf = cur.selectBuf[1:]
	}
	return fetchResult(cur.query.fields, out, len(out)), nil
}

// fetchResult is FETCH's rows: all known when it returns, a StaticResult
// (sent with its completion in one write).
func fetchResult(fields []pgwire.Field, msgs [][]byte, n int) *pgwire.StaticResult {
	return &pgwire.StaticResult{Desc: pgwire.Description{Kind: pgwire.ResultRows, Fields: fields},
		Messages: msgs, CommandTag: fmt.Sprintf("FETCH %d", n)}
}
