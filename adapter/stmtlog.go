package adapter

import (
	"context"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
	"github.com/shardtail/shardtail/stmtlog"
	"github.com/shardtail/shardtail/subscribe"
)

// execute runs one statement under the statement log. It is the one place
// where a statement's record begins and ends, for both protocols (Query,
// portal.Execute) and, in a tail process, for the statements it runs
// itself (what it proxies, the upstream logs). The record ends when the
// statement's Result is closed, or, when a subscription outlives the
// statement's first reference (a SUBSCRIBE's result, a cursor), when that
// subscription ends (trackedSubscription).
func (s *Session) execute(ctx context.Context, st sql.Statement, text string, run func(context.Context) (pgwire.Result, error)) (pgwire.Result, error) {
	s.settle(stmtlog.StatusSuccess, "")
	if f, ok := st.(*sql.Fetch); ok {
		if cur := s.cursors[f.Name]; cur != nil && cur.sub != nil {
			// Counted in the cursor's record (its DECLARE's), not a record
			// of its own: a client's FETCH loop would add one per poll, and
			// a fleet of subscribers a flood.
			return run(ctx)
		}
	}
	app, _ := s.getVar("application_name")
	e := s.c.stmtlog.Begin(s.sampleRate(), stmtlog.Record{SessionID: s.sid, ConnectionID: s.id, ApplicationName: app,
		User: s.user, SQL: loggedText(st, text), StatementType: statementType(st), MzVersion: s.c.cfg.Version})
	if e == nil {
		return run(ctx)
	}
	s.current = e
	res, err := run(ctx)
	s.current = nil
	if err != nil {
		e.Finish(outcome(ctx, err))
		e.Release()
		return nil, err
	}
	if cr, ok := res.(pgwire.CopyInResult); ok {
		return &loggedCopyIn{loggedResult{Result: res, s: s, e: e}, cr}, nil
	}
	return &loggedResult{Result: res, s: s, e: e}, nil
}

// loggedText is the text a statement is logged with: its own, but a role
// statement that sets a password is logged re-rendered with the password
// redacted, so that the log (on the shared storage, and read by
// superusers) never holds a password: only its verifier is stored.
func loggedText(st sql.Statement, text string) string {
	switch r := st.(type) {
	case *sql.CreateRole:
		if opts, ok := redactPassword(r.Options); ok {
			return (&sql.CreateRole{Name: r.Name, Options: opts}).String()
		}
	case *sql.AlterRole:
		if opts, ok := redactPassword(r.Options); ok {
			return (&sql.AlterRole{Name: r.Name, Options: opts}).String()
		}
	}
	return text
}

// redactPassword returns role options with every PASSWORD value replaced
// by '<REDACTED>', and whether there was one.
func redactPassword(opts []sql.Option) ([]sql.Option, bool) {
	if !slices.ContainsFunc(opts, func(o sql.Option) bool { return o.Name == "PASSWORD" }) {
		return nil, false
	}
	opts = slices.Clone(opts)
	for i := range opts {
		if opts[i].Name == "PASSWORD" {
			opts[i].Value = &sql.StringLit{Value: "<REDACTED>"}
		}
	}
	return opts, true
}

// settle ends the records of results closed without an outcome: pgwire
// closes a result whose client went away before it closes the session, and
// a portal the client closed before the session's next message; so the
// next message (a statement, Sync) settles them as success, and the
// session's Close as aborted.
func (s *Session) settle(status, message string) {
	for _, e := range s.unsettled {
		e.Finish(status, message)
		e.Release()
	}
	s.unsettled = nil
}

// outcome is the status and message of a statement that ended with err
// under ctx: a disconnect or shutdown aborted it, a CancelRequest (or
// pg_cancel_backend) canceled it, whatever error the statement returned.
func outcome(ctx context.Context, err error) (string, string) {
	if status, msg, ok := ctxOutcome(ctx); ok {
		return status, msg
	}
	return stmtlog.Outcome(err)
}

// ctxOutcome reports whether ctx, a statement's context, was ended by a
// cancel (canceled) or by the client or server going away (aborted). ctx
// may be nil.
func ctxOutcome(ctx context.Context) (status, message string, ok bool) {
	if ctx == nil || ctx.Err() == nil {
		return "", "", false
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, pgwire.ErrQueryCanceled):
		return stmtlog.StatusCanceled, cause.Error(), true
	case errors.Is(cause, pgwire.ErrClientGone), errors.Is(cause, pgwire.ErrServerClosed):
		return stmtlog.StatusAborted, cause.Error(), true
	}
	return "", "", false
}

// statementTypes caches statementType by AST type.
var statementTypes sync.Map // reflect.Type -> string

// statementType is Materialize's statement_type for st: the AST type's
// name in snake case ("select", "create_table", "declare_cursor").
func statementType(st sql.Statement) string {
	if st == nil {
		return ""
	}
	t := reflect.TypeOf(st)
	if name, ok := statementTypes.Load(t); ok {
		return name.(string)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var b strings.Builder
	for i, r := range t.Name() {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	statementTypes.Store(reflect.TypeOf(st), b.String())
	return b.String()
}

// loggedResult counts a Result's rows and bytes into its record and ends
// the statement's reference when pgwire closes it.
type loggedResult struct {
	pgwire.Result
	s *Session
	e *stmtlog.Execution
	// lastCtx is the context of the last Next: pgwire may see a cancel
	// itself, between two Nexts, and close the result without another.
	lastCtx context.Context
	// rows and size are the rows and bytes Next returned, added to the
	// record once, at Close (before the result's reference is released,
	// so before the record is written): a live subscriber's every
	// delivery would otherwise take the record's lock (2.4 % of the
	// server's CPU at 10,000 subscribers) and touch its cache line.
	rows, size int64
}

func (r *loggedResult) Describe() pgwire.Description {
	d := r.Result.Describe()
	if d.Kind == pgwire.ResultRows || d.Kind == pgwire.ResultCopyOut {
		r.e.AddResult(0, 0) // returns rows, even if none
	}
	return d
}

func (r *loggedResult) Next(ctx context.Context) ([][]byte, error) {
	r.lastCtx = ctx
	msgs, err := r.Result.Next(ctx)
	for _, m := range msgs {
		if len(m) > 0 && (m[0] == 'D' || m[0] == 'd') {
			r.rows++
			r.size += int64(len(m))
		}
	}
	switch {
	case errors.Is(err, io.EOF):
		r.e.Finish(stmtlog.StatusSuccess, "")
	case err != nil:
		r.e.Finish(outcome(ctx, err))
	}
	return msgs, err
}

// Ready implements pgwire.ReadyResult for a result that has Ready (see
// readyOf); for any other it is true, and Next waits as usual.
func (r *loggedResult) Ready(wake func()) bool { return readyOf(r.Result, wake) }

func (r *loggedResult) Close() {
	r.Result.Close()
	if r.rows > 0 {
		r.e.AddResult(r.rows, r.size)
		r.rows, r.size = 0, 0
	}
	if status, msg, ok := ctxOutcome(r.lastCtx); ok {
		r.e.Finish(status, msg)
	}
	if r.e.Finished() || r.e.HandedOff() {
		r.e.Release()
		return
	}
	r.s.unsettled = append(r.s.unsettled, r.e)
}

// loggedCopyIn keeps a COPY FROM result's CopyIn visible to pgwire.
type loggedCopyIn struct {
	loggedResult
	cr pgwire.CopyInResult
}

func (r *loggedCopyIn) CopyIn(ctx context.Context, in io.Reader) error {
	err := r.cr.CopyIn(ctx, in)
	if err != nil {
		r.e.Finish(outcome(ctx, err))
	}
	return err
}

// noteNext records how a subscription ended when its Next returned an
// ending error: the reason on both paths, and the statement's outcome
// unless it had one. A context ending is not the subscription's end (a
// FETCH's TIMEOUT, a poll); the last Next's context tells Close of a
// cancel or a disconnect.
func (t *trackedSubscription) noteNext(ctx context.Context, err error) {
	t.lastCtx = ctx
	if err == nil || t.ended {
		return
	}
	if reason, ok := subscribe.EndReason(err); ok {
		t.end(reason, err)
	}
}

// end closes the subscription's record with reason, err being what
// ended it.
func (t *trackedSubscription) end(reason string, err error) {
	t.ended = true
	switch reason {
	case subscribe.EndUpTo, subscribe.EndClientClosed:
		t.e.End(stmtlog.StatusSuccess, "")
	default:
		t.e.End(stmtlog.Outcome(t.p.mapErr(err)))
	}
	t.endCounters(reason)
}

// closeRecord ends the record of a subscription closed without an ending
// error: canceled, its session gone, or closed by its client. In the last
// case a cursor's record is a success; a result's is settled by what the
// session does next (Session.settle), since a client that went away may
// only show in the session's Close.
func (t *trackedSubscription) closeRecord() {
	if !t.ended {
		reason := subscribe.EndClientClosed
		status, msg, ok := ctxOutcome(t.lastCtx)
		switch {
		case ok:
			if status == stmtlog.StatusCanceled {
				reason = subscribe.EndCanceled
			}
			t.e.End(status, msg)
		case t.s.gone:
			t.e.End(stmtlog.StatusAborted, pgwire.ErrClientGone.Error())
		case t.e.HandedOff():
			t.e.End(stmtlog.StatusSuccess, "")
		}
		t.endCounters(reason)
	}
	t.e.Release()
}

func (t *trackedSubscription) endCounters(reason string) {
	var detaches, resumes int64
	if c, ok := t.Subscription.(subscribe.Counters); ok {
		detaches, resumes = c.Detaches(), c.Resumes()
	}
	t.e.EndSubscribe(reason, t.Subscription.Frontier(), detaches, resumes)
}

// Execution strategies, Materialize's values of execution_strategy.
const (
	strategyPersist  = "persist-fast-path" // read from persist, no dataflow
	strategyStandard = "standard"          // a dataflow
	strategyConstant = "constant"          // computed without reading a collection
)

// statementLogColumns are mz_internal.mz_statement_execution_history's.
var statementLogColumns = stmtlog.Columns

// activityLogColumns are mz_internal.mz_recent_activity_log's: the same
// record, keyed execution_id as in Materialize.
var activityLogColumns = func() []row.Column {
	cols := append([]row.Column(nil), stmtlog.Columns...)
	cols[0].Name = "execution_id"
	return cols
}()

// recentActivityWindow is how far back mz_recent_activity_log reaches, as
// in Materialize.
const recentActivityWindow = 24 * time.Hour

// statementLogRows are the log's rows this session may see: a superuser
// sees every statement, another role only its own.
func (s *Session) statementLogRows(ctx context.Context, since time.Time) ([]row.Row, error) {
	recs, err := s.c.stmtlog.Records(ctx)
	if err != nil {
		return nil, storageError(err)
	}
	r := s.c.catalog.State().Roles[s.user]
	all := r != nil && r.Superuser
	var rows []row.Row
	for i := range recs {
		if (all || recs[i].User == s.user) && !recs[i].BeganAt.Before(since) {
			rows = append(rows, recs[i].Row())
		}
	}
	return rows, nil
}

func (s *Session) statementHistoryRows(ctx context.Context) ([]row.Row, error) {
	return s.statementLogRows(ctx, time.Time{})
}

func (s *Session) recentActivityRows(ctx context.Context) ([]row.Row, error) {
	return s.statementLogRows(ctx, time.Now().Add(-recentActivityWindow))
}
