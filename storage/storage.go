package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/txnwal"
	"github.com/shardtail/shardtail/row"
)

// DefaultTick is how often table and source uppers advance without writes.
const DefaultTick = time.Second

// Oracle issues write timestamps (catalog.Oracle): each above every one
// issued before, and at least min.
type Oracle interface {
	WriteTS(ctx context.Context, min uint64) (uint64, error)
}

// Storage owns the writable side of collections in role `all`: one writer
// per table shard (appends are serialized per shard), the tick that
// advances every owned shard's upper so that subscribers see progress, and
// the retention policy (a critical reader per shard whose since trails the
// upper by the collection's RETAIN HISTORY window).
type Storage struct {
	persist *persist.Client
	oracle  Oracle
	log     *slog.Logger
	// txns, when set, carries the writes of tables (shards owned with
	// OwnTable): see package persist/txnwal.
	txns *txnwal.Txns

	mu     sync.Mutex
	shards map[string]*ownedShard // mu
	ticks  uint64                 // mu: ticks so far

	// lastWrites holds, per shard, the timestamp of its newest acknowledged
	// write: a read of a materialized view waits until the view reaches
	// the last write to what it reads.
	wmu        sync.Mutex
	lastWrites map[string]uint64 // wmu
}

// noteWrite records an acknowledged write to shards at ts.
func (s *Storage) noteWrite(ts uint64, shards ...string) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.lastWrites == nil {
		s.lastWrites = map[string]uint64{}
	}
	for _, sh := range shards {
		s.lastWrites[sh] = max(s.lastWrites[sh], ts)
	}
}

// LastWrite is the timestamp of the newest acknowledged write to shard.
func (s *Storage) LastWrite(shard string) uint64 {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.lastWrites[shard]
}

// ownedShard is a shard this process writes.
type ownedShard struct {
	mu       sync.Mutex // serializes appends
	w        *persist.Writer
	policy   *persist.Reader
	retainMs int64
	// ticks reports whether the tick advances this shard; materialized
	// views advance with their input instead.
	ticks bool
	// txn marks a table's shard registered in the txns shard: its writes
	// are commits there, and the tick advances it with every other table
	// in one write.
	txn bool
	// maintPhase spreads the maintenance of idle tables over the ticks
	// (see maintainEvery).
	maintPhase uint64
}

// maintainEvery is how many ticks pass between the maintenance rounds the
// tick schedules for each table: nothing appends to an idle table on
// txn-wal, which once ran its maintenance (lease expiry, the sweep of
// orphaned uploads) every tick. Tables are spread over the ticks, so a
// round costs about tables/maintainEvery consensus reads per tick.
const maintainEvery = 10

// retentionReaderID is the fixed id of every shard's retention policy
// reader (a critical reader): each start reopens it, with the since it
// holds, rather than registering another. Several role-`all` processes
// share it; each moves it to upper-1-retain, which never regresses it.
const retentionReaderID persist.ReaderID = "c-retention-policy"

// retentionPurpose is the policy reader's purpose in state.
const retentionPurpose = "retention policy"

// expireOldPolicies removes the retention policy readers that versions
// before retentionReaderID registered anew at every start: they never
// expire, and their forgotten sinces would hold compaction back forever.
func (s *Storage) expireOldPolicies(ctx context.Context, shard string) error {
	st, err := s.persist.CachedState(ctx, shard)
	if err != nil {
		return err
	}
	for id, r := range st.Readers {
		if r.LeaseMs == 0 && r.Purpose == retentionPurpose && id != retentionReaderID {
			if err := s.persist.ExpireReader(ctx, shard, id); err != nil {
				return fmt.Errorf("expire old retention policy reader %s: %w", id, err)
			}
		}
	}
	return nil
}

// New returns a Storage over p issuing timestamps from o. txns, when not
// nil, carries the writes of the shards owned with OwnTable.
func New(p *persist.Client, o Oracle, txns *txnwal.Txns) *Storage {
	return &Storage{persist: p, oracle: o, txns: txns, log: slog.Default(), shards: map[string]*ownedShard{}}
}

// Register registers a new table's shard in the txns shard: the caller
// does it before the catalog names the table, so that no reader ever
// meets the table's shard unregistered. It then advances the txns
// progress to the oracle's time, so that the table's logical upper starts
// there: before the first tick of a fresh txns shard the progress counts
// registrations (1, 2, …), and a subscriber would otherwise get AS OF 3
// and, a tick later, a since an hour past it. Without txns it does
// nothing.
func (s *Storage) Register(ctx context.Context, shard string) error {
	if s.txns == nil {
		return nil
	}
	if err := s.txns.Register(ctx, shard); err != nil {
		return err
	}
	_, err := s.txns.Advance(ctx, s.oracle.WriteTS)
	return err
}

// OwnTable owns a table's shard: with txns, registered in the txns shard
// (a no-op if it is, as for every table created with txns; tables from
// before are registered here at their first start), written by commits
// there and advanced by the tick's one write. Without txns it is Own with
// the tick.
func (s *Storage) OwnTable(ctx context.Context, shard string, retainMs int64) error {
	if s.txns == nil {
		return s.Own(ctx, shard, retainMs, true)
	}
	if err := s.txns.Register(ctx, shard); err != nil {
		return fmt.Errorf("register %s in the txns shard: %w", shard, err)
	}
	return s.own(ctx, shard, &ownedShard{retainMs: retainMs, txn: true, maintPhase: rand.Uint64N(maintainEvery)})
}

// Own starts writing shard: it opens its writer and its retention policy
// reader. ticks says whether the tick advances it.
func (s *Storage) Own(ctx context.Context, shard string, retainMs int64, ticks bool) error {
	return s.own(ctx, shard, &ownedShard{retainMs: retainMs, ticks: ticks})
}

// own opens o's writer and policy reader and records it.
func (s *Storage) own(ctx context.Context, shard string, o *ownedShard) error {
	s.mu.Lock()
	if _, ok := s.shards[shard]; ok {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	w, err := s.persist.OpenWriter(ctx, shard)
	if err != nil {
		return err
	}
	policy, err := s.persist.OpenReader(ctx, shard, persist.ReaderOptions{Critical: true, ID: retentionReaderID, Purpose: retentionPurpose})
	if err != nil {
		return err
	}
	if err := s.expireOldPolicies(ctx, shard); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.shards[shard]; ok {
		policy.Close()
		return nil
	}
	o.w, o.policy = w, policy
	s.shards[shard] = o
	return nil
}

// Release stops writing shard and drops its policy hold; a table's shard
// is forgotten by the txns shard (DROP).
func (s *Storage) Release(shard string) {
	s.mu.Lock()
	o := s.shards[shard]
	delete(s.shards, shard)
	s.mu.Unlock()
	if o != nil {
		o.policy.Close()
		if o.txn {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.txns.Forget(ctx, shard); err != nil {
				s.log.Warn("release: forget in the txns shard", "shard", shard, "err", err)
			}
		}
	}
}

// SetRetain changes a shard's RETAIN HISTORY window.
func (s *Storage) SetRetain(shard string, retainMs int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.shards[shard]; o != nil {
		o.mu.Lock()
		o.retainMs = retainMs
		o.mu.Unlock()
	}
}

func (s *Storage) owned(shard string) (*ownedShard, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.shards[shard]
	if o == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotOwned, shard)
	}
	return o, nil
}

// Append writes updates (their T is ignored) to shard at a fresh timestamp
// and returns it. When Append returns, a read at the timestamp sees the
// updates (the shard's upper is above it).
func (s *Storage) Append(ctx context.Context, shard string, updates []row.Update) (uint64, error) {
	o, err := s.owned(shard)
	if err != nil {
		return 0, err
	}
	commit := func() (uint64, error) { return s.commit(ctx, map[string][]row.Update{shard: updates}, nil) }
	return s.appendFresh(ctx, shard, o, commit, func(upper, ts uint64) error {
		for i := range updates {
			updates[i].T = ts
		}
		return o.w.CompareAndAppend(ctx, updates, upper, ts+1)
	})
}

// appendFresh takes the shard's write lock and, for a table, runs commit
// (a commit of the txns shard); for another shard it runs write, through
// retryAppend, at a fresh timestamp from the oracle above its upper.
func (s *Storage) appendFresh(ctx context.Context, shard string, o *ownedShard, commit func() (uint64, error), write func(upper, ts uint64) error) (uint64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.txn {
		return commit()
	}
	return s.retryAppend(shard, func() (uint64, error) {
		upper := o.w.Upper()
		ts, err := s.oracle.WriteTS(ctx, upper)
		if err != nil {
			return 0, err
		}
		return ts, write(upper, ts)
	})
}

// commit writes tables' updates as one transaction of the txns shard:
// each shard's batch is uploaded, then one compare-and-set records them
// all at one timestamp (see txnwal.Txns.Commit). readAt is a
// read-modify-write's check. The shards' o.mu must be held.
func (s *Storage) commit(ctx context.Context, writes map[string][]row.Update, readAt map[string]uint64) (uint64, error) {
	ws := make([]txnwal.Write, 0, len(writes))
	for shard, updates := range writes {
		b, err := s.txns.WriteBatch(ctx, shard, updates)
		if err != nil {
			return 0, err
		}
		ws = append(ws, txnwal.Write{Shard: shard, Batch: b})
	}
	return s.commitWritten(ctx, ws, readAt)
}

// commitWritten commits batches already written and notes the write.
func (s *Storage) commitWritten(ctx context.Context, ws []txnwal.Write, readAt map[string]uint64) (uint64, error) {
	ts, err := s.txns.Commit(ctx, ws, readAt, s.oracle.WriteTS)
	if err != nil {
		return 0, err
	}
	shards := make([]string, len(ws))
	for i, w := range ws {
		shards[i] = w.Shard
	}
	s.noteWrite(ts, shards...)
	return ts, nil
}

// retryAppend is the compare-and-append loop of every write timed by the
// oracle: attempt takes a timestamp above the shard's upper and appends at
// it; when another process advanced the upper first (persist's
// UpperMismatchError) it runs again, above the new upper. A committed write
// is noted for LastWrite. persist has no retry helper of its own: its
// CompareAndAppend leaves the choice of the next timestamp to the caller,
// which here is the oracle's. The shard's o.mu must be held.
func (s *Storage) retryAppend(shard string, attempt func() (uint64, error)) (uint64, error) {
	for {
		ts, err := attempt()
		var mm *persist.UpperMismatchError
		if errors.As(err, &mm) {
			continue // another process advanced it; retry above its upper
		}
		if err != nil {
			return 0, err
		}
		s.noteWrite(ts, shard)
		return ts, nil
	}
}

// AppendMulti commits writes to several shards at one timestamp (a
// transaction's): every shard is checked and locked, in a fixed order,
// before any is written. Tables' writes are one commit of the txns shard,
// atomic whatever fails or crashes after it. Without txns each shard's
// append is its own compare-and-set, at one time, so a reader never sees
// part of the transaction at a time, but a crash between them can leave a
// prefix applied.
func (s *Storage) AppendMulti(ctx context.Context, writes map[string][]row.Update) (uint64, error) {
	shards := make([]string, 0, len(writes))
	for shard := range writes {
		shards = append(shards, shard)
	}
	sort.Strings(shards)
	owned := make([]*ownedShard, len(shards))
	for i, shard := range shards {
		o, err := s.owned(shard)
		if err != nil {
			return 0, err
		}
		owned[i] = o
	}
	allTxn := true
	for _, o := range owned {
		o.mu.Lock()
		defer o.mu.Unlock()
		allTxn = allTxn && o.txn
	}
	if allTxn {
		return s.commit(ctx, writes, nil)
	}
	var floor uint64
	for _, o := range owned {
		floor = max(floor, o.w.Upper())
	}
	ts, err := s.oracle.WriteTS(ctx, floor)
	if err != nil {
		return 0, err
	}
	for i, o := range owned {
		updates := writes[shards[i]]
		for j := range updates {
			updates[j].T = ts
		}
		if err := o.w.CompareAndAppend(ctx, updates, o.w.Upper(), ts+1); err != nil {
			return 0, err
		}
	}
	s.noteWrite(ts, shards...)
	return ts, nil
}

// TxnReadTS returns a read timestamp for a transaction that reads
// tables to modify them (UPDATE and DELETE in a transaction block): the
// latest time every table can be read at, one less than the txns shard's
// progress. ErrNoTxns without txns, which has no way to check the reads
// at commit.
func (s *Storage) TxnReadTS(ctx context.Context) (uint64, error) {
	if s.txns == nil {
		return 0, ErrNoTxns
	}
	st, err := s.txns.Refresh(ctx)
	if err != nil {
		return 0, err
	}
	return st.Progress - 1, nil // registration put progress above 0
}

// ReadTableAt reads a table's whole contents at ts (a TxnReadTS).
func (s *Storage) ReadTableAt(ctx context.Context, shard string, ts uint64) ([]row.Update, error) {
	r, err := s.persist.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "update"})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return ReadAll(ctx, r, ts)
}

// CommitTxn commits a transaction's writes to tables at one timestamp, as
// AppendMulti does, iff no other commit wrote a shard of readAt after the
// time it was read at: else it fails with txnwal.ErrConflict and nothing
// is written. The shards of readAt need not be written.
func (s *Storage) CommitTxn(ctx context.Context, writes map[string][]row.Update, readAt map[string]uint64) (uint64, error) {
	if len(readAt) == 0 {
		return s.AppendMulti(ctx, writes)
	}
	if len(writes) == 0 {
		return 0, nil // it wrote nothing: its reads serialize at their time
	}
	if s.txns == nil {
		return 0, ErrNoTxns
	}
	shards := slices.Sorted(maps.Keys(writes))
	for _, shard := range shards {
		o, err := s.owned(shard)
		if err != nil {
			return 0, err
		}
		if !o.txn {
			return 0, fmt.Errorf("shard %s is not a table", shard)
		}
		o.mu.Lock()
		defer o.mu.Unlock()
	}
	return s.commit(ctx, writes, readAt)
}

// AppendBatch writes a large load in bounded memory: fill adds updates to
// a batch builder (which uploads parts as it goes, without holding the
// shard's write lock); the batch then commits at one fresh timestamp. If
// fill fails, nothing is written.
func (s *Storage) AppendBatch(ctx context.Context, shard string, fill func(b *persist.BatchBuilder) error) (uint64, error) {
	o, err := s.owned(shard)
	if err != nil {
		return 0, err
	}
	b := o.w.NewBatch()
	if err := fill(b); err != nil {
		b.Abort(ctx)
		return 0, err
	}
	commit := func() (uint64, error) {
		wb, err := b.Finish(ctx)
		if err != nil {
			b.Abort(ctx)
			return 0, err
		}
		// A failed commit may still have been recorded (an error after its
		// compare-and-set was sent): the parts are left to the sweep.
		return s.commitWritten(ctx, []txnwal.Write{{Shard: shard, Batch: wb}}, nil)
	}
	var appendErr error // b.Append's last error: any other is the oracle's
	ts, err := s.appendFresh(ctx, shard, o, commit, func(upper, ts uint64) error {
		appendErr = b.Append(ctx, ts, upper)
		return appendErr
	})
	if err != nil && err != appendErr && !o.txn {
		b.Abort(ctx) // the oracle failed: nothing of the batch was committed
	}
	return ts, err
}

// ReadModifyWrite reads the shard's contents at its latest time and appends
// what fn derives from them, holding the shard's write lock throughout, so
// that no write of this process interleaves (UPDATE, DELETE).
func (s *Storage) ReadModifyWrite(ctx context.Context, shard string, fn func(current []row.Update) ([]row.Update, error)) (uint64, error) {
	o, err := s.owned(shard)
	if err != nil {
		return 0, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.txn {
		return s.readModifyCommit(ctx, shard, fn)
	}
	return s.retryAppend(shard, func() (uint64, error) {
		st, err := s.persist.State(ctx, shard)
		if err != nil {
			return 0, err
		}
		var current []row.Update
		if st.Upper > 0 {
			r, err := s.persist.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "update"})
			if err != nil {
				return 0, err
			}
			current, err = ReadAll(ctx, r, st.Upper-1)
			r.Close()
			if err != nil {
				return 0, err
			}
		}
		updates, err := fn(current)
		if err != nil {
			return 0, err
		}
		if len(updates) == 0 {
			return 0, nil // nothing to write (noted at 0, which LastWrite ignores)
		}
		ts, err := s.oracle.WriteTS(ctx, st.Upper)
		if err != nil {
			return 0, err
		}
		for i := range updates {
			updates[i].T = ts
		}
		// A mismatch means another process wrote: read again.
		return ts, o.w.CompareAndAppend(ctx, updates, st.Upper, ts+1)
	})
}

// readModifyCommit is ReadModifyWrite of a table: it reads the shard at
// the txns shard's latest time and commits what fn derives, iff no other
// commit wrote the shard after that time (else it reads again). o.mu must
// be held.
func (s *Storage) readModifyCommit(ctx context.Context, shard string, fn func(current []row.Update) ([]row.Update, error)) (uint64, error) {
	for {
		st, err := s.persist.ReadState(ctx, shard)
		if err != nil {
			return 0, err
		}
		at := st.Upper - 1 // registration put the logical upper above 0
		r, err := s.persist.OpenReader(ctx, shard, persist.ReaderOptions{Purpose: "update"})
		if err != nil {
			return 0, err
		}
		current, err := ReadAll(ctx, r, max(at, r.Since()))
		r.Close()
		if err != nil {
			return 0, err
		}
		updates, err := fn(current)
		if err != nil {
			return 0, err
		}
		if len(updates) == 0 {
			return 0, nil
		}
		ts, err := s.commit(ctx, map[string][]row.Update{shard: updates}, map[string]uint64{shard: max(at, r.Since())})
		if errors.Is(err, txnwal.ErrConflict) {
			continue // another process wrote it: read again
		}
		return ts, err
	}
}

// ReadAll reads a shard's whole contents at asOf (UPDATE and DELETE, and a
// materialized view's restart correction).
func ReadAll(ctx context.Context, r *persist.Reader, asOf uint64) ([]row.Update, error) {
	cur, err := r.Snapshot(ctx, asOf)
	if err != nil {
		return nil, err
	}
	return cur.All(ctx)
}

// AppendAt writes updates at their own times, advancing the shard from
// lower to upper: the write path of dataflows (materialized views), whose
// times follow their input rather than the oracle.
func (s *Storage) AppendAt(ctx context.Context, shard string, updates []row.Update, lower, upper uint64) error {
	o, err := s.owned(shard)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.w.CompareAndAppend(ctx, updates, lower, upper)
}

// Tick advances every ticking shard's upper to now and moves every owned
// shard's policy since to upper-1-retain. Errors are logged: a missed tick
// is made up by the next one.
func (s *Storage) Tick(ctx context.Context) {
	s.mu.Lock()
	shards := make(map[string]*ownedShard, len(s.shards))
	for k, v := range s.shards {
		shards[k] = v
	}
	s.ticks++
	tick := s.ticks
	s.mu.Unlock()
	var progress uint64
	if s.txns != nil && slices.ContainsFunc(slices.Collect(maps.Values(shards)), func(o *ownedShard) bool { return o.txn }) {
		// Every table at once: one write, however many there are.
		p, err := s.txns.Advance(ctx, s.oracle.WriteTS)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("tick: advance the txns shard", "err", err)
		}
		progress = p
	}
	for shard, o := range shards {
		if o.txn && (tick+o.maintPhase)%maintainEvery == 0 {
			s.persist.ScheduleMaintenance(shard)
		}
		if o.ticks {
			if err := s.advance(ctx, o); err != nil && ctx.Err() == nil {
				s.log.Warn("tick: advance upper", "shard", shard, "err", err)
			}
		}
		o.mu.Lock()
		upper, retain := o.w.Upper(), o.retainMs
		o.mu.Unlock()
		if upper > 1 {
			since := int64(upper) - 1 - retain
			if o.txn && progress > 1 {
				// A table's since trails its logical upper, but a reader's
				// since stops at the physical upper: aiming past it would
				// cost every idle table a write per tick for nothing.
				since = min(int64(progress)-1-retain, int64(upper))
			}
			if since > 0 && uint64(since) > o.policy.Since() {
				if err := o.policy.Downgrade(ctx, uint64(since)); err != nil && ctx.Err() == nil {
					s.log.Warn("tick: downgrade since", "shard", shard, "err", err)
				}
			}
		}
	}
}

// advance moves a ticking shard's upper to a fresh timestamp.
func (s *Storage) advance(ctx context.Context, o *ownedShard) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	ts, err := s.oracle.WriteTS(ctx, o.w.Upper())
	if err != nil {
		return err
	}
	upper := o.w.Upper()
	if ts <= upper {
		return nil
	}
	err = o.w.CompareAndAppend(ctx, nil, upper, ts)
	var mm *persist.UpperMismatchError
	if errors.As(err, &mm) {
		return nil // another process advanced it, which is all a tick wants: no retry
	}
	return err
}

// Run ticks every interval until ctx is done.
func (s *Storage) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Tick(ctx)
		}
	}
}

// Close releases every owned shard and returns the errors met closing
// their retention policy readers.
func (s *Storage) Close() error {
	s.mu.Lock()
	shards := s.shards
	s.shards = map[string]*ownedShard{}
	s.mu.Unlock()
	var errs []error
	for shard, o := range shards {
		if err := o.policy.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close retention policy of %s: %w", shard, err))
		}
	}
	return errors.Join(errs...)
}
