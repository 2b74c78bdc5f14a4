package txnwal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardtail/shardtail/internal/coalesce"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// DefaultKey is the consensus key of the txns shard.
const DefaultKey = "txns"

// Config configures Open.
type Config struct {
	// Key is the txns shard's consensus key; "" means DefaultKey.
	Key string
	// PollInterval is how often the txns shard is re-read when no
	// in-process change or doorbell announced one; 0 means the persist
	// client's PollInterval.
	PollInterval time.Duration
	// AfterCommit, when set, runs after a commit's compare-and-set and
	// before its batches are applied: crash tests stop the process there.
	// nil in production.
	AfterCommit func()
	// Log receives apply failures (retried later); nil means slog.Default.
	Log *slog.Logger
}

// TSFunc issues a commit or tick timestamp at or above min (the txns
// shard's progress), above every one it issued before (catalog.Oracle).
type TSFunc func(ctx context.Context, min uint64) (uint64, error)

// Txns is one process's handle on the txns shard: its cached state, the
// compare-and-set loop of commits, registrations and ticks, and the apply
// of commits to data shards. It implements persist.TxnReads.
type Txns struct {
	p       *persist.Client
	cons    persist.Consensus
	key     string
	cfg     Config
	log     *slog.Logger
	metrics *Metrics

	mu      sync.Mutex
	state   *State                     // mu: newest known
	seq     persist.SeqNo              // mu: its version
	rollup  persist.SeqNo              // mu: the newest rollup at or before seq
	changed chan struct{}              // mu: closed (and replaced) when state advances
	checked map[string]bool            // mu: shards Registered found unregistered after a refresh
	applied map[string]bool            // mu: commits applied to every shard, for the next CAS to tidy
	writers map[string]*persist.Writer // mu
	applyMu map[string]*sync.Mutex     // mu: serializes this process's applies per data shard

	// casTurn makes this process's compare-and-sets take turns (see
	// persist's machine.commit for why).
	casTurn   chan struct{}
	refreshes *coalesce.Reads

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Open loads (creating if absent) the txns shard and starts the task that
// keeps the cache fresh. Close stops it.
func Open(ctx context.Context, p *persist.Client, cfg Config) (*Txns, error) {
	if cfg.Key == "" {
		cfg.Key = DefaultKey
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = p.Config().PollInterval
	}
	t := &Txns{p: p, cons: p.Consensus(), key: cfg.Key, cfg: cfg, log: cfg.Log, metrics: newMetrics(),
		state: newState(), changed: make(chan struct{}), checked: map[string]bool{}, applied: map[string]bool{},
		writers: map[string]*persist.Writer{}, applyMu: map[string]*sync.Mutex{}, casTurn: make(chan struct{}, 1)}
	if t.log == nil {
		t.log = slog.Default()
	}
	t.refreshes = coalesce.New(t.readConsensus)
	if err := t.refreshes.Do(ctx); err != nil {
		return nil, fmt.Errorf("open txns shard: %w", err)
	}
	if t.seqNo() == 0 {
		if _, err := t.cas(ctx, func(s *State) (*State, error) { return s.clone(), nil }); err != nil {
			return nil, fmt.Errorf("create txns shard: %w", err)
		}
	}
	pctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	t.wg.Add(1)
	go t.poll(pctx)
	return t, nil
}

// Close stops the background refresh.
func (t *Txns) Close() error {
	t.cancel()
	t.wg.Wait()
	return nil
}

// Metrics returns the txns shard's metrics.
func (t *Txns) Metrics() *Metrics { return t.metrics }

// poll re-reads the txns shard every PollInterval, or when the consensus
// doorbell rings for it, so that waiters in this process learn of other
// processes' commits and ticks.
func (t *Txns) poll(ctx context.Context) {
	defer t.wg.Done()
	bell := t.p.Doorbell(t.key)
	tick := time.NewTicker(t.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-bell:
		case <-tick.C:
		}
		if err := t.refreshes.Do(ctx); err != nil && ctx.Err() == nil {
			t.log.Warn("txns: refresh", "err", err)
		}
	}
}

// Current returns the newest known state and a channel closed when a newer
// one is known.
func (t *Txns) Current() (*State, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state, t.changed
}

func (t *Txns) seqNo() persist.SeqNo {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seq
}

// install publishes l if it is newer than the cache.
func (t *Txns) install(l loaded) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l.seq <= t.seq {
		return
	}
	t.seq, t.state, t.rollup = l.seq, l.state, l.rollup
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *Txns) loaded() loaded {
	t.mu.Lock()
	defer t.mu.Unlock()
	return loaded{state: t.state, seq: t.seq, rollup: t.rollup}
}

// Refresh reads the txns shard's head: afterwards the cache holds every
// change committed before the call.
func (t *Txns) Refresh(ctx context.Context) (*State, error) {
	if err := t.refreshes.Do(ctx); err != nil {
		return nil, err
	}
	s, _ := t.Current()
	return s, nil
}

func (t *Txns) readConsensus() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := catchUp(ctx, t.cons, t.key, t.loaded())
	if err != nil {
		return err
	}
	t.install(l)
	return nil
}

// cas runs tr on the newest state and commits the result at the next
// version, retrying on conflicts and indeterminate errors (transitions are
// idempotent: a retried one that took effect is a no-op). Commits this
// process applied in full are tidied in the same write. It returns the
// state after the call.
func (t *Txns) cas(ctx context.Context, tr transition) (*State, error) {
	select {
	case t.casTurn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-t.casTurn }()
	t.mu.Lock()
	applied := make(map[string]bool, len(t.applied))
	for id := range t.applied {
		applied[id] = true
	}
	t.mu.Unlock()
	tr = then(tr, tidy(applied))
	for attempt := 0; ; attempt++ {
		l := t.loaded()
		cur, seq := l.state, l.seq
		next, err := tr(cur)
		if errors.Is(err, errNoOp) {
			t.forgetApplied(cur)
			return cur, nil
		}
		if err != nil {
			return nil, err
		}
		data, rollup, err := encodeNext(seq, l.rollup, cur, next)
		if err != nil {
			return nil, err
		}
		var expected *persist.SeqNo
		if seq > 0 {
			expected = &seq
		}
		ok, err := t.cons.CompareAndSet(ctx, t.key, expected, persist.VersionedData{SeqNo: seq + 1, Data: data})
		t.metrics.cas(ok, err)
		if err != nil && !persist.IsIndeterminate(err) {
			return nil, fmt.Errorf("cas txns at %s: %w", seq+1, err)
		}
		if err == nil && ok {
			t.install(loaded{state: next, seq: seq + 1, rollup: rollup})
			t.forgetApplied(next)
			if rollup == seq+1 && seq > 0 {
				// Nothing reads below the newest rollup.
				if _, err := t.cons.Truncate(ctx, t.key, rollup); err != nil {
					t.log.Warn("txns: truncate", "err", err)
				}
			}
			return next, nil
		}
		if attempt > 0 {
			if err := sleepCtx(ctx, time.Duration(min(attempt, 8))*time.Millisecond); err != nil {
				return nil, err
			}
		}
		if _, err := t.Refresh(ctx); err != nil && !persist.IsIndeterminate(err) {
			return nil, err
		}
	}
}

// forgetApplied drops the ids of tidied commits from the applied set.
func (t *Txns) forgetApplied(s *State) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.applied {
		if !slices.ContainsFunc(s.Commits, func(c Commit) bool { return c.ID == id }) {
			delete(t.applied, id)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// Register makes shard a data shard: from now on its writes go through
// Commit and its readers through the txns shard. It is registered at a
// time at or above both the txns progress and its physical upper.
// Registering a registered shard does nothing.
func (t *Txns) Register(ctx context.Context, shard string) error {
	st, err := t.p.State(ctx, shard)
	if err != nil {
		return err
	}
	for {
		cur, _ := t.Current()
		_, err := t.cas(ctx, register(shard, max(cur.Progress, st.Upper)))
		var te *TimestampError
		if !errors.As(err, &te) {
			return err
		}
	}
}

// Forget unregisters a dropped shard.
func (t *Txns) Forget(ctx context.Context, shard string) error {
	_, err := t.cas(ctx, forget(shard))
	t.mu.Lock()
	t.checked[shard] = true
	t.mu.Unlock()
	return err
}

// Commit records a transaction in one compare-and-set of the txns shard:
// the batches (written beforehand, see persist.WrittenBatch) of every data
// shard it writes, at one time from ts. readAt lists the shards a
// read-modify-write read and the time it read them at: the commit fails
// with ErrConflict if another commit wrote one since. Once recorded the
// transaction is durable and atomic; Commit then applies it to each data
// shard before returning. A failed apply is logged, not returned: the
// next reader of the shard, the next tick or a restart completes it.
func (t *Txns) Commit(ctx context.Context, writes []Write, readAt map[string]uint64, tsFn TSFunc) (uint64, error) {
	now := t.p.Now()
	for _, w := range writes {
		if !w.Batch.Empty() && now > t.p.CommitDeadline(w.Batch) {
			return 0, fmt.Errorf("commit: %w", persist.ErrUploadExpired)
		}
	}
	slices.SortFunc(writes, func(a, b Write) int { return cmpString(a.Shard, b.Shard) })
	c := Commit{ID: uuid.NewString(), Writes: writes}
	var st *State
	for {
		cur, _ := t.Current()
		ts, err := tsFn(ctx, cur.Progress)
		if err != nil {
			return 0, err
		}
		c.TS = ts
		st, err = t.cas(ctx, commit(c, readAt))
		var te *TimestampError
		if errors.As(err, &te) {
			continue
		}
		if err != nil {
			return 0, err
		}
		break
	}
	t.metrics.commits.Inc()
	if t.cfg.AfterCommit != nil {
		t.cfg.AfterCommit()
	}
	if t.applyCommits(ctx, st, []Commit{c}) {
		t.mu.Lock()
		t.applied[c.ID] = true
		t.mu.Unlock()
	}
	return c.TS, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// applyCommits applies commits (listed in st) to every shard they write
// and reports whether all of them now are; failures are logged.
func (t *Txns) applyCommits(ctx context.Context, st *State, commits []Commit) bool {
	shards := map[string]bool{}
	for _, c := range commits {
		for _, w := range c.Writes {
			shards[w.Shard] = true
		}
	}
	ok := true
	for shard := range shards {
		if err := t.applyShard(ctx, shard, st); err != nil {
			ok = false
			if ctx.Err() == nil {
				t.log.Warn("txns: apply", "shard", shard, "err", err)
			}
		}
	}
	return ok
}

// Advance is the tick: it applies the commits still listed, then moves
// every registered shard's logical upper to a fresh time from tsFn, in
// one compare-and-set that also tidies what was applied. It returns the
// new progress.
func (t *Txns) Advance(ctx context.Context, tsFn TSFunc) (uint64, error) {
	cur, _ := t.Current()
	if len(cur.Commits) > 0 {
		if t.applyCommits(ctx, cur, cur.Commits) {
			t.mu.Lock()
			for _, c := range cur.Commits {
				t.applied[c.ID] = true
			}
			t.mu.Unlock()
		}
	}
	ts, err := tsFn(ctx, cur.Progress)
	if err != nil {
		return 0, err
	}
	st, err := t.cas(ctx, advance(ts))
	if err != nil {
		return 0, err
	}
	t.metrics.ticks.Inc()
	return st.Progress, nil
}

// Recover completes every commit recorded but not applied (a crash between
// a commit and its applies) and tidies them: the owner's restart.
func (t *Txns) Recover(ctx context.Context) error {
	st, err := t.Refresh(ctx)
	if err != nil {
		return err
	}
	if len(st.Commits) == 0 {
		return nil
	}
	if !t.applyCommits(ctx, st, st.Commits) {
		return fmt.Errorf("recover: some commits could not be applied (see log)")
	}
	t.mu.Lock()
	for _, c := range st.Commits {
		t.applied[c.ID] = true
	}
	t.mu.Unlock()
	_, err = t.cas(ctx, tidy(map[string]bool{}))
	return err
}

// writer returns this process's writer of a data shard.
func (t *Txns) writer(ctx context.Context, shard string) (*persist.Writer, error) {
	t.mu.Lock()
	w := t.writers[shard]
	t.mu.Unlock()
	if w != nil {
		return w, nil
	}
	w, err := t.p.OpenWriter(ctx, shard)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur := t.writers[shard]; cur != nil {
		return cur, nil
	}
	t.writers[shard] = w
	return w, nil
}

func (t *Txns) shardLock(shard string) *sync.Mutex {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.applyMu[shard]
	if m == nil {
		m = &sync.Mutex{}
		t.applyMu[shard] = m
	}
	return m
}

// applyShard appends to shard, in time order, every commit st lists that
// writes it and that its physical upper does not yet cover. Afterwards the
// shard's physical upper (as this process's persist cache knows it) is
// above its LastWrite in st: a reader may take [physical upper, progress)
// to hold no updates. A dropped shard is skipped.
func (t *Txns) applyShard(ctx context.Context, shard string, st *State) error {
	commits := st.writesTo(shard)
	need := st.Shards[shard].LastWrite
	for _, c := range commits {
		need = max(need, c.TS)
	}
	if need == 0 {
		return nil
	}
	cached, err := t.p.CachedState(ctx, shard)
	if errors.Is(err, persist.ErrShardNotFound) {
		return nil // dropped and finalized since: nothing to apply to
	}
	if err != nil {
		return err
	}
	if cached.Upper > need || cached.Tombstone {
		return nil
	}
	mu := t.shardLock(shard)
	mu.Lock()
	defer mu.Unlock()
	cur, err := t.p.State(ctx, shard)
	if err != nil {
		return err
	}
	if cur.Upper > need || cur.Tombstone {
		return nil
	}
	w, err := t.writer(ctx, shard)
	if err != nil {
		return err
	}
	for _, c := range commits {
		batch := c.batchFor(shard)
		for {
			s, err := t.p.CachedState(ctx, shard)
			if err != nil {
				return err
			}
			if s.Tombstone {
				return nil
			}
			if s.Upper > c.TS {
				break
			}
			err = w.AppendWritten(ctx, batch, c.TS, s.Upper)
			var mm *persist.UpperMismatchError
			switch {
			case err == nil:
				t.metrics.applies.Inc()
			case errors.Is(err, persist.ErrShardTombstoned):
				return nil
			case errors.As(err, &mm), persist.IsIndeterminate(err):
				// Another applier (or reader advancing the shard) came
				// first: look again.
				if _, err := t.p.State(ctx, shard); err != nil {
					return err
				}
			default:
				return fmt.Errorf("apply commit at %d: %w", c.TS, err)
			}
		}
	}
	if s, _ := t.p.CachedState(ctx, shard); !s.Tombstone && s.Upper <= need {
		return fmt.Errorf("%w: shard %s at physical upper %d lacks its write at %d", ErrCorruptState, shard, s.Upper, need)
	}
	return nil
}

// batchFor returns the commit's batch for shard.
func (c Commit) batchFor(shard string) persist.WrittenBatch {
	for _, w := range c.Writes {
		if w.Shard == shard {
			return w.Batch
		}
	}
	return persist.WrittenBatch{}
}

// Registered implements persist.TxnReads. A shard unknown to the cache is
// looked up once in the txns shard itself: tables are registered before
// the catalog names them, so a reader never meets one unregistered later.
func (t *Txns) Registered(ctx context.Context, shard string) bool {
	t.mu.Lock()
	_, ok := t.state.Shards[shard]
	checked := t.checked[shard]
	t.mu.Unlock()
	if ok || checked {
		return ok
	}
	st, err := t.Refresh(ctx)
	if err != nil {
		return false
	}
	_, ok = st.Shards[shard]
	if !ok {
		t.mu.Lock()
		t.checked[shard] = true
		t.mu.Unlock()
	}
	return ok
}

// waitProgress returns a state whose progress is above ts, refreshing and
// waiting as needed.
func (t *Txns) waitProgress(ctx context.Context, ts uint64) (*State, error) {
	refreshed := false
	for {
		st, changed := t.Current()
		if st.Progress > ts {
			return st, nil
		}
		if !refreshed {
			refreshed = true
			if _, err := t.Refresh(ctx); err != nil {
				return nil, err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}

// ReadyAt implements persist.TxnReads: it waits until the txns progress
// passes asOf, applies the shard's commits, and advances its physical
// upper to the progress with an empty append (one per shard per tick at
// most: later readers find it done).
func (t *Txns) ReadyAt(ctx context.Context, shard string, asOf uint64) error {
	st, err := t.waitProgress(ctx, asOf)
	if err != nil {
		return err
	}
	if err := t.applyShard(ctx, shard, st); err != nil {
		return err
	}
	for {
		s, err := t.p.CachedState(ctx, shard)
		if err != nil {
			return err
		}
		if s.Tombstone || s.Upper > asOf {
			return nil
		}
		w, err := t.writer(ctx, shard)
		if err != nil {
			return err
		}
		// Every commit to the shard below st.Progress is applied and later
		// ones are at or above it, so [upper, progress) is empty.
		err = w.CompareAndAppend(ctx, nil, s.Upper, st.Progress)
		var mm *persist.UpperMismatchError
		switch {
		case err == nil, errors.Is(err, persist.ErrShardTombstoned):
		case errors.As(err, &mm), persist.IsIndeterminate(err):
			if _, err := t.p.State(ctx, shard); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// Progress implements persist.TxnReads.
func (t *Txns) Progress(ctx context.Context, shard string) (uint64, <-chan struct{}, error) {
	st, changed := t.Current()
	if err := t.applyShard(ctx, shard, st); err != nil {
		return 0, nil, err
	}
	return st.Progress, changed, nil
}

// Upper implements persist.TxnReads: the txns progress, read linearizably.
func (t *Txns) Upper(ctx context.Context, shard string) (uint64, error) {
	st, err := t.Refresh(ctx)
	if err != nil {
		return 0, err
	}
	return st.Progress, nil
}

var _ persist.TxnReads = (*Txns)(nil)

// WriteBatch uploads updates to a data shard as a batch for a later
// Commit (their times are ignored).
func (t *Txns) WriteBatch(ctx context.Context, shard string, updates []row.Update) (persist.WrittenBatch, error) {
	w, err := t.writer(ctx, shard)
	if err != nil {
		return persist.WrittenBatch{}, err
	}
	return w.WriteBatch(ctx, updates)
}

// NewBatch starts a large batch for a data shard, uploaded as it grows
// (COPY FROM); BatchBuilder.Finish yields the batch for Commit.
func (t *Txns) NewBatch(ctx context.Context, shard string) (*persist.BatchBuilder, error) {
	w, err := t.writer(ctx, shard)
	if err != nil {
		return nil, err
	}
	return w.NewBatch(), nil
}

// Metrics are the txns shard's Prometheus metrics.
type Metrics struct {
	casAttempts  prometheus.Counter
	casConflicts prometheus.Counter
	commits      prometheus.Counter
	applies      prometheus.Counter
	ticks        prometheus.Counter
}

func newMetrics() *Metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shardtail", Subsystem: "txnwal", Name: name, Help: help})
	}
	return &Metrics{
		casAttempts:  c("cas_attempts_total", "Compare-and-set attempts on the txns shard (commits, registrations, ticks)."),
		casConflicts: c("cas_conflicts_total", "Compare-and-set attempts on the txns shard that lost to another process."),
		commits:      c("commits_total", "Transactions committed to the txns shard."),
		applies:      c("applies_total", "Commits applied to a data shard (one per shard written)."),
		ticks:        c("ticks_total", "Ticks: one write advancing every registered table's logical upper."),
	}
}

// Register adds the metrics to r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.casAttempts, m.casConflicts, m.commits, m.applies, m.ticks} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) cas(ok bool, err error) {
	m.casAttempts.Inc()
	if err == nil && !ok {
		m.casConflicts.Inc()
	}
}
