package persist

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardtail/shardtail/internal/coalesce"
)

// machine is the process-wide cache and CAS loop of one shard. Every
// Reader, Writer and background task of the shard in this process shares
// it, so a state change committed here is seen by all of them at once, and a
// refresh from consensus is made once however many are waiting.
type machine struct {
	c     *Client
	shard string

	mu      sync.Mutex
	state   *State        // mu: the newest state known; never nil after load
	changed chan struct{} // mu: closed (and replaced) when state advances
	poked   chan struct{} // mu: closed (and replaced) by a doorbell

	// casTurn is held (a one-slot semaphore, so that waiting honours a
	// context) by the caller whose CAS is in flight.
	casTurn chan struct{}
	// rollingUp is set while a caller writes and records a rollup.
	rollingUp atomic.Bool

	// refreshes batches linearizable reads of consensus (a storm of N
	// callers costs two reads, not N).
	refreshes *coalesce.Reads
	// lastRead is when consensus was last read (unix nanoseconds): waiters
	// poll PollInterval after it, however short each of their waits.
	lastRead atomic.Int64
	// lastReadStart is when the newest successful read of consensus
	// began (with the monotonic clock): a caller that needs the state only
	// as fresh as a read begun after some moment takes the cache once
	// such a read has ended (refreshAfter).
	lastReadStart atomic.Pointer[time.Time]
}

func newMachine(c *Client, s *State) *machine {
	m := &machine{c: c, shard: s.ShardID, state: s, changed: make(chan struct{}), poked: make(chan struct{}), casTurn: make(chan struct{}, 1)}
	m.refreshes = coalesce.New(m.readConsensus)
	m.lastRead.Store(time.Now().UnixNano()) // s was just loaded
	return m
}

// current returns the newest known state and a channel closed when a newer
// one is known.
func (m *machine) current() (*State, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state, m.changed
}

// observe installs s if it is newer than what the machine knows.
func (m *machine) observe(s *State) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.SeqNo <= m.state.SeqNo {
		return
	}
	m.state = s
	close(m.changed)
	m.changed = make(chan struct{})
}

// poke is the doorbell: waiters re-read consensus now instead of at their
// next poll.
func (m *machine) poke() {
	m.mu.Lock()
	defer m.mu.Unlock()
	close(m.poked)
	m.poked = make(chan struct{})
}

func (m *machine) pokedChan() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.poked
}

// refresh reads consensus for versions newer than the cached state. It is
// linearizable: once it returns, the cache holds at least every version
// committed before it was called. Concurrent callers share reads.
func (m *machine) refresh(ctx context.Context) (*State, error) {
	if err := m.refreshes.Do(ctx); err != nil {
		return nil, err
	}
	s, _ := m.current()
	return s, nil
}

// readConsensus reads the versions newer than the cached state.
func (m *machine) readConsensus() error {
	ctx, cancel := context.WithTimeout(m.c.ctx, time.Minute)
	defer cancel()
	start := time.Now()
	s, _ := m.current()
	n, err := m.c.versions.catchUp(ctx, s)
	if errors.Is(err, errTruncated) {
		n, err = m.c.versions.fetchCurrent(ctx, m.shard)
	}
	m.c.metrics.refreshes.Inc()
	if err != nil {
		return err
	}
	m.lastRead.Store(time.Now().UnixNano())
	m.observe(n)
	// Reads run one at a time (refreshes): start only grows.
	m.lastReadStart.Store(&start)
	return nil
}

// refreshAfter is refresh for a caller that needs every version committed
// before after, not before the call: a read of consensus that began at or
// after after serves it without another. The zero time is refresh.
func (m *machine) refreshAfter(ctx context.Context, after time.Time) (*State, error) {
	if last := m.lastReadStart.Load(); !after.IsZero() && last != nil && !last.Before(after) {
		s, _ := m.current()
		return s, nil
	}
	return m.refresh(ctx)
}

// nextPoll is how long until the cached state is PollInterval old.
func (m *machine) nextPoll() time.Duration {
	return max(0, m.c.cfg.PollInterval-time.Since(time.Unix(0, m.lastRead.Load())))
}

// apply runs t against the newest state and commits the result by CAS,
// retrying on conflicts (re-running t on the newer state) and on
// indeterminate errors (after re-reading, so that a t that already took
// effect is seen as such by t itself: transitions are written to be
// idempotent). It returns the committed state, or the current state and nil
// if t was a no-op.
func (m *machine) apply(ctx context.Context, t transition) (*State, error) {
	next, committed, err := m.commit(ctx, t)
	if err != nil || !committed {
		return next, err
	}
	if err := m.maybeRollup(ctx, next); err != nil {
		// The commit stands; a failed rollup is retried at the next CAS.
		m.c.log.Warn("persist: rollup failed", "shard", m.shard, "seqno", next.SeqNo, "err", err)
	}
	return next, nil
}

// commit is apply's CAS loop; committed is false for a no-op. The callers
// in this process take turns (casTurn): racing each other, N concurrent
// callers (a storm of reader registrations) would cost about N²/2
// attempts, each cloning the whole state, where taking turns costs N. A
// conflict can then only come from another process; the loser backs off
// with jitter, so that a storm across processes spreads out instead of
// colliding again at once.
func (m *machine) commit(ctx context.Context, t transition) (next *State, committed bool, err error) {
	select {
	case m.casTurn <- struct{}{}:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	defer func() { <-m.casTurn }()
	conflictWait := backoff{ceiling: time.Millisecond, limit: 256 * time.Millisecond}
	errorWait := backoff{ceiling: time.Millisecond, limit: time.Second}
	for {
		cur, _ := m.current()
		next, err := t(cur)
		if errors.Is(err, errNoOp) {
			return cur, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		next.SeqNo = cur.SeqNo + 1
		next.WalltimeMs = m.c.cfg.Now()
		ok, n, err := m.c.versions.compareAndSet(ctx, cur, next)
		m.c.metrics.casAttempt(n, ok, err)
		if err != nil && !IsIndeterminate(err) {
			return nil, false, fmt.Errorf("cas %s at %s: %w", m.shard, next.SeqNo, err)
		}
		if err == nil && ok {
			m.observe(next)
			return next, true, nil
		}
		wait := &conflictWait
		if err != nil {
			wait = &errorWait
		}
		if err := wait.sleep(ctx); err != nil {
			return nil, false, err
		}
		if _, rerr := m.refresh(ctx); rerr != nil && !IsIndeterminate(rerr) {
			return nil, false, rerr
		}
	}
}

// backoff is a retry delay with full jitter: each sleep is uniform in
// [0, ceiling), and the ceiling doubles up to a limit.
type backoff struct {
	ceiling, limit time.Duration
}

// sleep waits for the next delay, or until ctx is done.
func (b *backoff) sleep(ctx context.Context) error {
	d := rand.N(b.ceiling)
	b.ceiling = min(2*b.ceiling, b.limit)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// maybeRollup writes a rollup when the newest state is RollupEvery
// versions past the latest one, and records it in state. One caller in the
// process writes it at a time, of the newest state, and its own commit
// does not roll up again: callers that committed while waiting their turn
// each saw a state far past the latest rollup, and each rolling up (a full
// state to blob, then a commit that waits its turn and is itself far past
// it) fed on itself.
func (m *machine) maybeRollup(ctx context.Context, s *State) error {
	if !m.needsRollup(s) || !m.rollingUp.CompareAndSwap(false, true) {
		return nil
	}
	defer m.rollingUp.Store(false)
	cur, _ := m.current()
	if !m.needsRollup(cur) {
		return nil // another caller's rollup landed since s
	}
	started := m.c.cfg.Now()
	key, err := m.c.versions.writeRollup(ctx, cur)
	if err != nil {
		return err
	}
	_, _, err = m.commit(ctx, m.c.commitUploads(started, addRollup(cur.SeqNo, key)))
	return err
}

// needsRollup reports whether s is RollupEvery versions past its latest
// rollup.
func (m *machine) needsRollup(s *State) bool {
	latest, _ := s.LatestRollup()
	return int(s.SeqNo-latest) >= m.c.cfg.RollupEvery
}

// waitUntil blocks until cond holds for the newest state, re-reading
// consensus at the poll interval or when the doorbell rings.
func (m *machine) waitUntil(ctx context.Context, cond func(*State) bool) (*State, error) {
	timer := time.NewTimer(m.nextPoll())
	defer timer.Stop()
	for {
		s, changed := m.current()
		if cond(s) {
			return s, nil
		}
		if s.Tombstone {
			return nil, ErrShardTombstoned
		}
		poked := m.pokedChan()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
			continue
		case <-poked:
		case <-timer.C:
			timer.Reset(m.c.cfg.PollInterval)
		}
		if _, err := m.refresh(ctx); err != nil && !IsIndeterminate(err) {
			return nil, err
		}
	}
}
