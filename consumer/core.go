package consumer

import (
	"fmt"
	"time"
)

// Frontier is a position in a collection's history: every update with a
// timestamp below it has been delivered. Zero means nothing has been
// delivered yet (not even the snapshot).
type Frontier uint64

// Row is one row of `SUBSCRIBE … WITH (PROGRESS)` as read from the wire, in
// any envelope.
type Row struct {
	// Timestamp is mz_timestamp.
	Timestamp uint64
	// Progressed is mz_progressed: a progress row carries no data and
	// means that no more rows below Timestamp will come.
	Progressed bool
	// Diff is mz_diff for plain output (and WITHIN TIMESTAMP ORDER BY);
	// zero for the envelopes.
	Diff int64
	// State is mz_state for ENVELOPE UPSERT / DEBEZIUM ("upsert",
	// "insert", "delete", "key_violation"); empty for plain output.
	State string
	// Values are the relation columns, in output order, as pgx decodes
	// them (int64, string, time.Time, pgtype.Numeric, …; nil for NULL),
	// except jsonb and json: a json.RawMessage of the document's text as
	// the server sent it, byte for byte (pgx would parse it into maps and
	// float64s, which lose key order and digits).
	Values []any
	// Size is the row's size on the wire in bytes; batches are cut on it.
	Size int
	// Collection is the row's source (an index in Config.Sources) when
	// one Core is fed several subscribes' rows (Merger does); zero rows
	// take CoreConfig.Collection.
	Collection int
}

// Update is one data row of a batch.
type Update struct {
	// Collection is the index of the source in Config.Sources (0 for a
	// single collection).
	Collection int
	// Timestamp, Diff, State and Values are the row's, as in Row.
	Timestamp uint64
	Diff      int64
	State     string
	Values    []any
	// Size is the row's size on the wire in bytes.
	Size int
}

// Batch is every update with Lower <= timestamp < Upper: one or more whole
// timestamps, closed by a progress row. A batch never splits a timestamp,
// except a single timestamp larger than MaxBatchBytes, which comes as a run
// of Partial batches followed by one that is not.
type Batch struct {
	// Lower and Upper bound the batch's timestamps; Upper is the frontier
	// to commit once the batch is written. A Partial batch has Upper ==
	// Lower: nothing is closed yet.
	Lower, Upper Frontier
	// Updates are the batch's rows, in stream order (timestamps
	// non-decreasing).
	Updates []Update
	// Partial is true when more updates of the batch's last timestamp
	// follow in the next batch: the caller may write it but must not
	// commit until a batch with Partial false.
	Partial bool
	// Snapshot is true for the batches that carry the snapshot of a fresh
	// subscribe (the updates at its AS OF): a sink may load them with COPY
	// into an empty target.
	Snapshot bool
	// Generation counts the re-snapshots since the first subscribe; a
	// sink that sees it change must replace, not update, its target.
	Generation int64
	// Columns[i] describes the relation columns of Sources[i] (set by
	// Run; a Core leaves it nil).
	Columns [][]Column
}

// CoreConfig tunes how a Core cuts batches.
type CoreConfig struct {
	// MaxBatchBytes closes a batch once its closed updates reach this
	// many bytes; a single timestamp over it is cut into Partial batches.
	// Zero means no limit.
	MaxBatchBytes int
	// MaxBatchDelay closes a batch this long after it first had
	// something to report (data or a frontier advance). Zero closes a
	// batch at every progress row.
	MaxBatchDelay time.Duration
	// Collection is copied into every Update.
	Collection int
	// Generation is copied into every Batch.
	Generation int64
}

// Core is the protocol state machine of one subscribe: rows in, closed
// batches out. It does no I/O and keeps no clock: the caller passes the time
// to Push and Tick, which makes it deterministic under test.
//
// A Core serves one subscribe statement. After an error or a reconnect the
// caller builds a new Core from the last committed frontier and issues its
// Statement.
type Core struct {
	cfg  CoreConfig
	from Frontier // resume position; 0 for a fresh subscribe

	started  bool
	asOf     uint64   // the opening progress row's time
	frontier Frontier // last progress seen (after the opening row)

	// open holds the updates at openTS, which no progress row closed yet;
	// hasOpen stays true after a Partial cut emptied open, until the
	// timestamp closes.
	open      []Update
	openBytes int
	openTS    uint64
	hasOpen   bool

	// pending holds closed updates not yet emitted, from lower to frontier.
	pending      []Update
	pendingBytes int
	lower        Frontier
	since        time.Time // when pending first had something to report

	out     []Batch
	dropped int
}

// NewCore returns a Core for a subscribe that starts at from: zero for a
// fresh subscribe (with its snapshot), else the committed frontier F to
// resume from (the statement is then AS OF F-1 without snapshot).
func NewCore(cfg CoreConfig, from Frontier) *Core {
	return &Core{cfg: cfg, from: from}
}

// Statement returns the SUBSCRIBE statement this Core expects to read.
func (c *Core) Statement(src Source) string { return src.Statement(c.from) }

// Frontier returns the last frontier reported by the stream: every update
// below it has been pushed (not necessarily emitted in a batch yet).
func (c *Core) Frontier() Frontier { return c.frontier }

// Dropped returns how many data rows below the resume frontier were dropped.
func (c *Core) Dropped() int { return c.dropped }

// Push feeds the next row of the stream.
func (c *Core) Push(r Row, now time.Time) error {
	if !c.started {
		if !r.Progressed {
			return ErrNoOpeningProgress
		}
		if c.from != 0 && r.Timestamp != uint64(c.from)-1 {
			return fmt.Errorf("%w: got %d, want %d", ErrUnexpectedOpening, r.Timestamp, uint64(c.from)-1)
		}
		c.started = true
		c.asOf = r.Timestamp
		if c.from != 0 {
			c.lower, c.frontier = c.from, c.from
		} else {
			// The snapshot at AS OF is not delivered yet: the first
			// batch starts at AS OF and nothing is closed.
			c.lower, c.frontier = Frontier(r.Timestamp), Frontier(r.Timestamp)
		}
		return nil
	}
	if r.Progressed {
		return c.progress(Frontier(r.Timestamp), now)
	}
	if c.from != 0 && r.Timestamp < uint64(c.from) {
		// Below the resume frontier: already delivered before the
		// resume. A correct server sends none; dropping keeps the
		// no-duplicate promise if one does.
		c.dropped++
		return nil
	}
	if Frontier(r.Timestamp) < c.frontier {
		return fmt.Errorf("%w: data at %d under frontier %d", ErrOutOfOrder, r.Timestamp, c.frontier)
	}
	if c.hasOpen && r.Timestamp != c.openTS {
		// Timestamps never decrease, so a later one closes the open
		// timestamp even before its progress row.
		c.closeOpen(Frontier(r.Timestamp), now)
		c.maybeEmit(now)
	}
	if !c.hasOpen {
		c.hasOpen, c.openTS = true, r.Timestamp
	}
	coll := r.Collection
	if coll == 0 {
		coll = c.cfg.Collection
	}
	c.open = append(c.open, Update{
		Collection: coll,
		Timestamp:  r.Timestamp,
		Diff:       r.Diff,
		State:      r.State,
		Values:     r.Values,
		Size:       r.Size,
	})
	c.openBytes += r.Size
	if c.cfg.MaxBatchBytes > 0 && c.openBytes >= c.cfg.MaxBatchBytes {
		c.cutPartial()
	}
	return nil
}

// Tick closes the pending batch if MaxBatchDelay has passed since it first
// had something to report. Call it when no row arrived for a while.
func (c *Core) Tick(now time.Time) { c.maybeEmit(now) }

// Next returns the next closed batch, if any. Call it after every Push and
// Tick until it reports false.
func (c *Core) Next() (Batch, bool) {
	if len(c.out) == 0 {
		return Batch{}, false
	}
	b := c.out[0]
	c.out[0] = Batch{}
	c.out = c.out[1:]
	return b, true
}

func (c *Core) progress(p Frontier, now time.Time) error {
	if p < c.frontier {
		return fmt.Errorf("%w: progress %d after %d", ErrOutOfOrder, p, c.frontier)
	}
	if c.hasOpen && Frontier(c.openTS) < p {
		c.closeOpen(p, now)
	}
	if p > c.frontier {
		c.frontier = p
		if c.since.IsZero() {
			c.since = now
		}
	}
	c.maybeEmit(now)
	return nil
}

// closeOpen moves the open timestamp into pending; frontier p (> openTS)
// is known to close it.
func (c *Core) closeOpen(p Frontier, now time.Time) {
	if len(c.pending) == 0 {
		c.pending = c.open // no copy: the open rows become the batch
	} else {
		c.pending = append(c.pending, c.open...)
	}
	c.pendingBytes += c.openBytes
	c.open, c.openBytes, c.hasOpen = nil, 0, false
	if p > c.frontier {
		c.frontier = p
	}
	if c.since.IsZero() {
		c.since = now
	}
}

// cutPartial emits what is pending (all below openTS, so closed) as a whole
// batch, then the open timestamp's rows so far as a Partial chunk.
func (c *Core) cutPartial() {
	if Frontier(c.openTS) > c.frontier {
		c.frontier = Frontier(c.openTS)
	}
	if Frontier(c.openTS) > c.lower {
		c.emit(Frontier(c.openTS))
	}
	c.out = append(c.out, Batch{
		Lower:      c.lower,
		Upper:      c.lower,
		Updates:    c.open,
		Partial:    true,
		Snapshot:   c.from == 0 && c.openTS == c.asOf,
		Generation: c.cfg.Generation,
	})
	// hasOpen stays set: the closing progress row emits the final chunk
	// even when no row followed the cut. The next chunk of a timestamp
	// this large is likely as large: sized at once, it grows by no
	// copies.
	c.open, c.openBytes = make([]Update, 0, len(c.open)), 0
	c.since = time.Time{}
}

func (c *Core) maybeEmit(now time.Time) {
	if c.frontier <= c.lower {
		return
	}
	full := c.cfg.MaxBatchBytes > 0 && c.pendingBytes >= c.cfg.MaxBatchBytes
	if full || now.Sub(c.since) >= c.cfg.MaxBatchDelay {
		c.emit(c.frontier)
	}
}

// emit closes pending as the batch [lower, upper).
func (c *Core) emit(upper Frontier) {
	c.out = append(c.out, Batch{
		Lower:      c.lower,
		Upper:      upper,
		Updates:    c.pending,
		Snapshot:   c.from == 0 && uint64(c.lower) == c.asOf,
		Generation: c.cfg.Generation,
	})
	c.pending, c.pendingBytes = nil, 0
	c.lower = upper
	c.since = time.Time{}
}

// AsOf returns the time of the opening progress row (the snapshot time of
// a fresh subscribe), or zero before it arrived.
func (c *Core) AsOf() uint64 { return c.asOf }

// Flush closes the pending batch now, whatever MaxBatchDelay says: a
// consumer that is shutting down commits what is closed. An open timestamp
// (and any Partial chunks of it) stays uncommitted.
func (c *Core) Flush() {
	if c.frontier > c.lower {
		c.emit(c.frontier)
	}
}
