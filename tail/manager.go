package tail

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/persist"
)

// Defaults for Config.
const (
	DefaultWindowBytes        = 64 << 20
	DefaultWindowAge          = time.Minute
	DefaultRetireAfter        = 30 * time.Second
	DefaultDowngradeInterval  = time.Second
	DefaultShareRetainBytes   = 64 << 20
	DefaultProgressInterval   = time.Second
	DefaultMaxCatchUps        = 2
	DefaultCatchUpGrace       = 5 * time.Second
	DefaultDetachStalledAfter = 5 * time.Second
)

// Config tunes a Manager. Zero fields take their defaults.
type Config struct {
	// WindowBytes bounds the retained window of each shared tail. With a
	// Budget the windows together also hold at most a quarter of it
	// (windowCap).
	WindowBytes int64
	// WindowAge bounds how far back (in time) the window reaches.
	WindowAge time.Duration
	// RetireAfter is how long a shared tail lives without subscribers
	// before it closes and expires its readers. Negative retires at once.
	RetireAfter time.Duration
	// DowngradeInterval rate-limits the listen reader's since downgrades.
	DowngradeInterval time.Duration
	// ShareRetainBytes bounds the snapshot pieces a shared cursor keeps for
	// subscribers that join it late; a smaller snapshot is kept whole.
	ShareRetainBytes int64
	// ProgressInterval is how often a routed subscriber with PROGRESS is
	// handed a batch that holds nothing for it, to report the frontier
	// (see SharedTail.sweepProgress). The default, the storage's tick,
	// reports progress to such a subscriber about once a second whatever
	// the rate of the writes that do not concern it, as an idle
	// collection's tick does.
	ProgressInterval time.Duration
	// MaxCatchUps bounds the catch-ups from the shard (see catchUp) that
	// hold a chunk at once, over every tail: each holds one chunk of
	// persist's ListenChunkBytes and what is formatted from it.
	MaxCatchUps int
	// CatchUpGrace is how long a member of a catch-up may take nothing of
	// the current chunk while others wait for the next before it is
	// evicted (it catches up later on its own).
	CatchUpGrace time.Duration
	// DetachStalledAfter is how long an attached subscriber may take
	// nothing from its queue while more than stallFloor waits in it before
	// it is detached (see Subscriber.stalled): its client stopped reading,
	// and it resumes from the window or the shard once it reads again.
	// Negative: never (the subscriber's MaxBufferedBytes and the Budget
	// still apply).
	DetachStalledAfter time.Duration
	// Budget is the process's memory budget (--memory-budget), charged
	// with the windows, the batches only queues hold, the snapshot shares'
	// pieces and the timestamps held back to be ordered; over it, the
	// manager shrinks the windows and shares and then detaches the largest
	// queues (its stages of the budget's policy, see enforce). nil: no
	// budget.
	Budget *membudget.Budget
}

func (c Config) withDefaults() Config {
	if c.WindowBytes == 0 {
		c.WindowBytes = DefaultWindowBytes
	}
	if c.WindowAge == 0 {
		c.WindowAge = DefaultWindowAge
	}
	if c.RetireAfter == 0 {
		c.RetireAfter = DefaultRetireAfter
	}
	if c.DowngradeInterval == 0 {
		c.DowngradeInterval = DefaultDowngradeInterval
	}
	if c.ShareRetainBytes == 0 {
		c.ShareRetainBytes = DefaultShareRetainBytes
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = DefaultProgressInterval
	}
	if c.MaxCatchUps <= 0 {
		c.MaxCatchUps = DefaultMaxCatchUps
	}
	if c.CatchUpGrace <= 0 {
		c.CatchUpGrace = DefaultCatchUpGrace
	}
	if c.DetachStalledAfter == 0 {
		c.DetachStalledAfter = DefaultDetachStalledAfter
	}
	return c
}

// Manager owns the shared tails of one process, one per collection in use.
type Manager struct {
	persist *persist.Client
	cfg     Config
	metrics *Metrics
	log     *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	tails map[string]*SharedTail // mu: running tails
	// starting holds the tails being created, one per collection, so that
	// the first subscribes to one collection wait for one creation (two
	// reader registrations and a listen, consensus round trips) while
	// subscribes to other collections do not wait at all.
	starting map[string]*tailStart // mu
	closed   bool                  // mu: Close began; no new tails

	// catchUpSlots are the catch-ups' slots (Config.MaxCatchUps), taken
	// in the order they are asked for.
	catchUpSlots *semaphore.Weighted

	// The budget's holders (nil without Config.Budget).
	memWindow, memQueues, memSnapshot, memOrdered, memCatchUp *membudget.Holder
	// removeStages unregisters the manager's stages of the budget's policy.
	removeStages []func()
}

// tailStart is a shared tail being created: closed done publishes t or err.
type tailStart struct {
	done chan struct{}
	t    *SharedTail
	err  error
}

// NewManager returns a Manager reading shards through p. It retires idle
// tails in the background until Close.
func NewManager(p *persist.Client, cfg Config) *Manager {
	ctx, cancel := context.WithCancel(context.Background())
	cfg = cfg.withDefaults()
	m := &Manager{persist: p, cfg: cfg, metrics: newMetrics(), log: slog.Default(), catchUpSlots: semaphore.NewWeighted(int64(cfg.MaxCatchUps)),
		ctx: ctx, cancel: cancel, tails: map[string]*SharedTail{}, starting: map[string]*tailStart{},
		memWindow:   cfg.Budget.Holder(membudget.HolderWindow),
		memQueues:   cfg.Budget.Holder(membudget.HolderQueues),
		memSnapshot: cfg.Budget.Holder(membudget.HolderSnapshot),
		memOrdered:  cfg.Budget.Holder(membudget.HolderOrdered),
		memCatchUp:  cfg.Budget.Holder(membudget.HolderCatchUp)}
	m.removeStages = []func(){
		cfg.Budget.AddStage(membudget.StageShrink, m.shrink),
		cfg.Budget.AddStage(membudget.StageDetach, m.detachLargest),
	}
	m.wg.Add(1)
	go m.reap()
	return m
}

// Metrics returns the manager's metrics.
func (m *Manager) Metrics() *Metrics { return m.metrics }

// tail returns the shard's shared tail, creating it with its listen at asOf.
// The manager's lock is not held while a tail is created: subscribers to
// the same collection arriving meanwhile wait for that creation (and
// retry it if it failed), others go on.
func (m *Manager) tail(ctx context.Context, shard string, asOf uint64) (*SharedTail, error) {
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, ErrClosed
		}
		if t := m.tails[shard]; t != nil {
			if !t.failed() {
				m.mu.Unlock()
				return t, nil
			}
			delete(m.tails, shard)
			m.closeInBackground(t)
		}
		if st := m.starting[shard]; st != nil {
			m.mu.Unlock()
			select {
			case <-st.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if st.err == nil {
				return st.t, nil
			}
			// The creation failed, perhaps only for its own subscriber's
			// context: try again (a shard that is gone fails every try).
			continue
		}
		st := &tailStart{done: make(chan struct{})}
		m.starting[shard] = st
		m.mu.Unlock()

		t, err := m.newSharedTail(ctx, shard, asOf)
		m.mu.Lock()
		delete(m.starting, shard)
		// Close may have begun meanwhile and no longer waits for anything
		// new: this goroutine closes what it made.
		abandoned := err == nil && m.closed
		switch {
		case abandoned:
			st.err = ErrClosed
		case err == nil:
			m.tails[shard] = t
			st.t = t
		default:
			st.err = err
		}
		close(st.done)
		m.mu.Unlock()
		if abandoned {
			t.close()
		}
		return st.t, st.err
	}
}

// closeInBackground closes a tail no longer in m.tails without holding up
// the caller (closing expires two readers, a CAS each); Close waits for it.
// m.mu must be held, and Close must not have waited yet.
func (m *Manager) closeInBackground(t *SharedTail) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t.close()
	}()
}

// Tails returns the number of shared tails.
func (m *Manager) Tails() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.tails)
}

// reap retires tails that have had no subscriber for RetireAfter.
func (m *Manager) reap() {
	defer m.wg.Done()
	every := max(m.cfg.RetireAfter/2, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			m.retireIdle(timeNow())
		}
	}
}

// retireIdle closes the tails idle since before now - RetireAfter.
func (m *Manager) retireIdle(now time.Time) int {
	var idle []*SharedTail
	m.mu.Lock()
	for shard, t := range m.tails {
		t.mu.Lock()
		if len(t.subs) == 0 && !t.idleAt.IsZero() && now.Sub(t.idleAt) >= m.cfg.RetireAfter {
			idle = append(idle, t)
			delete(m.tails, shard)
		}
		t.mu.Unlock()
	}
	m.mu.Unlock()
	for _, t := range idle {
		t.close()
		m.metrics.retired.Inc()
	}
	return len(idle)
}

// Close retires every tail and waits for the manager's goroutines.
// Subscribers must be closed first; Subscribe fails with ErrClosed after.
func (m *Manager) Close() {
	for _, remove := range m.removeStages {
		remove()
	}
	m.mu.Lock()
	m.closed = true
	tails := m.tails
	m.tails = map[string]*SharedTail{}
	m.mu.Unlock()
	m.cancel()
	// The reaper and background closes; none start once closed is set.
	m.wg.Wait()
	for _, t := range tails {
		t.close()
	}
}

// timeNow is time.Now; a variable so tests can move the clock.
var timeNow = time.Now

// Metrics are the fast path's Prometheus metrics.
type Metrics struct {
	tails          prometheus.Gauge
	subscribers    prometheus.Gauge
	queueBytes     prometheus.Gauge
	detaches       prometheus.Counter
	budgetDetaches prometheus.Counter
	stallDetaches  prometheus.Counter
	budgetShrinks  prometheus.Counter
	resumes        prometheus.Counter
	catchUps       prometheus.Counter
	// catchUpShares counts catch-ups started, catchUpChunks the chunks
	// they read, catchUpEvictions their members evicted for not taking a
	// chunk within CatchUpGrace.
	catchUpShares    prometheus.Counter
	catchUpChunks    prometheus.Counter
	catchUpEvictions prometheus.Counter
	historyLoss      prometheus.Counter
	snapshotPieces   prometheus.Counter
	snapshotBytes    prometheus.Counter
	// snapshotAheadWaits counts subscribers that found the piece they
	// needed still being read ahead: the read-ahead did not keep ahead.
	snapshotAheadWaits prometheus.Counter
	decodedBatches     prometheus.Counter
	shares             prometheus.Counter
	retired            prometheus.Counter
	storageRetries     prometheus.Counter
	// Shapes (subscribe.Shape): distinct shapes per collection, MFP
	// evaluations (one per shape per batch or snapshot piece), and the rows
	// they evaluated, of which rowsRouted were found through an index.
	shapes        *prometheus.GaugeVec
	shapeEvals    prometheus.Counter
	rowsEvaluated prometheus.Counter
	rowsRouted    prometheus.Counter
	pushesSkipped prometheus.Counter
}

func newMetrics() *Metrics {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "shardtail", Subsystem: "tail", Name: name, Help: help})
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shardtail", Subsystem: "tail", Name: name, Help: help})
	}
	return &Metrics{
		tails:          g("shared_tails", "Shared tails (one per collection in use)."),
		subscribers:    g("subscribers", "Fast-path subscribers."),
		queueBytes:     g("queue_bytes", "Bytes queued for fast-path subscribers."),
		detaches:       c("detaches_total", "Subscribers detached for exceeding their queue budget."),
		budgetDetaches: c("budget_detaches_total", "Subscribers detached, largest queue first, because the process was over its memory budget."),
		stallDetaches:  c("stall_detaches_total", "Subscribers detached because they took nothing from their queue for the stall timeout (their client stopped reading)."),
		budgetShrinks:  c("budget_window_shrinks_total", "Times the windows were shrunk because the process was over its memory budget."),
		resumes:        c("resumes_total", "Detached subscribers resumed."),
		catchUps:       c("private_catchups_total", "Subscribers that caught up from the shard (the window no longer covered them), in a shared catch-up."),
		catchUpShares:  c("catchups_total", "Catch-ups from the shard started: one listen shared by the subscribers it serves."),
		catchUpChunks:  c("catchup_chunks_total", "Chunks read by catch-ups from the shard."),
		catchUpEvictions: c("catchup_evictions_total",
			"Members of a catch-up evicted for taking nothing of its chunk for the catch-up grace while others waited."),
		historyLoss:    c("history_loss_errors_total", "Subscribers failed because their position was no longer retained."),
		snapshotPieces: c("snapshot_pieces_total", "Snapshot pieces read from shared cursors."),
		snapshotBytes:  c("snapshot_bytes_total", "Bytes of snapshot pieces read from shared cursors."),
		snapshotAheadWaits: c("snapshot_read_ahead_waits_total",
			"Times a subscriber waited for the snapshot piece it needed to be read ahead (the read-ahead was not ahead of it)."),
		decodedBatches: c("decoded_batches_total", "Listen batches decoded by shared tails (once per batch)."),
		shares:         c("snapshot_cursors_total", "Shared snapshot cursors opened."),
		retired:        c("retired_total", "Shared tails retired after idling."),
		storageRetries: c("storage_retries_total", "Listen reads of shared tails retried after a storage error."),
		shapes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "shardtail", Subsystem: "tail", Name: "shapes",
			Help: "Distinct shapes (map/filter/project of a subscribe) served by a collection's shared tail, by shard."}, []string{"shard"}),
		shapeEvals:    c("shape_evaluations_total", "Evaluations of a shape's MFP over a listen batch or snapshot piece (once per shape, however many subscribe to it)."),
		rowsEvaluated: c("shape_rows_evaluated_total", "Rows a shape's MFP was evaluated on."),
		rowsRouted:    c("shape_rows_routed_total", "Rows routed to a shape through its equality index (evaluated only for the shapes they match); included in shape_rows_evaluated_total."),
		pushesSkipped: c("shape_pushes_skipped_total", "Listen batches not queued for a subscriber because its shape's index routed no row of them to it."),
	}
}

// Register adds the metrics to r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.tails, m.subscribers, m.queueBytes, m.detaches, m.budgetDetaches, m.stallDetaches, m.budgetShrinks, m.resumes, m.catchUps,
		m.catchUpShares, m.catchUpChunks, m.catchUpEvictions, m.historyLoss, m.snapshotPieces, m.snapshotBytes, m.snapshotAheadWaits, m.decodedBatches, m.shares, m.retired, m.storageRetries,
		m.shapes, m.shapeEvals, m.rowsEvaluated, m.rowsRouted, m.pushesSkipped} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
