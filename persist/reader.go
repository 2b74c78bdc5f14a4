package persist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/shardtail/shardtail/persist/codec"
	"github.com/shardtail/shardtail/row"
)

// ReaderOptions configure OpenReader.
type ReaderOptions struct {
	// Purpose is recorded in state for operators ("subscribe", "tail listen").
	Purpose string
	// Critical readers never expire: they hold since until explicitly
	// downgraded or closed. A collection's retention policy is one. They
	// hold no seqno, so they cannot read (Snapshot and Listen fail).
	Critical bool
	// ID, when set, is a stable identity for a critical reader (it is
	// ignored for leased ones): opening the same ID again, in this or a
	// later process, reopens the registration with the since it holds
	// instead of adding a reader. A process that owns a shard uses one
	// fixed ID, as Materialize's controller uses one fixed critical reader
	// id per shard, so that crashes and restarts do not pile up critical
	// readers whose holds never go away. Close of such a reader leaves its
	// registration in place (its hold outlives the process); ExpireReader
	// removes it.
	ID ReaderID
}

// Reader is a registered reader of one shard. It holds the shard's since at
// or below its own, so that reads at times >= Since() stay valid, and a
// seqno, so that GC keeps every blob it may still fetch. A background task
// heartbeats its lease. Close expires it and releases both holds.
type Reader struct {
	c        *Client
	m        *machine
	id       ReaderID
	schema   row.Schema
	critical bool
	// stable is a critical reader with a caller-chosen ID: Close keeps its
	// registration.
	stable bool

	mu     sync.Mutex
	since  uint64        // mu: our since as last committed
	leases map[SeqNo]int // mu: seqnos in use by open cursors and listens
	closed bool          // mu

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// OpenReader registers a reader of shard (a CAS) and starts its heartbeat.
func (c *Client) OpenReader(ctx context.Context, shard string, opts ReaderOptions) (*Reader, error) {
	m, err := c.machine(ctx, shard)
	if err != nil {
		return nil, err
	}
	id := ReaderID("r" + uuid.NewString())
	lease := c.cfg.ReaderLease.Milliseconds()
	stable := opts.Critical && opts.ID != ""
	if opts.Critical {
		lease = 0
	}
	if stable {
		id = opts.ID
	}
	if c.cfg.BeforeRegister != nil {
		c.cfg.BeforeRegister(shard, opts)
	}
	s, err := m.apply(ctx, registerReader(id, opts.Purpose, c.cfg.Now(), lease))
	if err != nil {
		return nil, fmt.Errorf("register reader of %s: %w", shard, err)
	}
	hctx, cancel := context.WithCancel(c.ctx)
	r := &Reader{c: c, m: m, id: id, critical: opts.Critical, stable: stable, schema: s.Schema, since: s.Readers[id].Since, leases: map[SeqNo]int{}, cancel: cancel}
	if !opts.Critical && c.cfg.ReaderHeartbeat > 0 {
		r.wg.Add(1)
		go r.heartbeat(hctx)
	}
	return r, nil
}

// ID returns the reader's id.
func (r *Reader) ID() ReaderID { return r.id }

// Schema returns the shard's schema.
func (r *Reader) Schema() row.Schema { return r.schema }

// Since returns the reader's since: reads at times >= it are valid.
func (r *Reader) Since() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.since
}

func (r *Reader) heartbeat(ctx context.Context) {
	defer r.wg.Done()
	t := time.NewTicker(r.c.cfg.ReaderHeartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.Downgrade(ctx, r.Since()); err != nil && ctx.Err() == nil {
				r.c.log.Warn("persist: reader heartbeat", "reader", r.id, "err", err)
			}
		}
	}
}

// Downgrade moves the reader's since forward to since (a lower value is
// ignored) and renews its lease. Compaction may then advance times below it.
func (r *Reader) Downgrade(ctx context.Context, since uint64) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	hold := r.seqnoHold()
	r.mu.Unlock()
	s, err := r.m.apply(ctx, heartbeatReader(r.id, r.c.cfg.Now(), since, hold))
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.since = max(r.since, s.Readers[r.id].Since)
	r.mu.Unlock()
	return nil
}

// seqnoHold is the oldest seqno an open read of this reader uses, or the
// newest known seqno when none is open. r.mu must be held.
func (r *Reader) seqnoHold() SeqNo {
	s, _ := r.m.current()
	hold := s.SeqNo
	for seq := range r.leases {
		hold = min(hold, seq)
	}
	return hold
}

// leaseCurrent takes a local lease on the newest known state and returns
// it. Taking the state and the lease under r.mu, where heartbeats compute
// the durable hold, makes the hold never pass a state a read uses.
func (r *Reader) leaseCurrent() *State {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, _ := r.m.current()
	r.leases[s.SeqNo]++
	return s
}

func (r *Reader) release(seq SeqNo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leases[seq]--; r.leases[seq] <= 0 {
		delete(r.leases, seq)
	}
}

// Close stops the heartbeat and expires the reader (a CAS), releasing its
// holds; a critical reader opened with a stable ID keeps its registration
// and hold (see ReaderOptions.ID). Open cursors and listens of the reader
// must be closed first.
func (r *Reader) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	if r.stable {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := r.m.apply(ctx, expireReader(r.id))
	return err
}

// checkAsOf waits until asOf < upper, validates since <= asOf, and returns
// the state to read with a local lease on it (the caller releases it).
// fresh is as in SnapshotAfter.
func (r *Reader) checkAsOf(ctx context.Context, asOf uint64, fresh time.Time) (*State, error) {
	if r.critical {
		return nil, errCriticalRead
	}
	if since := r.Since(); asOf < since {
		return nil, &SinceError{AsOf: asOf, Since: since}
	}
	if tx := r.c.txns(ctx, r.m.shard); tx != nil {
		// A txn-wal data shard is behind its logical upper until made
		// readable at asOf (see TxnReads).
		if err := tx.ReadyAt(ctx, r.m.shard, asOf); err != nil {
			return nil, err
		}
	}
	// Refresh first: the read must see this reader's registration as it is
	// now (an expired reader's holds are gone and GC may have run), or as
	// it was when the caller's statement read the shard's state (fresh).
	if _, err := r.m.refreshAfter(ctx, fresh); err != nil {
		return nil, err
	}
	if _, err := r.m.waitUntil(ctx, func(s *State) bool { return s.Upper > asOf }); err != nil {
		return nil, err
	}
	s := r.leaseCurrent()
	if _, ok := s.Readers[r.id]; !ok {
		r.release(s.SeqNo)
		return nil, readerGone(s)
	}
	if asOf < s.Since {
		r.release(s.SeqNo)
		return nil, &SinceError{AsOf: asOf, Since: s.Since}
	}
	return s, nil
}

var errCriticalRead = errors.New("critical readers hold since only and cannot read")

// readerGone is the error of a read whose reader is no longer in s: a
// finalized shard removed every reader (see FinalizeShard), which the
// caller must see as the drop it is, not as a lease that ran out.
func readerGone(s *State) error {
	if s.Tombstone {
		return ErrShardTombstoned
	}
	return ErrReaderExpired
}

// droppedWhileReading turns a read that failed on a missing part into
// ErrShardTombstoned when the shard was dropped meanwhile: finalization
// deletes a dropped shard's parts once its grace is over, and a reader
// still going then ends as every reader of a dropped shard does.
func (r *Reader) droppedWhileReading(ctx context.Context, err error) error {
	var pe *PartError
	if !errors.As(err, &pe) || !errors.Is(pe.Err, ErrNotFound) {
		return err
	}
	if s, rerr := r.m.refresh(ctx); rerr == nil && s.Tombstone {
		return fmt.Errorf("%w (its parts were deleted while being read)", ErrShardTombstoned)
	}
	return err
}

// Cursor is a consolidating snapshot cursor: it yields a shard's contents at
// one time in chunks. See Reader.Snapshot.
type Cursor struct {
	r     *Reader
	seq   SeqNo
	asOf  uint64
	merge *mergeIter
	max   int
	// size is the bound of the next chunk: it starts at firstChunkRows and
	// doubles up to max, so that the first rows reach a client after a
	// small chunk's merge and encoding rather than a full one's, while a
	// long read soon moves in full chunks.
	size int
	done bool
	// full is whether the last chunk was full: the next one likely is too,
	// and gets room for size rows at once.
	full bool
	// pass is the snapshot's one run when it needs no consolidation (see
	// passThrough): its record batches pass through as columns.
	pass *runIter
}

// Chunk is one chunk of a snapshot: its updates, or (when the cursor
// passes a part's rows through without consolidating them) the same
// updates as columns, at the cursor's AsOf.
type Chunk struct {
	Updates []row.Update
	Columns *row.Columns
}

// Decoded returns the chunk's updates: Updates, or Columns decoded (anew
// on every call).
func (c Chunk) Decoded() []row.Update {
	if c.Columns != nil {
		return codec.DecodeColumns(c.Columns)
	}
	return c.Updates
}

// Len returns the number of updates in the chunk.
func (c Chunk) Len() int {
	if c.Columns != nil {
		return c.Columns.Len
	}
	return len(c.Updates)
}

// passThrough returns the run of batches when the snapshot at asOf is that
// run's rows as they are: a single run (a compacted shard's usual shape)
// whose updates are all stored at one time at or before asOf. A run is
// sorted and consolidated by (row, time): with one time, its rows are
// distinct, and the merge would only stamp them asOf. Not a part with a
// timestamp rewrite: its stored times may differ, and rows distinct by
// them become equal once rewritten. nil otherwise.
func passThrough(m *mergeIter, asOf uint64) *runIter {
	if len(m.all) != 1 {
		return nil
	}
	r := m.all[0]
	for _, p := range r.parts {
		if p.TsRewrite != nil || p.MinT != p.MaxT || p.MinT != r.parts[0].MinT || p.MinT > asOf {
			return nil
		}
	}
	return r
}

// firstChunkRows bounds a snapshot's first chunk (and the doubling ramp
// after it): small enough that a FETCH 10 or the first COPY row waits for
// about a hundred rows, not SnapshotChunkRows.
const firstChunkRows = 128

// Snapshot returns a cursor over the shard's contents at asOf: every row
// with its multiplicity summed over times <= asOf, stamped asOf, zero sums
// dropped, in row order. It blocks until asOf < upper; asOf below since is a
// *SinceError. Parts are fetched as the cursor reaches them, so the first
// chunk comes before the whole snapshot is read and memory stays bounded by
// one decoded record batch per run plus one chunk.
func (r *Reader) Snapshot(ctx context.Context, asOf uint64) (*Cursor, error) {
	return r.SnapshotAfter(ctx, asOf, time.Time{})
}

// SnapshotAfter is Snapshot for a caller that chose asOf from a
// linearizable read of the shard's state (Client.ReadState) that began at
// fresh: a read of consensus begun since then serves as the refresh
// Snapshot makes first, so that the statement does not wait for a second
// round trip (a new cursor's FETCH 10 made two). The zero fresh is
// Snapshot.
func (r *Reader) SnapshotAfter(ctx context.Context, asOf uint64, fresh time.Time) (*Cursor, error) {
	s, err := r.checkAsOf(ctx, asOf, fresh)
	if err != nil {
		return nil, err
	}
	var batches []*Batch
	for _, b := range s.Batches {
		if b.Lower <= asOf {
			batches = append(batches, b)
		}
	}
	max := r.c.cfg.SnapshotChunkRows
	m := newMergeIter(r.c, s.Schema, batches, snapshotTimes(asOf))
	pass := passThrough(m, asOf)
	if pass != nil {
		r.c.metrics.snapshots.WithLabelValues("columns").Inc()
	} else {
		r.c.metrics.snapshots.WithLabelValues("merge").Inc()
	}
	return &Cursor{r: r, seq: s.SeqNo, asOf: asOf, max: max, size: min(max, firstChunkRows),
		merge: m, pass: pass}, nil
}

// AsOf returns the cursor's time.
func (c *Cursor) AsOf() uint64 { return c.asOf }

// Next returns the next chunk: at most SnapshotChunkRows updates, all at
// AsOf, consolidated and in row order; a row never appears in two chunks.
// The first chunks are smaller (see firstChunkRows). It returns io.EOF
// after the last chunk, and only then: a failed read's error never
// matches io.EOF (see notEOF), so a loop that stops at errors.Is(err,
// io.EOF) does not take a storage failure for the end of the snapshot.
func (c *Cursor) Next(ctx context.Context) ([]row.Update, error) {
	ch, err := c.NextChunk(ctx)
	return ch.Decoded(), err
}

// NextChunk is Next, but returns a chunk that needs no consolidation as
// the columns it was decoded to, without a datum per value: a snapshot of
// a single run at one time (see passThrough) reaches the wire encoders
// straight from the part's buffers. Such a chunk never spans two record
// batches, so it may be shorter than Next's bound.
func (c *Cursor) NextChunk(ctx context.Context) (Chunk, error) {
	if c.done {
		return Chunk{}, io.EOF
	}
	if c.pass != nil {
		cols, err := c.pass.nextColumns(ctx, c.size)
		if err != nil {
			return Chunk{}, notEOF(c.r.droppedWhileReading(ctx, err))
		}
		if cols == nil {
			c.Close()
			return Chunk{}, io.EOF
		}
		cols.T = c.asOf
		c.full = cols.Len == c.size
		c.size = min(c.max, 2*c.size)
		return Chunk{Columns: cols}, nil
	}
	out, err := c.next(ctx)
	return Chunk{Updates: out}, err
}

// next is NextChunk through the merge.
func (c *Cursor) next(ctx context.Context) ([]row.Update, error) {
	var out []row.Update
	if c.full {
		out = make([]row.Update, 0, c.size)
	}
	for len(out) < c.size {
		u, ok, err := c.merge.next(ctx)
		if err != nil {
			return nil, notEOF(c.r.droppedWhileReading(ctx, err))
		}
		if !ok {
			c.Close()
			break
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, io.EOF
	}
	c.full = len(out) == c.size
	c.size = min(c.max, 2*c.size)
	return out, nil
}

// Close releases the cursor's seqno lease and the parts it is reading. It
// is idempotent.
func (c *Cursor) Close() {
	if !c.done {
		c.done = true
		c.merge.close()
		c.r.release(c.seq)
	}
}

// Each drains the cursor: it calls f with every chunk in order, stops at
// the first error (Next's or f's) and returns it, and closes the cursor.
// It returns nil after the last chunk: io.EOF never reaches the caller.
func (c *Cursor) Each(ctx context.Context, f func(chunk []row.Update) error) error {
	defer c.Close()
	for {
		chunk, err := c.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f(chunk); err != nil {
			return err
		}
	}
}

// All drains the cursor into one slice (consolidated and in row order, as
// each chunk is) and closes it. Use Each where the snapshot may not fit in
// memory.
func (c *Cursor) All(ctx context.Context) ([]row.Update, error) {
	var out []row.Update
	err := c.Each(ctx, func(chunk []row.Update) error {
		out = append(out, chunk...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Listen follows a shard from a time on. See Reader.Listen.
type Listen struct {
	r        *Reader
	asOf     uint64
	frontier uint64
	// chunkBytes, if set, replaces Config.ListenChunkBytes for this
	// listen (SetChunkBytes).
	chunkBytes int
	// peak is the most bytes one read of a batch held (readChunk), for
	// tests.
	peak int64
}

// SetChunkBytes bounds what one Next of this listen returns and holds, in
// place of Config.ListenChunkBytes (n <= 0: that again): a consumer with a
// smaller memory budget reads merged batches in smaller chunks.
func (l *Listen) SetChunkBytes(n int) { l.chunkBytes = n }

// chunkLimit is the bound of one Next.
func (l *Listen) chunkLimit() int64 {
	if l.chunkBytes > 0 {
		return int64(l.chunkBytes)
	}
	return int64(l.r.c.cfg.ListenChunkBytes)
}

// Listen returns a listen that yields every update with time > asOf, batch
// by batch in time order, each batch followed by its progress frontier.
// The listen does not move the reader's since: a caller that follows a
// shard for long calls Reader.Downgrade(frontier-1) as it goes, so that
// compaction can merge what it has passed.
func (r *Reader) Listen(ctx context.Context, asOf uint64) (*Listen, error) {
	if r.critical {
		return nil, errCriticalRead
	}
	if since := r.Since(); asOf < since {
		return nil, &SinceError{AsOf: asOf, Since: since}
	}
	return &Listen{r: r, asOf: asOf, frontier: asOf}, nil
}

// Frontier is the listen's progress: every update with time < Frontier()
// (and > asOf) has been returned. It starts at asOf.
func (l *Listen) Frontier() uint64 { return l.frontier }

// Next blocks until the shard's upper passes the frontier, then returns the
// updates of the next batch (times in [old frontier, new frontier) and >
// asOf), consolidated and ordered by (time, row), and the new frontier.
// updates may be empty: the frontier advanced without data. A batch whose
// updates pass Config.ListenChunkBytes (a listen behind compaction reads a
// merged batch of many times) is returned over several calls, cut between
// times: each call's frontier is then the first time it did not return.
// Each such call reads the batch again and holds about ListenChunkBytes,
// never the batch (see chunkPass). After an error the frontier has not
// moved: the next call reads the same batch again. A listen does not end,
// and its errors never match io.EOF (see notEOF).
func (l *Listen) Next(ctx context.Context) ([]row.Update, uint64, error) {
	updates, frontier, err := l.next(ctx)
	return updates, frontier, notEOF(err)
}

// next is Next with the errors as they come.
func (l *Listen) next(ctx context.Context) ([]row.Update, uint64, error) {
	if tx := l.r.c.txns(ctx, l.r.m.shard); tx != nil {
		// A txn-wal data shard: progress past its physical upper comes
		// from the txns shard, where nothing was written to it.
		frontier, ok, err := l.logicalProgress(ctx, tx)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			l.frontier = frontier
			return nil, frontier, nil
		}
	}
	if _, err := l.r.m.waitUntil(ctx, func(s *State) bool { return s.Upper > l.frontier }); err != nil {
		return nil, 0, err
	}
	s := l.r.leaseCurrent()
	defer l.r.release(s.SeqNo)
	if _, ok := s.Readers[l.r.id]; !ok {
		return nil, 0, readerGone(s)
	}
	i, found := slices.BinarySearchFunc(s.Batches, l.frontier, func(b *Batch, t uint64) int {
		switch {
		case b.Upper <= t:
			return -1
		case b.Lower > t:
			return 1
		}
		return 0
	})
	if !found {
		return nil, 0, fmt.Errorf("%w: no batch covers frontier %d below upper %d", ErrCorruptState, l.frontier, s.Upper)
	}
	b := s.Batches[i]
	lower := max(l.frontier, l.asOf+1)
	// Parts wholly before the frontier were delivered: skip them, keeping
	// each run's parts in order.
	var runs []*Batch
	for _, run := range b.Runs() {
		var parts []Part
		for _, p := range run {
			if p.MaxT >= lower {
				parts = append(parts, p)
			}
		}
		if len(parts) > 0 {
			runs = append(runs, &Batch{Parts: parts})
		}
	}
	var updates []row.Update
	frontier := b.Upper
	if len(runs) > 0 {
		var err error
		var peak int64
		updates, frontier, peak, err = l.r.readChunk(ctx, s.Schema, runs, lower, b.Upper, l.chunkLimit())
		l.peak = max(l.peak, peak)
		if err != nil {
			return nil, 0, l.r.droppedWhileReading(ctx, err)
		}
	}
	l.frontier = frontier
	return updates, frontier, nil
}
