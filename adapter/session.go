package adapter

import (
	"context"
	"errors"
	"io"
	"iter"
	"strings"

	"github.com/google/uuid"

	"github.com/shardtail/shardtail/catalog"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/txnwal"
	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/proxy"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
	"github.com/shardtail/shardtail/stmtlog"
)

// txState is a session's transaction state.
type txState int

const (
	txIdle     txState = iota // autocommit: each statement its own transaction
	txBlock                   // inside BEGIN ... COMMIT
	txFailed                  // a statement in the block failed
	txImplicit                // an extended-protocol batch or multi-statement query
)

// Session is one client connection's SQL state: session variables, the
// transaction, its buffered writes, and cursors. pgwire calls it from the
// connection's goroutine only.
type Session struct {
	c    *Coordinator
	id   uint32
	user string
	// sid identifies the session in the statement log, across processes
	// (id is only unique in this one).
	sid uuid.UUID
	// current is the record of the statement running (nil between
	// statements or when not sampled).
	current *stmtlog.Execution
	// unsettled are records of results closed without an outcome (see
	// settle).
	unsettled []*stmtlog.Execution
	// vars are the variables the session SET (or its startup packet did);
	// system variables not in it follow ALTER SYSTEM.
	vars varList
	// txVars are the variables a transaction's end restores; nil outside
	// a transaction that saved any.
	txVars *txVars

	tx txState
	// txBytes are the bytes of txWrites, counted in the memory budget
	// (holdTxWrite) until the transaction ends.
	txBytes int64
	// writes buffered in the transaction block, applied at COMMIT.
	txWrites []pendingWrite
	// txRead maps the shards the transaction's UPDATEs and DELETEs read
	// to the time of the first read: COMMIT fails if another commit
	// wrote one of them after it.
	txRead map[string]uint64
	// txReads counts reads in the block (SUBSCRIBE must be the only one,
	// txSubscribe).
	txReads int
	// upReads counts the block's reads proxied upstream (a proxy
	// process), upSubscribe whether one was a SUBSCRIBE.
	upReads int

	// The session's flags, together so that they share one word (a
	// session is kept by each of thousands of idle subscribers).
	//
	// gone is set when the session closes, so that what it still runs
	// ends as aborted. txMulti marks the implicit transaction of a
	// multi-statement simple query: its UPDATEs and DELETEs are buffered
	// too (see bufferModify). txWrote marks a block that ran a write
	// statement, whatever rows it touched: no SUBSCRIBE may follow.
	gone, varsSaved, varsLocal, txMulti, txSubscribe, upSubscribe, txWrote bool

	cursors map[string]*cursor

	// up is the upstream connection of a proxy process's session;
	// password is what the client logged in with, passed on to it.
	up       *proxy.Conn
	password string
	// transport is the client's protocol for the metrics: "" for pgwire,
	// or what Coordinator.Subscribe was given.
	transport string
}

// pendingWrite is a write buffered in a transaction block.
type pendingWrite struct {
	item    *catalog.Item
	updates []row.Update
}

func newSession(c *Coordinator, info pgwire.ConnInfo) *Session {
	// vars and cursors stay nil until used: most sessions (idle
	// subscribers) never set a variable.
	s := &Session{c: c, id: info.ProcessID, user: info.User, password: info.Password, sid: uuid.New()}
	if s.id == 0 {
		s.id = c.nextConnID.Add(1)
	}
	for k, v := range info.Options {
		if name := strings.ToLower(k); validateVar(name, v) == nil {
			if _, ok := varDefaults[name]; ok {
				s.setVar(name, v, false)
			}
		}
	}
	return s
}

// Parameters implements pgwire.Session.
func (s *Session) Parameters() map[string]string {
	p := map[string]string{}
	for _, k := range reportedVars {
		p[k] = s.sessionVar(k)
	}
	return p
}

// TxStatus implements pgwire.Session.
func (s *Session) TxStatus() pgwire.TxStatus {
	switch s.tx {
	case txBlock:
		return pgwire.TxInBlock
	case txFailed:
		return pgwire.TxFailed
	}
	return pgwire.TxIdle
}

// Query implements pgwire.Session: the simple protocol.
func (s *Session) Query(ctx context.Context, text string) iter.Seq2[pgwire.Result, error] {
	return func(yield func(pgwire.Result, error) bool) {
		q := s.QuerySteps(ctx, text)
		defer q.Stop()
		for {
			res, err := q.Next(ctx)
			if res == nil && err == nil {
				return
			}
			if !yield(res, err) || err != nil {
				return
			}
		}
	}
}

// QuerySteps implements pgwire.QueryStepper: Query's statements, run one
// at a time as pgwire pulls them, so that it can leave a subscribe waiting
// for changes between two batches.
func (s *Session) QuerySteps(ctx context.Context, text string) pgwire.QuerySteps {
	q := &querySteps{s: s, text: text}
	stmts, err := sql.ParseAll(text)
	if err != nil {
		s.fail()
		q.err = parseError(err)
		return q
	}
	if s.c.isProxy() && len(stmts) > 1 && s.wholeUpstream(ctx, stmts) {
		// One upstream query keeps them one implicit transaction there.
		q.pull, q.stopPull = iter.Pull2(func(yield func(pgwire.Result, error) bool) {
			s.proxyQuery(ctx, text, yield)
		})
		return q
	}
	q.stmts = stmts
	// Several statements in one query run in one implicit transaction,
	// as in PostgreSQL, and a COMMIT or ROLLBACK among them starts another
	// for the statements after it (querySteps.Next).
	q.implicit = len(stmts) > 1
	return q
}

// querySteps is a simple query's statements, run one per Next.
type querySteps struct {
	s        *Session
	text     string
	stmts    []sql.Statement
	next     int  // index in stmts of the next statement
	implicit bool // statements outside a block run in an implicit transaction
	// began is whether the open transaction began in this query (an
	// implicit one, or a block its BEGIN turned one into): an error rolls
	// it back.
	began bool
	done  bool
	err   error // the parse error, returned by the first Next
	// pull and stopPull step a proxy's one upstream query of several
	// statements.
	pull     func() (pgwire.Result, error, bool)
	stopPull func()
}

// Next implements pgwire.QuerySteps.
func (q *querySteps) Next(ctx context.Context) (pgwire.Result, error) {
	s := q.s
	switch {
	case q.done:
		return nil, nil
	case q.err != nil:
		q.done = true
		return nil, q.err
	case q.pull != nil:
		res, err, ok := q.pull()
		if !ok || err != nil {
			q.done = true
		}
		return res, err
	case q.next == len(q.stmts):
		q.done = true
		if q.implicit && s.tx == txImplicit {
			return nil, s.commit(ctx)
		}
		return nil, nil
	}
	st := q.take()
	if q.implicit && s.tx == txIdle {
		s.tx, s.txMulti = txImplicit, true
		q.began = true
	}
	var res pgwire.Result
	var err error
	stText := q.text
	if len(q.stmts) > 1 {
		stText = st.String()
	}
	if s.c.isProxy() {
		res, err = s.runProxied(ctx, st, stText)
	} else {
		res, err = s.execute(ctx, st, stText, func(ctx context.Context) (pgwire.Result, error) {
			return s.run(ctx, st, nil, nil)
		})
	}
	if err != nil {
		q.fail()
		return nil, err
	}
	return res, nil
}

// fail ends the query's transaction after a statement's error: one that
// began in the query rolls back, a block begun before it fails (25P02
// until it ends).
func (q *querySteps) fail() {
	q.done = true
	q.s.fail()
	if q.began && q.s.tx != txIdle {
		q.s.rollback()
	}
}

// take returns the next statement and lets go of its syntax tree here:
// the result of a subscribe keeps this query, parked, for hours, and
// only the plan keeps what it needs of the tree.
func (q *querySteps) take() sql.Statement {
	st := q.stmts[q.next]
	q.stmts[q.next] = nil
	q.next++
	return st
}

// Stop implements pgwire.QuerySteps.
func (q *querySteps) Stop() {
	if !q.done && q.pull == nil {
		// Left early: the last result failed while being sent (an error
		// evaluating a row, a bad COPY row) or the client is gone. The
		// statement failed as if it had failed to start.
		q.fail()
	}
	q.done = true
	if q.stopPull != nil {
		q.stopPull()
	}
}

// parseError gives a parse error its position for ErrorResponse.
func parseError(err error) error {
	var pe *sql.ParseError
	if errors.As(err, &pe) {
		return &Error{Code: pe.SQLState(), Message: pe.Message, Pos: pe.Position}
	}
	return err
}

// fail marks the transaction block failed after an error. Its writes can
// no longer commit: they and their bytes in the memory budget go now, not
// when the client ends the block.
func (s *Session) fail() {
	if s.tx == txBlock {
		s.tx = txFailed
		s.dropTxWrites()
	}
}

// dropTxWrites discards the transaction's buffered writes and gives their
// bytes back to the memory budget (holdTxWrite).
func (s *Session) dropTxWrites() {
	s.txWrites = nil
	s.c.memTxn.Add(-s.txBytes)
	s.txBytes = 0
}

// run plans and executes one statement.
func (s *Session) run(ctx context.Context, st sql.Statement, params []row.Datum, formats []int16) (pgwire.Result, error) {
	p, err := s.plan(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	return p.exec(ctx, params, formats)
}

// Prepare implements pgwire.Session: Parse.
func (s *Session) Prepare(ctx context.Context, text string, paramOIDs []uint32) (pgwire.Statement, error) {
	stmts, err := sql.ParseAll(text)
	if err != nil {
		return nil, parseError(err)
	}
	switch len(stmts) {
	case 0:
		return &preparedStatement{s: s, empty: true}, nil
	case 1:
	default:
		return nil, errorf(codeSyntax, "cannot insert multiple commands into a prepared statement")
	}
	both := ""
	if s.c.isProxy() {
		switch s.route(ctx, stmts[0]) {
		case routeUpstream:
			return s.prepareUpstream(ctx, stmts[0], text, paramOIDs)
		case routeBoth:
			both = text
		}
	}
	p, err := s.plan(ctx, stmts[0], paramOIDs)
	if err != nil {
		return nil, err
	}
	return &preparedStatement{s: s, stmt: stmts[0], text: text, plan: p, paramOIDs: p.paramOIDs(paramOIDs), seq: s.c.catalog.Seq(), both: both}, nil
}

// Sync implements pgwire.Session.
func (s *Session) Sync(ctx context.Context, failed bool) error {
	s.settle(stmtlog.StatusSuccess, "")
	if s.tx == txImplicit {
		if failed {
			s.rollback()
			return nil
		}
		return s.commit(ctx)
	}
	if failed {
		s.fail()
	}
	return nil
}

// Close implements pgwire.Session.
func (s *Session) Close() error {
	s.gone = true
	s.settle(stmtlog.StatusAborted, pgwire.ErrClientGone.Error())
	// A transaction the client left open ends with it: its cursors, and
	// its writes and their bytes in the memory budget (holdTxWrite).
	s.rollback()
	if s.up != nil {
		s.up.Close()
		s.up = nil
	}
	s.c.forgetSession(s)
	return nil
}

func (s *Session) closeCursors() {
	for name, cur := range s.cursors {
		cur.close()
		delete(s.cursors, name)
	}
}

// beginImplicit starts the implicit transaction of an extended-protocol
// batch.
func (s *Session) beginImplicit() {
	if s.tx == txIdle {
		s.tx = txImplicit
	}
}

// inTx reports whether a transaction (block or implicit) is open.
func (s *Session) inBlock() bool { return s.tx == txBlock || s.tx == txFailed }

// commit applies the buffered writes, all at one timestamp, and ends the
// transaction. A write to a table dropped since fails the whole commit
// before anything is written, and so does a write by another commit to a
// table the transaction's UPDATEs or DELETEs read, after they read it
// (40001).
func (s *Session) commit(ctx context.Context) error {
	writes, readAt := s.txWrites, s.txRead
	s.endTx()
	if len(writes) == 0 {
		return nil
	}
	if err := s.droppedDuringTx(ctx, writes); err != nil {
		return err
	}
	byShard := map[string][]row.Update{}
	for _, w := range writes {
		byShard[w.item.Shard] = append(byShard[w.item.Shard], w.updates...)
	}
	if _, err := s.c.storage.CommitTxn(ctx, byShard, readAt); err != nil {
		if errors.Is(err, txnwal.ErrConflict) {
			return errSerialization
		}
		// A DROP that landed after the check: nothing was written.
		if derr := s.droppedDuringTx(ctx, writes); derr != nil {
			return derr
		}
		return err
	}
	s.c.metrics.writes.Inc()
	return nil
}

// droppedDuringTx returns the error of a write to a table dropped since
// it was written (42P01), or nil (or the catalog's read error).
func (s *Session) droppedDuringTx(ctx context.Context, writes []pendingWrite) error {
	if err := s.c.catalog.Refresh(ctx); err != nil {
		return err
	}
	for _, w := range writes {
		if cur := s.c.catalog.State().ItemByID(w.item.ID); cur == nil {
			return errorf(codeUndefinedTable, "unknown catalog item '%s' (dropped during the transaction)", w.item.Name)
		}
	}
	return nil
}

// rollback discards the transaction, including the SETs made in it.
func (s *Session) rollback() {
	if s.varsSaved {
		s.vars = s.txVars.saved
		s.varsLocal = false
	}
	s.endTx()
}

// txVars are the variables a transaction saved.
type txVars struct {
	// saved are the variables at BEGIN (Session.varsSaved), restored by
	// ROLLBACK.
	saved varList
	// base are the variables without the transaction's SET LOCALs
	// (Session.varsLocal), restored when it ends.
	base varList
}

// saveVars returns the transaction's txVars, allocating them.
func (s *Session) saveVars() *txVars {
	if s.txVars == nil {
		s.txVars = &txVars{}
	}
	return s.txVars
}

func (s *Session) endTx() {
	s.tx = txIdle
	if s.varsLocal {
		s.vars = s.txVars.base
	}
	s.txVars, s.varsSaved, s.varsLocal = nil, false, false
	s.txMulti = false
	s.dropTxWrites()
	s.txRead = nil
	s.txReads, s.upReads = 0, 0
	s.txSubscribe, s.upSubscribe, s.txWrote = false, false, false
	s.closeCursors()
}

// preparedStatement implements pgwire.Statement.
type preparedStatement struct {
	s         *Session
	stmt      sql.Statement
	text      string
	plan      *plan
	paramOIDs []uint32
	empty     bool
	// seq is the catalog version the plan was made at.
	seq persist.SeqNo
	// both is the statement's text when a proxy process also runs it
	// upstream (transaction control, SET), at each execution.
	both string
}

// replan plans the statement again when the catalog changed since it was
// prepared (a table dropped and created again), as PostgreSQL re-plans
// cached statements. A changed result shape is an error, as there.
func (p *preparedStatement) replan(ctx context.Context) error {
	if p.s.c.isProxy() && isSubscribe(p.stmt) {
		// As at Parse (Session.route): see the upstream's latest catalog.
		if err := p.s.c.catalog.Sync(ctx); err != nil {
			p.s.c.log.Warn("proxy: sync catalog", "err", err)
		}
	}
	seq := p.s.c.catalog.Seq()
	if seq == p.seq {
		return nil
	}
	np, err := p.s.plan(ctx, p.stmt, p.paramOIDs)
	if err != nil {
		return err
	}
	if !sameFields(np.fields, p.plan.fields) {
		return errorf(codeFeatureNotSupp, "cached plan must not change result type")
	}
	p.plan, p.seq = np, seq
	return nil
}

func sameFields(a, b []pgwire.Field) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].TypeOID != b[i].TypeOID {
			return false
		}
	}
	return true
}

func (p *preparedStatement) ParamOIDs() []uint32 { return p.paramOIDs }

func (p *preparedStatement) Fields() []pgwire.Field {
	if p.empty {
		return nil
	}
	return p.plan.fields
}

func (p *preparedStatement) Bind(ctx context.Context, params [][]byte, paramFormats, resultFormats []int16) (pgwire.Portal, error) {
	if p.empty {
		return &portal{empty: true}, nil
	}
	if err := p.replan(ctx); err != nil {
		return nil, err
	}
	if len(params) != len(p.paramOIDs) {
		return nil, errorf("08P01", "bind message supplies %d parameters, but prepared statement requires %d", len(params), len(p.paramOIDs))
	}
	vals := make([]row.Datum, len(params))
	for i, raw := range params {
		if raw == nil {
			continue
		}
		t, ok := pgrepr.TypeFromOID(p.paramOIDs[i])
		if !ok {
			t = row.TypeText
		}
		var err error
		if len(paramFormats) > i && paramFormats[i] == pgwire.FormatBinary {
			vals[i], err = pgrepr.ParseBinary(t, raw)
		} else {
			vals[i], err = pgrepr.ParseText(t, string(raw))
		}
		if err != nil {
			return nil, err
		}
	}
	return &portal{s: p.s, stmt: p.stmt, text: p.text, plan: p.plan, params: vals, formats: append([]int16(nil), resultFormats...), both: p.both}, nil
}

func (p *preparedStatement) Close() {}

// portal implements pgwire.Portal.
type portal struct {
	s       *Session
	stmt    sql.Statement
	text    string
	plan    *plan
	params  []row.Datum
	formats []int16
	empty   bool
	both    string // see preparedStatement.both
}

func (p *portal) Execute(ctx context.Context) (pgwire.Result, error) {
	if p.empty {
		return emptyResult{}, nil
	}
	p.s.beginImplicit()
	if p.s.tx == txFailed && !isTxEnd(p.stmt) {
		return nil, errInFailedTx
	}
	run := func(ctx context.Context) (pgwire.Result, error) { return p.plan.exec(ctx, p.params, p.formats) }
	var res pgwire.Result
	var err error
	if p.both != "" {
		if err := p.s.alsoUpstream(ctx, p.stmt, p.both); err != nil {
			p.s.fail()
			return nil, err
		}
		res, err = run(ctx) // logged upstream, where it runs too
	} else {
		res, err = p.s.execute(ctx, p.stmt, p.text, run)
	}
	if err != nil {
		p.s.fail()
	}
	return res, err
}

func (p *portal) Close() {}

type emptyResult struct{}

func (emptyResult) Describe() pgwire.Description           { return pgwire.Description{Kind: pgwire.ResultEmpty} }
func (emptyResult) Next(context.Context) ([][]byte, error) { return nil, io.EOF }
func (emptyResult) Tag() string                            { return "" }
func (emptyResult) Close()                                 {}

var errInFailedTx = errorf(codeInFailedTx, "current transaction is aborted, commands ignored until end of transaction block")

func isTxEnd(st sql.Statement) bool {
	switch st.(type) {
	case *sql.Commit, *sql.Rollback:
		return true
	}
	return false
}

// ensure interfaces
var (
	_ pgwire.Session   = (*Session)(nil)
	_ pgwire.Statement = (*preparedStatement)(nil)
	_ pgwire.Portal    = (*portal)(nil)
)
