package dataflow

import (
	"cmp"
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/subscribe"
)

// MFP is a map/filter/project over the rows of a collection: it returns the
// output row and whether the row passes. It must be a pure function of the
// row, so that applying it to updates and re-consolidating is correct.
type MFP interface {
	Apply(r row.Row) (row.Row, bool, error)
}

// SubscribeConfig describes one dataflow-path subscribe: the Request both
// paths take, and what only this path needs to build its pipeline.
type SubscribeConfig struct {
	subscribe.Request
	Persist *persist.Client
	// Constant, with no Shard, is the input instead of a shard: the rows
	// of a query that reads no collection (VALUES), as updates at AsOf.
	// They hold at every time and never change, so the subscribe sends
	// them as its snapshot and then only waits (or completes at UP TO).
	Constant []row.Update
	// MFP maps the shard's rows to the subscribed relation; nil for a bare
	// collection.
	MFP MFP
	// Purpose labels the subscribe's reader in shard state.
	Purpose string
	// DowngradeInterval rate-limits the downgrades of the reader's since as
	// the listen advances: each is a CAS on the shard's state, which every
	// subscriber of the shard shares. 0 means DefaultDowngradeInterval.
	DowngradeInterval time.Duration
	// Budget is the process's memory budget, charged with the rows queued
	// for the client and the snapshot read ahead to be consolidated
	// (holder dataflow), and the timestamp held back to be ordered (holder
	// ordered). The subscribe is a victim of the budget's policy: once the
	// fast path has shed what it could, the largest dataflow subscribes
	// end with a *subscribe.MemoryBudgetError. nil: no budget.
	Budget *membudget.Budget
}

// The dataflow path implements the subscription contract.
var _ subscribe.Subscription = (*Subscribe)(nil)

// DefaultDowngradeInterval is SubscribeConfig.DowngradeInterval's default,
// the fast path's (tail.DefaultDowngradeInterval).
const DefaultDowngradeInterval = time.Second

// Subscribe is the dataflow path: a private pipeline per subscribe. Its own
// goroutine registers a reader, reads and consolidates the snapshot, applies
// the MFP, follows a listen, and formats rows into a queue that the
// client's session drains with Next. It never waits for the client: a
// backlog over the budget ends the subscribe with a *subscribe.BufferError.
type Subscribe struct {
	cfg    SubscribeConfig
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	queue    []formatter.Row // mu
	buffered int64           // mu: estimated bytes in queue
	held     int64           // mu: the batcher's held-back snapshot bytes
	ahead    int64           // mu: snapshot read ahead, consolidated whole
	err      error           // mu: terminal error; io.EOF when complete
	ready    chan struct{}   // mu: closed when queue or err changes
	drained  chan struct{}   // mu: closed when the client takes rows
	frontier uint64          // mu

	// What buffered+ahead and held were when last charged to the budget.
	memQueue, memHeld  *membudget.Holder
	chargedQ, chargedH int64 // mu
	// overBudget is set once the budget's policy ended the subscribe: its
	// bytes are released and nothing more is charged.
	overBudget   bool // mu
	removeVictim func()
}

// StartSubscribe starts the pipeline.
func StartSubscribe(cfg SubscribeConfig) *Subscribe {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Subscribe{cfg: cfg, cancel: cancel, done: make(chan struct{}), ready: make(chan struct{}), drained: make(chan struct{}), frontier: cfg.AsOf,
		memQueue: cfg.Budget.Holder(membudget.HolderDataflow), memHeld: cfg.Budget.Holder(membudget.HolderOrdered)}
	s.removeVictim = cfg.Budget.AddVictim(s)
	go s.run(ctx)
	return s
}

// Frontier is the progress delivered to the queue.
func (s *Subscribe) Frontier() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frontier
}

// QueuedBytes is the estimated bytes queued for the client, and the
// snapshot held back to order or envelope it whole.
func (s *Subscribe) QueuedBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buffered + s.held
}

// MemoryBytes is what the subscribe holds: its queue, the snapshot read
// ahead and held back. Part of membudget.Victim.
func (s *Subscribe) MemoryBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buffered + s.held + s.ahead
}

// EndOverBudget ends the subscribe for the budget's policy: its queue is
// dropped and its bytes released at once, the pipeline stopped, and Next
// returns a *subscribe.MemoryBudgetError. Part of membudget.Victim.
func (s *Subscribe) EndOverBudget(limit int64) {
	s.mu.Lock()
	held := s.buffered + s.held + s.ahead
	s.err = &subscribe.MemoryBudgetError{Held: held, Limit: limit}
	s.overBudget = true
	clear(s.queue)
	s.queue, s.buffered, s.held, s.ahead = nil, 0, 0, 0
	s.charge(0, 0)
	s.signal()
	s.mu.Unlock()
	s.cancel()
}

func (s *Subscribe) run(ctx context.Context) {
	defer close(s.done)
	err := s.pipeline(ctx)
	if err == nil {
		err = io.EOF
	}
	err = subscribe.Dropped(err)
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.signal()
	s.mu.Unlock()
}

func (s *Subscribe) pipeline(ctx context.Context) error {
	if s.cfg.Shard == "" {
		return s.constant(ctx)
	}
	r, err := s.cfg.Persist.OpenReader(ctx, s.cfg.Shard, persist.ReaderOptions{Purpose: s.cfg.Purpose})
	if err != nil {
		return err
	}
	defer r.Close()
	asOf := s.cfg.StartAt(r.Since())
	b := s.cfg.Batcher(asOf)
	done, err := s.sendSnapshot(ctx, b, func() ([]row.Update, error) {
		cur, err := r.Snapshot(ctx, asOf)
		if err != nil {
			return nil, err
		}
		// Every chunk of a collection's snapshot is final, so it streams
		// (unless the output's order or envelope needs the whole snapshot:
		// the batcher holds those rows back). Through an MFP, rows of
		// different chunks may map to one row, so the snapshot is
		// consolidated whole before any of it is sent.
		var all []row.Update
		var ahead int64 // all's bytes
		err = cur.Each(ctx, func(chunk []row.Update) error {
			if s.cfg.MFP == nil {
				rows, err := b.Snapshot(chunk)
				if err != nil {
					return err
				}
				return s.pushSnapshot(ctx, rows, b)
			}
			mapped, err := s.apply(chunk)
			if err != nil {
				return err
			}
			all = append(all, mapped...)
			for _, u := range mapped {
				ahead += u.Size()
			}
			return s.readAhead(ahead)
		})
		return all, err
	})
	if err != nil || done {
		return err
	}
	l, err := r.Listen(ctx, asOf)
	if err != nil {
		return err
	}
	downgrades := downgradeLimiter{every: cmp.Or(s.cfg.DowngradeInterval, DefaultDowngradeInterval)}
	for !b.Done() {
		updates, frontier, err := l.Next(ctx)
		if err != nil {
			return err
		}
		mapped, err := s.apply(updates)
		if err != nil {
			return err
		}
		if s.cfg.MFP != nil {
			mapped = sortByTime(row.Consolidate(mapped))
		}
		if err := s.push(b.Batch(mapped, frontier), b); err != nil {
			return err
		}
		// Let the shard compact what this subscribe has passed.
		if frontier > 1 && downgrades.due() {
			_ = r.Downgrade(ctx, frontier-1)
		}
	}
	return nil
}

// downgradeLimiter lets a downgrade through at most once per interval.
type downgradeLimiter struct {
	every time.Duration
	last  time.Time
}

// due reports whether a downgrade may be made now, and if so counts it.
func (d *downgradeLimiter) due() bool {
	if now := time.Now(); d.last.IsZero() || now.Sub(d.last) >= d.every {
		d.last = now
		return true
	}
	return false
}

// constant serves a constant input: the snapshot at AS OF; then, as
// nothing ever changes, completion at UP TO (every time below it is
// complete already) or, without UP TO, a wait until closed.
func (s *Subscribe) constant(ctx context.Context) error {
	b := s.cfg.Batcher(s.cfg.AsOf)
	done, err := s.sendSnapshot(ctx, b, func() ([]row.Update, error) {
		return s.apply(s.cfg.Constant)
	})
	if err != nil || done {
		return err
	}
	if s.cfg.UpTo != nil {
		return s.push(b.Batch(nil, *s.cfg.UpTo), b)
	}
	<-ctx.Done()
	return ctx.Err()
}

// sendSnapshot sends the batcher's start, then (with SNAPSHOT) what read
// returns, consolidated and sent as one piece, then the end of the
// snapshot. read may send parts of the snapshot itself and return only the
// rest. done reports that the subscribe has nothing more to send (it
// completed at UP TO).
func (s *Subscribe) sendSnapshot(ctx context.Context, b *formatter.Batcher, read func() ([]row.Update, error)) (done bool, err error) {
	if err := s.push(b.Start(), b); err != nil || b.Done() {
		return true, err
	}
	if s.cfg.Snapshot {
		rest, err := read()
		if err != nil {
			return true, err
		}
		rows, err := b.Snapshot(row.Consolidate(rest))
		rest = nil
		if err != nil {
			return true, err
		}
		if err := s.readAhead(0); err != nil { // consolidated: rows now
			return true, err
		}
		if err := s.pushSnapshot(ctx, rows, b); err != nil {
			return true, err
		}
	}
	if err := s.pushSnapshot(ctx, b.SnapshotDone(), b); err != nil || b.Done() {
		return true, err
	}
	return false, nil
}

func (s *Subscribe) apply(updates []row.Update) ([]row.Update, error) {
	return Apply(s.cfg.MFP, updates)
}

func sortByTime(us []row.Update) []row.Update {
	// Consolidate sorted by (row, time); the batcher needs time order.
	row.SortByTime(us)
	return us
}

// snapshotAhead is how far (in queued bytes) the pipeline reads its
// snapshot ahead of the client: the snapshot waits in the shard, under the
// cursor's lease, rather than in memory — a storm of subscribes costs the
// snapshots in flight, not all of them at once. Listen batches are never
// held back: a client that stops reading must run into its budget.
const snapshotAhead = 4 << 20

// pushSnapshot queues snapshot rows no further than snapshotAhead ahead of
// the client: a snapshot held back whole (ordered or enveloped) is handed
// out as the client reads, not queued at once against its budget.
func (s *Subscribe) pushSnapshot(ctx context.Context, rows []formatter.Row, b *formatter.Batcher) error {
	if len(rows) == 0 {
		return s.push(nil, b) // the frontier may have moved
	}
	for len(rows) > 0 {
		n, size := 0, int64(0)
		for n < len(rows) && size < snapshotAhead {
			size += rows[n].Size()
			n++
		}
		if err := s.push(rows[:n], b); err != nil {
			return err
		}
		rows = rows[n:]
		if err := s.waitDrained(ctx, snapshotAhead); err != nil {
			return err
		}
	}
	return nil
}

// waitDrained blocks while more than limit bytes are queued.
func (s *Subscribe) waitDrained(ctx context.Context, limit int64) error {
	for {
		s.mu.Lock()
		if s.buffered <= limit {
			s.mu.Unlock()
			return nil
		}
		drained := s.drained
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-drained:
		}
	}
}

// readAhead records that the pipeline holds n bytes of snapshot read ahead
// of the client, and applies the budget's policy.
func (s *Subscribe) readAhead(n int64) error {
	s.mu.Lock()
	if s.overBudget {
		err := s.err
		s.mu.Unlock()
		return err
	}
	s.ahead = n
	s.charge(s.buffered, s.held)
	s.mu.Unlock()
	s.cfg.Budget.Enforce()
	return nil
}

// push queues rows for the client, failing when the backlog exceeds the
// subscribe's own budget, and applies the process's budget's policy.
func (s *Subscribe) push(rows []formatter.Row, b *formatter.Batcher) error {
	err := s.queueRows(rows, b)
	s.cfg.Budget.Enforce()
	return err
}

// queueRows is push without the budget's policy.
func (s *Subscribe) queueRows(rows []formatter.Row, b *formatter.Batcher) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overBudget {
		return s.err
	}
	s.frontier = b.Frontier()
	s.held = b.Buffered()
	if len(rows) == 0 {
		s.charge(s.buffered, s.held)
		s.signal()
		return nil
	}
	for _, r := range rows {
		s.buffered += r.Size()
	}
	s.queue = append(s.queue, rows...)
	s.charge(s.buffered, s.held)
	s.signal()
	if s.cfg.MaxBufferedBytes > 0 && s.buffered > s.cfg.MaxBufferedBytes {
		return &subscribe.BufferError{Buffered: s.buffered, Max: s.cfg.MaxBufferedBytes}
	}
	return nil
}

// signal wakes a waiting Next. s.mu must be held.
func (s *Subscribe) signal() {
	close(s.ready)
	s.ready = make(chan struct{})
}

// Next returns up to max queued rows (all of them when max <= 0), blocking
// until at least one is queued. After the last row it returns io.EOF when
// the subscribe completed (UP TO), or the error that ended it. A
// *subscribe.BufferError or *subscribe.MemoryBudgetError is returned at
// once, before the queued rows: the client is too far behind to catch up.
func (s *Subscribe) Next(ctx context.Context, max int) ([]formatter.Row, error) {
	for {
		s.mu.Lock()
		var be *subscribe.BufferError
		var me *subscribe.MemoryBudgetError
		if errors.As(s.err, &be) || errors.As(s.err, &me) {
			s.mu.Unlock()
			return nil, s.err
		}
		if n := len(s.queue); n > 0 {
			if max <= 0 || max > n {
				max = n
			}
			out := s.queue[:max:max]
			s.queue = s.queue[max:]
			for _, r := range out {
				s.buffered -= r.Size()
			}
			s.charge(s.buffered, s.held)
			close(s.drained)
			s.drained = make(chan struct{})
			s.mu.Unlock()
			return out, nil
		}
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return nil, err
		}
		ready := s.ready
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ready:
		}
	}
}

// Close stops the pipeline and waits for it; its reader is expired.
func (s *Subscribe) Close() {
	s.removeVictim()
	s.cancel()
	<-s.done
	s.mu.Lock()
	s.buffered, s.held, s.ahead = 0, 0, 0 // the queue goes with the subscribe
	s.charge(0, 0)
	s.mu.Unlock()
}

// charge brings the budget's count of the subscribe's queued (plus read
// ahead) and held bytes to queued and held; to nothing once the budget's
// policy ended it. s.mu must be held.
func (s *Subscribe) charge(queued, held int64) {
	queued += s.ahead
	if s.overBudget {
		queued, held = 0, 0
	}
	s.memQueue.Add(queued - s.chargedQ)
	s.memHeld.Add(held - s.chargedH)
	s.chargedQ, s.chargedH = queued, held
}
