package adapter

import (
	"context"
	"errors"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/sql"
	"github.com/shardtail/shardtail/stmtlog"
	"github.com/shardtail/shardtail/subscribe"
)

// Subscription is a SUBSCRIBE started by Coordinator.Subscribe for a
// transport other than pgwire (the HTTP feed). It was planned, checked,
// routed and started exactly as the same statement sent over pgwire by
// the same role, in a session of its own that it closes with it.
type Subscription struct {
	s   *Session
	p   *subscribePlan
	sub subscribe.Subscription
}

// Subscribe plans and starts st for role user as a pgwire session of that
// role would: privileges, the fast-path rule, timestamps, budgets and
// mz_internal.mz_subscriptions are the same. The role's CONNECTION LIMIT
// counts the subscription as a connection. transport names the client's
// protocol for the metrics ("sse", "ndjson"). A tail process serves only
// the subscribes it would serve itself over pgwire (the fast path); others
// fail with 0A000, since there is no upstream HTTP feed to pass them to.
func (c *Coordinator) Subscribe(ctx context.Context, user, transport string, st *sql.Subscribe) (*Subscription, error) {
	ps, err := c.OpenSession(ctx, pgwire.ConnInfo{User: user})
	if err != nil {
		return nil, err
	}
	s := ps.(*Session)
	s.transport = transport
	sub, err := s.startSubscribe(ctx, st)
	if err != nil {
		s.Close()
		return nil, err
	}
	return sub, nil
}

func (s *Session) startSubscribe(ctx context.Context, st *sql.Subscribe) (*Subscription, error) {
	routed := s.c.isProxy() && s.route(ctx, st) != routeLocal
	// A subscribe that does not plan (a collection the role may not read,
	// or none by that name) fails with its own error, in a tail process
	// too, as its upstream would fail it over pgwire.
	p, err := s.planSubscribeStmt(st, nil)
	if err != nil {
		return nil, err
	}
	if routed {
		return nil, errorf(codeFeatureNotSupp, "a tail process serves only subscribes of its fast path over HTTP; use its upstream for this one")
	}
	// Logged as the SUBSCRIBE it is, under the transport's name; the
	// subscription holds the record until it ends.
	e := s.c.stmtlog.Begin(s.sampleRate(), stmtlog.Record{SessionID: s.sid, ConnectionID: s.id,
		ApplicationName: "shardtail feed (" + s.transport + ")", User: s.user, SQL: st.String(),
		StatementType: statementType(st), MzVersion: s.c.cfg.Version})
	defer e.Release()
	sub, err := p.start(ctx, nil, e)
	if err != nil {
		e.Finish(outcome(ctx, err))
		return nil, err
	}
	return &Subscription{s: s, p: p, sub: sub}, nil
}

// Columns returns the output columns, mz_timestamp first.
func (f *Subscription) Columns() []formatter.Column { return f.p.opts.Columns() }

// Options returns the output shape.
func (f *Subscription) Options() *formatter.Options { return f.p.opts }

// Next is subscribe.Subscription's Next with errors as a pgwire client
// would see them (*Error with its SQLSTATE, *subscribe.BufferError), and
// io.EOF at UP TO.
func (f *Subscription) Next(ctx context.Context, max int) ([]formatter.Row, error) {
	rows, err := f.sub.Next(ctx, max)
	if err != nil {
		return nil, f.p.mapErr(err)
	}
	return rows, nil
}

// WouldWait reports whether Next would wait for new data rather than
// return what is ready (or read it from storage): true when the
// subscription cannot tell (the dataflow path's). Like Next, it is the
// caller's goroutine's to call, before Next.
func (f *Subscription) WouldWait() bool {
	var x any = f.sub
	if t, ok := x.(*trackedSubscription); ok {
		x = t.Subscription
	}
	r, ok := x.(interface{ Ready(wake func()) bool })
	return !ok || !r.Ready(noWake)
}

// noWake is the wake WouldWait gives Ready: Next, which the caller runs
// next, waits by itself.
func noWake() {}

// Close ends the subscription and its session.
func (f *Subscription) Close() {
	f.sub.Close()
	f.s.Close()
}

// HistoryLost reports whether err means the subscribe's position is no
// longer retained, so that it cannot resume where it was: an AS OF below
// the collection's since, or a client fell behind past what the shard
// retains (*subscribe.BufferError with HistoryLost, 53200). The client must
// start over with a new snapshot. A client that fell behind while its
// position is still retained (the dataflow path's backlog, the memory
// budget) is not: it resumes where it was.
func HistoryLost(err error) bool {
	var be *subscribe.BufferError
	var e *Error
	return (errors.As(err, &be) && be.HistoryLost) || (errors.As(err, &e) && e.historyLost)
}

// Readable returns the names of the collections user may SUBSCRIBE to, in
// the order they were created.
func (c *Coordinator) Readable(user string) []string {
	cs := c.catalog.State()
	var out []string
	for _, it := range cs.SortedItems() {
		if hasPrivilege(cs, user, it, "SELECT") && checkOwnerReads(cs, it, map[uint64]bool{}) == nil {
			out = append(out, it.Name)
		}
	}
	return out
}
