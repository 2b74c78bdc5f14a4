package membudget

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Holder names, the values of shardtail_memory_bytes's holder label.
const (
	// HolderWindow is the fast path's retained windows of listen batches.
	HolderWindow = "tail_window"
	// HolderQueues is the listen batches only subscriber queues still hold
	// (the window let go of them): what slow fast-path subscribers pin.
	HolderQueues = "tail_queues"
	// HolderSnapshot is the snapshot pieces shared cursors retain.
	HolderSnapshot = "tail_snapshot"
	// HolderCatchUp is what the fast path's catch-ups from the shard hold:
	// the chunk each reads and what is formatted from it (bounded by the
	// catch-up slots).
	HolderCatchUp = "tail_catchup"
	// HolderOrdered is timestamps held back whole to order or envelope
	// them, on both paths.
	HolderOrdered = "ordered"
	// HolderDataflow is the dataflow path's queued rows and read-ahead.
	HolderDataflow = "dataflow"
	// HolderPGWire is pgwire's message buffers (a source: pgwire exports
	// its own gauge).
	HolderPGWire = "pgwire"
	// HolderFeed is the HTTP feed's per-stream buffers.
	HolderFeed = "feed"
	// HolderPersist is persist's writes and compactions in flight: part
	// encodings (their zstd state and buffers), encoded parts until they
	// are uploaded, and a compaction's merged updates until it writes them.
	HolderPersist = "persist"
	// HolderPartCache is persist's decoded parts kept for snapshot reads
	// (--part-cache), and the batches cursors collect for it.
	HolderPartCache = "part_cache"
	// HolderTxnWrites is the writes transaction blocks hold until COMMIT
	// (their rows, as decoded).
	HolderTxnWrites = "txn_writes"
)

// Help is the help text of shardtail_memory_bytes. Every registration of
// the metric (pgwire's own among them) must use the same text, or the
// registry refuses it.
const Help = "Bytes of memory held, by holder."

// Budget is a memory limit and the bytes its holders hold. Its methods are
// safe from any goroutine.
type Budget struct {
	limit atomic.Int64

	mu      sync.Mutex
	holders map[string]*Holder      // mu
	sources map[string]func() int64 // mu
	stages  []*stage                // mu: sorted by order
	victims map[Victim]struct{}     // mu

	// enforcing serializes Enforce; ended counts the victims it ended.
	enforcing sync.Mutex
	// pending is set by every Enforce call and cleared by the one running,
	// which runs again while it is set: a call that finds one running is
	// never lost (the running one may have measured before its bytes came).
	pending atomic.Bool
	ended   atomic.Int64
	// all is the counters and sources as one list, rebuilt when one is
	// added, so that Total needs no lock; transient is the transient
	// holders among them (TransientHolder).
	all       atomic.Pointer[[]func() int64]
	transient atomic.Pointer[[]*Holder]
}

// New returns a budget of limit bytes; limit <= 0 means unlimited (the
// holders are still accounted and exported).
func New(limit int64) *Budget {
	b := &Budget{holders: map[string]*Holder{}, sources: map[string]func() int64{}, victims: map[Victim]struct{}{}}
	b.SetLimit(limit)
	return b
}

// SetLimit changes the budget; limit <= 0 means unlimited. Holders shrink
// to a lower limit at their next enforcement.
func (b *Budget) SetLimit(limit int64) {
	b.limit.Store(max(limit, 0))
}

// Limit is the budget in bytes, 0 when unlimited.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit.Load()
}

// Holder returns the counter of the named holder, creating it once.
func (b *Budget) Holder(name string) *Holder {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.holders[name]
	if h == nil {
		h = &Holder{name: name}
		b.holders[name] = h
		b.rebuild()
	}
	return h
}

// TransientHolder returns the counter of the named holder, creating it
// once, as Holder does, for bytes held only while work in flight runs
// (persist's encodings and compactions): they count in the total, so the
// policy's stages shrink and detach for them, but the policy never ends a
// victim for them, as a subscribe would be ended for a compaction that
// soon lets go of its bytes anyway.
func (b *Budget) TransientHolder(name string) *Holder {
	h := b.Holder(name)
	if h == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.transient.Load()
	var list []*Holder
	if cur != nil {
		list = *cur
	}
	for _, t := range list {
		if t == h {
			return h
		}
	}
	list = append(append([]*Holder(nil), list...), h)
	b.transient.Store(&list)
	return h
}

// excessOfLasting is Excess without the transient holders' bytes: what
// ending a victim may be needed for.
func (b *Budget) excessOfLasting() int64 {
	l := b.Limit()
	if l <= 0 {
		return 0
	}
	n := b.Total()
	if ts := b.transient.Load(); ts != nil {
		for _, h := range *ts {
			n -= h.Bytes()
		}
	}
	return max(n-l, 0)
}

// AddSource counts the bytes f reports under name. f must be cheap and
// safe from any goroutine. A source is not exported by Register: its owner
// exports it (with Help).
func (b *Budget) AddSource(name string, f func() int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sources[name] = f
	b.rebuild()
}

// rebuild publishes the list Total sums. b.mu must be held.
func (b *Budget) rebuild() {
	all := make([]func() int64, 0, len(b.holders)+len(b.sources))
	for _, h := range b.holders {
		all = append(all, h.n.Load)
	}
	for _, f := range b.sources {
		all = append(all, f)
	}
	b.all.Store(&all)
}

// Total is the bytes every holder holds now.
func (b *Budget) Total() int64 {
	if b == nil {
		return 0
	}
	all := b.all.Load()
	if all == nil {
		return 0
	}
	var n int64
	for _, f := range *all {
		n += f()
	}
	return n
}

// Over reports whether the total is above a limited budget.
func (b *Budget) Over() bool {
	return b.Excess() > 0
}

// Excess is how many bytes the total is above the limit, or 0.
func (b *Budget) Excess() int64 {
	if l := b.Limit(); l > 0 {
		return max(b.Total()-l, 0)
	}
	return 0
}

// Bytes returns each holder's bytes, sources included, by name.
func (b *Budget) Bytes() map[string]int64 {
	out := map[string]int64{}
	if b == nil {
		return out
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, h := range b.holders {
		out[name] = h.Bytes()
	}
	for name, f := range b.sources {
		out[name] = f()
	}
	return out
}

// Register exports shardtail_memory_bytes{holder} for the budget's
// counters (not its sources), shardtail_memory_budget_bytes and
// shardtail_memory_budget_ended_total. Holders
// created later are exported too.
func (b *Budget) Register(r prometheus.Registerer) error {
	if err := r.Register(collector{b}); err != nil {
		return fmt.Errorf("membudget: register metrics: %w", err)
	}
	return nil
}

var (
	bytesDesc  = prometheus.NewDesc("shardtail_memory_bytes", Help, []string{"holder"}, nil)
	budgetDesc = prometheus.NewDesc("shardtail_memory_budget_bytes", "The memory budget (--memory-budget), 0 when unlimited.", nil, nil)
	endedDesc  = prometheus.NewDesc("shardtail_memory_budget_ended_total", "Subscribes (dataflow path) ended with 53200 because the process stayed over its memory budget after every other stage of the policy.", nil, nil)
)

// collector exports the budget. It is unchecked (Describe sends nothing):
// its holders appear as they are created, and pgwire registers the same
// metric name for its own holder.
type collector struct{ b *Budget }

func (c collector) Describe(chan<- *prometheus.Desc) {}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.b.mu.Lock()
	names := make([]string, 0, len(c.b.holders))
	for name := range c.b.holders {
		names = append(names, name)
	}
	c.b.mu.Unlock()
	sort.Strings(names)
	for _, name := range names {
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(c.b.Holder(name).Bytes()), name)
	}
	ch <- prometheus.MustNewConstMetric(budgetDesc, prometheus.GaugeValue, float64(c.b.Limit()))
	ch <- prometheus.MustNewConstMetric(endedDesc, prometheus.CounterValue, float64(c.b.Ended()))
}

// Holder counts the bytes of one kind of holder. A nil *Holder counts
// nothing.
type Holder struct {
	name string
	n    atomic.Int64
	peak atomic.Int64
}

// Add charges n bytes (negative: releases them).
func (h *Holder) Add(n int64) {
	if h == nil || n == 0 {
		return
	}
	v := h.n.Add(n)
	for p := h.peak.Load(); v > p && !h.peak.CompareAndSwap(p, v); p = h.peak.Load() {
	}
}

// Peak is the most the holder has held at once.
func (h *Holder) Peak() int64 {
	if h == nil {
		return 0
	}
	return h.peak.Load()
}

// Bytes is what the holder holds now.
func (h *Holder) Bytes() int64 {
	if h == nil {
		return 0
	}
	return h.n.Load()
}

// Stages of the policy, in the order Enforce runs them: what costs clients
// least goes first.
const (
	// StageCache empties caches (persist's part cache): what they hold
	// only saves later reads work; no client waits for it.
	StageCache = iota
	// StageShrink shrinks what is retained for subscribers that may come
	// or fall behind later (the fast path's windows and finished snapshot
	// shares): no client loses anything now.
	StageShrink
	// StageDetach detaches the largest fast-path queues: their
	// subscribers resume from the shard, losing nothing but the catch-up.
	StageDetach
)

// A Victim is a consumer the policy's last resort ends, largest first, once
// every stage has run and the total is still over the budget: a dataflow
// subscribe, which cannot resume by itself.
type Victim interface {
	// MemoryBytes is what ending the victim would free.
	MemoryBytes() int64
	// EndOverBudget ends the victim, releasing its bytes before it
	// returns; limit is the budget, for the victim's error.
	EndOverBudget(limit int64)
}

// stage is a registered policy stage.
type stage struct {
	order int
	shed  func()
}

// AddStage registers shed as a step of the policy at order (StageCache,
// StageShrink, StageDetach): Enforce calls it while the total is over the
// budget. shed must free what it can (stopping early once Over is false,
// or at a lower mark of its own: room below the limit that later growth
// takes a while to fill) and must not call Enforce. The returned func
// removes the stage.
func (b *Budget) AddStage(order int, shed func()) (remove func()) {
	if b == nil {
		return func() {}
	}
	st := &stage{order: order, shed: shed}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stages = append(b.stages, st)
	sort.SliceStable(b.stages, func(i, j int) bool { return b.stages[i].order < b.stages[j].order })
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for i, s := range b.stages {
			if s == st {
				b.stages = append(b.stages[:i], b.stages[i+1:]...)
				break
			}
		}
	}
}

// AddVictim registers v for the policy's last resort. The returned func
// removes it; call it before v releases its bytes for good.
func (b *Budget) AddVictim(v Victim) (remove func()) {
	if b == nil {
		return func() {}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.victims[v] = struct{}{}
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.victims, v)
	}
}

// Enforce applies the policy when the total is over the budget: each stage
// in order, while still over; then the victims, largest first, while still
// over without the transient holders (TransientHolder). Holders call it after they grew. Only one Enforce runs at a time:
// a caller that finds one running goes on, and that one runs the policy
// again for it.
func (b *Budget) Enforce() {
	if !b.Over() {
		return
	}
	b.pending.Store(true)
	for b.pending.Load() && b.enforcing.TryLock() {
		for b.pending.Swap(false) {
			b.enforce()
		}
		b.enforcing.Unlock()
	}
}

// enforce runs the policy once; b.enforcing is held.
func (b *Budget) enforce() {
	b.mu.Lock()
	stages := make([]*stage, len(b.stages))
	copy(stages, b.stages)
	b.mu.Unlock()
	for _, st := range stages {
		if !b.Over() {
			return
		}
		st.shed()
	}
	if b.excessOfLasting() <= 0 {
		return
	}
	type sized struct {
		v     Victim
		bytes int64
	}
	b.mu.Lock()
	vs := make([]sized, 0, len(b.victims))
	for v := range b.victims {
		if n := v.MemoryBytes(); n > 0 {
			vs = append(vs, sized{v, n})
		}
	}
	b.mu.Unlock()
	sort.Slice(vs, func(i, j int) bool { return vs[i].bytes > vs[j].bytes })
	for _, v := range vs {
		if b.excessOfLasting() <= 0 {
			return
		}
		v.v.EndOverBudget(b.Limit())
		b.ended.Add(1)
	}
}

// WaitEnforce waits for an Enforce in flight, if any, to finish.
func (b *Budget) WaitEnforce() {
	if b != nil {
		b.enforcing.Lock()
		b.enforcing.Unlock()
	}
}

// Ended is how many victims the policy has ended.
func (b *Budget) Ended() int64 {
	if b == nil {
		return 0
	}
	return b.ended.Load()
}
