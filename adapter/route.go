package adapter

import (
	"context"
	"errors"
	"io"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/proxy"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// route says where a proxy process runs a statement.
type route int

const (
	routeLocal    route = iota // served here
	routeUpstream              // proxied to the upstream server
	routeBoth                  // applied here and upstream (transactions, SET)
)

// route decides, in a proxy process, where st runs: fast-path SUBSCRIBEs
// and their cursors here; transaction control and session variables in
// both places, so that both sides agree; everything else upstream.
func (s *Session) route(ctx context.Context, st sql.Statement) route {
	if isSubscribe(st) {
		// A SUBSCRIBE served here must see every catalog change the
		// upstream acknowledged before it (a table dropped and created
		// again, a GRANT). On failure the cached catalog serves: the
		// statement then meets the storage's error itself.
		if err := s.c.catalog.Sync(ctx); err != nil {
			s.c.log.Warn("proxy: sync catalog", "err", err)
		}
	}
	switch st := st.(type) {
	case *sql.Subscribe:
		if s.fastPathEligible(st) {
			return routeLocal
		}
	case *sql.DeclareCursor:
		if sub, ok := st.Query.(*sql.Subscribe); ok && s.fastPathEligible(sub) {
			return routeLocal
		}
	case *sql.Copy:
		if sub, ok := st.Query.(*sql.Subscribe); ok && s.fastPathEligible(sub) {
			return routeLocal
		}
	case *sql.Fetch:
		if _, ok := s.cursors[st.Name]; ok {
			return routeLocal
		}
	case *sql.CloseCursor:
		if _, ok := s.cursors[st.Name]; ok || st.All {
			if st.All {
				return routeBoth
			}
			return routeLocal
		}
	case *sql.SetVariable:
		if st.Scope == sql.ScopeSystem {
			// ALTER SYSTEM writes the catalog: the upstream's alone (it
			// checks the privilege; this process follows the catalog).
			return routeUpstream
		}
		return routeBoth
	case *sql.ResetVariable:
		if st.Scope == sql.ScopeSystem {
			return routeUpstream
		}
		return routeBoth
	case *sql.Begin, *sql.Commit, *sql.Rollback:
		return routeBoth
	case *sql.ShowVariable:
		return routeLocal
	case *sql.Select:
		// Constants and session functions (pg_backend_pid,
		// pg_cancel_backend of this proxy's connections) are answered here.
		if len(st.From) == 0 {
			return routeLocal
		}
		// The proxy's own system relations (its subscriptions).
		if len(st.From) == 1 {
			if tn, ok := st.From[0].(*sql.TableName); ok {
				if name, err := resolveName(tn.Name); err == nil {
					if _, ok := systemRelations[name]; ok {
						return routeLocal
					}
				}
			}
		}
	}
	return routeUpstream
}

// fastPathEligible reports whether a SUBSCRIBE takes the fast path here
// (the rule is takesFastPath, which start applies too). One that does not
// plan here (an unknown relation, a missing privilege) is not: the
// upstream reports its error.
func (s *Session) fastPathEligible(st *sql.Subscribe) bool {
	if !s.fastPath() {
		return false
	}
	p, err := s.planSubscribeStmt(st, nil)
	return err == nil && takesFastPath(p, true)
}

// runProxied runs one statement in a proxy process.
func (s *Session) runProxied(ctx context.Context, st sql.Statement, text string) (pgwire.Result, error) {
	switch s.route(ctx, st) {
	case routeLocal:
		return s.execute(ctx, st, text, func(ctx context.Context) (pgwire.Result, error) {
			return s.run(ctx, st, nil, nil)
		})
	case routeBoth:
		if err := s.alsoUpstream(ctx, st, text); err != nil {
			return nil, err
		}
		return s.run(ctx, st, nil, nil)
	}
	if err := s.noteProxied(st); err != nil {
		return nil, err
	}
	if cp, ok := st.(*sql.Copy); ok {
		return s.proxyCopy(ctx, cp, text)
	}
	return s.proxyExec(ctx, text)
}

// noteProxied keeps the transaction block's rules for a statement about to
// run upstream.
func (s *Session) noteProxied(st sql.Statement) error {
	if isWrite(st) && s.inBlock() {
		// The write runs upstream, where the block's local SUBSCRIBE is
		// unknown: the block's rule (noteRead, Session.write) is kept
		// here.
		if s.txSubscribe || s.upSubscribe {
			return errReadOnlyTx
		}
		s.txWrote = true
	}
	if isRead(st) {
		// Reads proxied upstream count for the transaction's read rule too,
		// since a fast-path SUBSCRIBE in the same block runs here.
		return s.noteUpstreamRead(isSubscribe(st))
	}
	return nil
}

// wholeUpstream reports whether a multi-statement query runs upstream as
// one Query: when a statement of it runs upstream (a write), the upstream
// runs them all, those this process would answer itself (a constant
// SELECT, SHOW, a fast-path SUBSCRIBE) too, so that they are one implicit
// transaction there: an error in any of them rolls back every write.
// Unless one also runs here (transaction control, SET) or is a COPY, whose
// data is streamed statement by statement.
func (s *Session) wholeUpstream(ctx context.Context, stmts []sql.Statement) bool {
	up := false
	for _, st := range stmts {
		if _, ok := st.(*sql.Copy); ok {
			return false
		}
		switch s.route(ctx, st) {
		case routeUpstream:
			up = true
		case routeBoth:
			return false
		}
	}
	return up
}

// proxyQuery runs a multi-statement query upstream as one simple Query,
// yielding its results in order.
func (s *Session) proxyQuery(ctx context.Context, text string, yield func(pgwire.Result, error) bool) {
	up, err := s.upstream(ctx)
	if err != nil {
		s.fail()
		yield(nil, err)
		return
	}
	for res, err := range up.Query(ctx, text) {
		if err != nil {
			s.fail()
			yield(nil, err)
			return
		}
		if !yield(res, nil) {
			return
		}
	}
}

func isRead(st sql.Statement) bool {
	switch st := st.(type) {
	case *sql.Select, *sql.Subscribe:
		return true
	case *sql.DeclareCursor:
		return isRead(st.Query)
	}
	return false
}

// isWrite reports whether st writes a table.
func isWrite(st sql.Statement) bool {
	switch st := st.(type) {
	case *sql.Insert, *sql.Update, *sql.Delete:
		return true
	case *sql.Copy:
		return st.Direction == sql.CopyFrom
	}
	return false
}

// isSubscribe reports whether st is a SUBSCRIBE, bare, in a cursor or in a
// COPY.
func isSubscribe(st sql.Statement) bool {
	switch st := st.(type) {
	case *sql.Subscribe:
		return true
	case *sql.DeclareCursor:
		return isSubscribe(st.Query)
	case *sql.Copy:
		return st.Query != nil && isSubscribe(st.Query)
	}
	return false
}

// isUpstreamNeeded reports whether a both-sides statement must open the
// upstream connection (a SET must reach the upstream before statements
// that depend on it run there).
func isUpstreamNeeded(st sql.Statement) bool {
	_, ok := st.(*sql.SetVariable)
	return ok
}

// alsoUpstream runs a statement that applies on both sides (transaction
// control, SET) upstream first, when the session has an upstream
// connection or the statement needs one; its error (a COMMIT that failed
// there) is the statement's, except for ROLLBACK: a block the upstream
// lost is rolled back there already.
func (s *Session) alsoUpstream(ctx context.Context, st sql.Statement, text string) error {
	if !s.hasUpstream() && !isUpstreamNeeded(st) {
		return nil
	}
	err := s.execUpstream(ctx, text)
	switch st.(type) {
	case *sql.Rollback:
		if err != nil && !errors.Is(err, proxy.ErrLostInBlock) {
			s.c.log.Warn("proxy: upstream ROLLBACK", "err", err)
		}
		return nil
	case *sql.Commit:
		if err != nil {
			// The upstream ended its block; so does this side.
			s.rollback()
		}
	}
	return err
}

// execUpstream runs text upstream and discards its result.
func (s *Session) execUpstream(ctx context.Context, text string) error {
	res, err := s.proxyExec(ctx, text)
	if err != nil {
		return err
	}
	defer res.Close()
	for {
		if _, err := res.Next(ctx); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// proxyCopy forwards a COPY, describing its columns from the catalog.
func (s *Session) proxyCopy(ctx context.Context, st *sql.Copy, text string) (pgwire.Result, error) {
	opts, err := parseCopyOptions(st.Options)
	if err != nil {
		return nil, err
	}
	// COPY's columns are described here, from the catalog: read the
	// upstream's latest (the table may have just been created there).
	if err := s.c.catalog.Refresh(ctx); err != nil {
		return nil, err
	}
	format := pgwire.FormatText
	if opts.format == formatter.CopyBinary {
		format = pgwire.FormatBinary
	}
	var cols []row.Column
	switch {
	case st.Query == nil:
		it, err := s.lookup(st.Table)
		if err != nil {
			return nil, err
		}
		idx, err := targetColumns(it, st.Columns)
		if err != nil {
			return nil, err
		}
		for _, i := range idx {
			cols = append(cols, it.Schema.Columns[i])
		}
	default:
		if sel, ok := st.Query.(*sql.Select); ok {
			q, err := s.planQuery(sel, nil)
			if err != nil {
				return nil, err
			}
			cols = q.schema().Columns
		} else if sub, ok := st.Query.(*sql.Subscribe); ok {
			p, err := s.planSubscribeStmt(sub, nil)
			if err != nil {
				return nil, err
			}
			for _, c := range p.opts.Columns() {
				cols = append(cols, row.Column{Name: c.Name, Type: c.Type.RelType()})
			}
		}
	}
	fields := fieldsOf(cols)
	for i := range fields {
		fields[i].Format = format
		fields[i].TypeOID = pgrepr.OID(cols[i].Type)
	}
	if st.Direction == sql.CopyFrom {
		return proxy.CopyIn(s.upstream, text, fields, format), nil
	}
	up, err := s.upstream(ctx)
	if err != nil {
		return nil, err
	}
	return up.CopyOut(ctx, text, fields, format)
}

// prepareUpstream prepares an extended-protocol statement upstream.
func (s *Session) prepareUpstream(ctx context.Context, st sql.Statement, text string, paramOIDs []uint32) (pgwire.Statement, error) {
	up, err := s.upstream(ctx)
	if err != nil {
		return nil, err
	}
	ps, err := up.Prepare(ctx, s.upstream, text, paramOIDs)
	if err != nil {
		return nil, err
	}
	return &upstreamStatement{Statement: ps, s: s, st: st, text: text}, nil
}

// upstreamStatement is an extended-protocol statement a proxy process
// runs upstream. Its portals keep the transaction block's rules here
// (noteProxied), as in the simple protocol; a COPY runs as there
// (proxyCopy): its data is no row result that an upstream portal could
// carry.
type upstreamStatement struct {
	pgwire.Statement
	s    *Session
	st   sql.Statement
	text string
}

// Bind implements pgwire.Statement.
func (u *upstreamStatement) Bind(ctx context.Context, params [][]byte, paramFormats, resultFormats []int16) (pgwire.Portal, error) {
	p, err := u.Statement.Bind(ctx, params, paramFormats, resultFormats)
	if err != nil {
		return nil, err
	}
	return &upstreamPortal{Portal: p, stmt: u}, nil
}

// upstreamPortal is a portal of an upstreamStatement.
type upstreamPortal struct {
	pgwire.Portal
	stmt *upstreamStatement
}

// Execute implements pgwire.Portal.
func (p *upstreamPortal) Execute(ctx context.Context) (pgwire.Result, error) {
	if err := p.stmt.s.noteProxied(p.stmt.st); err != nil {
		return nil, err
	}
	if cp, ok := p.stmt.st.(*sql.Copy); ok {
		return p.stmt.s.proxyCopy(ctx, cp, p.stmt.text)
	}
	return p.Portal.Execute(ctx)
}

// proxyExec runs one statement upstream (simple protocol).
func (s *Session) proxyExec(ctx context.Context, text string) (pgwire.Result, error) {
	up, err := s.upstream(ctx)
	if err != nil {
		return nil, err
	}
	return up.Exec(ctx, text)
}

// upstream returns the session's upstream connection, connecting it first.
func (s *Session) upstream(ctx context.Context) (*proxy.Conn, error) {
	if s.up != nil && s.up.Busy() {
		return nil, proxy.ErrBusy
	}
	if s.up != nil && !s.up.Lost() {
		return s.up, nil
	}
	if s.up != nil && s.inBlock() {
		// The upstream had joined this transaction block and rolled it
		// back when its connection was lost: a new connection must not
		// carry on with the rest of the block as if it were whole.
		return nil, proxy.ErrLostInBlock
	}
	// Lost outside a block: forget it, whether or not a new one connects,
	// so that statements on both sides (BEGIN) run here alone while the
	// upstream is away.
	s.up = nil
	if s.tx == txFailed {
		// A new connection would run the statement outside the failed
		// block, as if it had not failed.
		return nil, errInFailedTx
	}
	cfg := proxy.Config{Addr: s.c.cfg.Upstream, User: s.user, Password: s.password}
	if cfg.Password == "" {
		cfg.Password = s.c.cfg.UpstreamPassword
	}
	cfg.ApplicationName, _ = s.getVar("application_name")
	up, err := proxy.Dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.up = up
	// Opened inside a transaction block: the upstream joins it, so that
	// its statements (a cursor over a dataflow-path SUBSCRIBE) run in the
	// same block and end with it.
	if s.inBlock() {
		if err := up.Begin(ctx); err != nil {
			return nil, err
		}
	}
	return up, nil
}

// hasUpstream reports whether the session has an upstream connection for
// its statements on both sides (transaction control, SET) to go to as
// well. A connection found lost outside a transaction block is dropped
// first, so that BEGIN runs here alone while the upstream is away (the
// upstream joins the block when a statement needs it); one lost inside a
// block is kept, so that the block's statements fail with
// proxy.ErrLostInBlock until it ends.
func (s *Session) hasUpstream() bool {
	if s.up != nil && !s.inBlock() && s.up.Lost() {
		s.up = nil
	}
	return s.up != nil
}

// upstreamRows runs a query upstream and returns its rows, parsed as cols.
func (s *Session) upstreamRows(ctx context.Context, query string, cols []row.Column) ([]row.Row, error) {
	up, err := s.upstream(ctx)
	if err != nil {
		return nil, err
	}
	return up.Rows(ctx, query, cols)
}
