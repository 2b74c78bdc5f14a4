package adapter

import (
	"context"
	"strconv"
	"time"

	"github.com/shardtail/shardtail/catalog"
	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/stmtlog"
	"github.com/shardtail/shardtail/subscribe"
)

// subInfo is a running subscribe as mz_internal.mz_subscriptions shows it.
type subInfo struct {
	id         uint64
	session    uint32
	createdAt  time.Time
	objectIDs  []uint64
	path       string
	collection string
	asOf       uint64
	transport  string
	sub        subscribe.Subscription
}

// trackedSubscription unregisters itself when closed, and ends its
// statement's record with how it ended (stmtlog.go).
type trackedSubscription struct {
	subscribe.Subscription
	c    *Coordinator
	info *subInfo

	// Owned by the session's goroutine, like Next and Close.
	s *Session
	p *subscribePlan
	e *stmtlog.Execution // the statement's record; nil when not sampled
	// ended: an ending error was recorded; lastCtx is the last Next's
	// context (a cancel or a disconnect shows there).
	ended   bool
	lastCtx context.Context
}

func (t *trackedSubscription) Next(ctx context.Context, max int) ([]formatter.Row, error) {
	rows, err := t.Subscription.Next(ctx, max)
	if t.e != nil {
		t.noteNext(ctx, err)
	}
	return rows, err
}

// Ready is the subscription's, when it has one (see readyOf).
func (t *trackedSubscription) Ready(wake func()) bool { return readyOf(t.Subscription, wake) }

func (t *trackedSubscription) Close() {
	if t.e != nil {
		t.closeRecord()
	}
	t.Subscription.Close()
	t.c.mu.Lock()
	_, ok := t.c.subs[t.info.id]
	delete(t.c.subs, t.info.id)
	t.c.mu.Unlock()
	if ok {
		t.c.metrics.subscribes.WithLabelValues(t.info.path).Dec()
		t.c.metrics.byTransport.WithLabelValues(t.info.transport).Dec()
	}
}

// trackSubscribe registers a started subscription for mz_subscriptions and
// attaches it to e, its statement's record, which then stays open until
// the subscription ends.
func (c *Coordinator) trackSubscribe(s *Session, p *subscribePlan, src *catalog.Item, path string, asOf uint64, sub subscribe.Subscription, e *stmtlog.Execution) subscribe.Subscription {
	var ids []uint64
	if src != nil {
		ids = append(ids, src.ID)
	}
	if p.item != nil && (src == nil || p.item.ID != src.ID) {
		ids = append([]uint64{p.item.ID}, ids...)
	}
	// The collection is the one read: a view's or a query's (a shape's)
	// input, which referenced_object_ids lists with the view.
	collection := p.relationName()
	if src != nil {
		collection = src.Name
	}
	c.mu.Lock()
	c.nextSubID++
	info := &subInfo{id: c.nextSubID, session: s.id, createdAt: time.Now(), objectIDs: ids, path: path,
		collection: collection, asOf: asOf, transport: s.transport, sub: sub}
	if info.transport == "" {
		info.transport = "pgwire"
	}
	c.subs[info.id] = info
	c.mu.Unlock()
	c.metrics.subsTotal.WithLabelValues(path).Inc()
	c.metrics.subscribes.WithLabelValues(path).Inc()
	c.metrics.byTransportTotal.WithLabelValues(info.transport).Inc()
	c.metrics.byTransport.WithLabelValues(info.transport).Inc()
	strategy := strategyPersist
	switch {
	case src == nil:
		strategy = strategyConstant
	case path == "dataflow":
		strategy = strategyStandard
	}
	e.SetStrategy(strategy)
	e.StartSubscribe(path, info.collection, asOf)
	return &trackedSubscription{Subscription: sub, c: c, info: info, s: s, p: p, e: e.Hold()}
}

// subscriptionsColumns are mz_internal.mz_subscriptions' columns:
// Materialize's, then ours.
var subscriptionsColumns = []row.Column{
	{Name: "id", Type: row.TypeText},
	{Name: "session_id", Type: row.TypeText},
	{Name: "cluster_id", Type: row.TypeText},
	{Name: "created_at", Type: row.TypeTimestampTZ},
	{Name: "referenced_object_ids", Type: row.TypeText},
	{Name: "path", Type: row.TypeText},
	{Name: "collection", Type: row.TypeText},
	{Name: "as_of", Type: row.TypeNumeric},
	{Name: "delivered_frontier", Type: row.TypeNumeric, Nullable: true},
	{Name: "queued_bytes", Type: row.TypeInt8, Nullable: true},
}

// subscriptionRows are mz_internal.mz_subscriptions' rows: this process's
// subscribes and, in a tail process, the upstream's (where the subscribes
// it proxied run).
func (s *Session) subscriptionRows(ctx context.Context) ([]row.Row, error) {
	rows := s.c.subscriptionRows()
	if !s.c.isProxy() {
		return rows, nil
	}
	up, err := s.upstreamRows(ctx, "SELECT * FROM mz_internal.mz_subscriptions", subscriptionsColumns)
	if err != nil {
		return nil, err
	}
	return append(rows, up...), nil
}

func (c *Coordinator) subscriptionRows() []row.Row {
	c.mu.Lock()
	defer c.mu.Unlock()
	var rows []row.Row
	for _, info := range c.subs {
		ids := "{"
		for i, id := range info.objectIDs {
			if i > 0 {
				ids += ","
			}
			ids += "u" + strconv.FormatUint(id, 10)
		}
		ids += "}"
		frontier := row.Numeric(strconv.FormatUint(info.sub.Frontier(), 10))
		queued := info.sub.QueuedBytes()
		rows = append(rows, row.Row{"s" + strconv.FormatUint(info.id, 10), strconv.FormatUint(uint64(info.session), 10), "u1",
			row.TimestampTZ(info.createdAt.UnixMicro()), ids, info.path, info.collection,
			row.Numeric(strconv.FormatUint(info.asOf, 10)), frontier, queued})
	}
	return rows
}
