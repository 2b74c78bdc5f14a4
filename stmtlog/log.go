package stmtlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// ShardID is the log's shard: fixed, so that every process on the same
// storage shares one log.
const ShardID = "s00000000-0000-0000-0000-57a7e3e47106"

// Defaults for Config.
const (
	// DefaultFlushInterval is how often buffered records are appended.
	DefaultFlushInterval = time.Second
	// DefaultRetention is how long records are kept.
	DefaultRetention = 7 * 24 * time.Hour
	// DefaultMaxBuffered bounds the records waiting for an append.
	DefaultMaxBuffered = 100_000
)

// retentionReaderID is the critical reader whose since the sweep moves up,
// so that compaction can fold retracted records away. Fixed, so restarts
// reopen it instead of adding readers.
const retentionReaderID persist.ReaderID = "c-statement-log-retention"

// maxAppendAttempts bounds the retries of one flush that lost the race
// for the upper to other processes; the records stay buffered for the next
// flush when all fail.
const maxAppendAttempts = 8

// Config configures a Log.
type Config struct {
	// FlushInterval is how often the buffer is appended; 0 means
	// DefaultFlushInterval, negative disables the background flush (tests
	// call Flush).
	FlushInterval time.Duration
	// Retention is how long a record is kept; 0 means DefaultRetention.
	Retention time.Duration
	// MaxBuffered bounds the buffer; 0 means DefaultMaxBuffered.
	MaxBuffered int
	// Sweep makes this process retract expired records (role `all`; a
	// tail process only appends).
	Sweep bool
	// Registerer receives the log's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	if c.Retention < 0 {
		return fmt.Errorf("stmtlog: Retention must not be negative, got %v", c.Retention)
	}
	if c.MaxBuffered < 0 {
		return fmt.Errorf("stmtlog: MaxBuffered must not be negative, got %d", c.MaxBuffered)
	}
	return nil
}

// Log is the statement log of one process. Its methods are safe for
// concurrent use; a nil *Log logs nothing.
type Log struct {
	cfg     Config
	persist *persist.Client
	w       *persist.Writer
	policy  *persist.Reader // Sweep only
	log     *slog.Logger
	metrics metrics

	mu       sync.Mutex
	buf      []Record // mu: finished, not yet appended
	inflight []Record // mu: being appended by Flush, still shown by Records

	// flushMu serializes Flush (the loop's and callers').
	flushMu   sync.Mutex
	lastSweep time.Time // flushMu

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type metrics struct {
	appends, records, dropped, swept prometheus.Counter
	// buffered is len(buf)+len(inflight): records not yet appended.
	buffered prometheus.Gauge
}

func newMetrics(r prometheus.Registerer) (metrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shardtail", Subsystem: "statement_log", Name: name, Help: help})
	}
	m := metrics{
		appends: c("appends_total", "Appends of buffered records to the statement log shard (one consensus write each)."),
		records: c("records_total", "Statement executions recorded."),
		dropped: c("dropped_total", "Statement executions dropped because the buffer was full."),
		swept:   c("swept_total", "Records retracted after their retention."),
		buffered: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "shardtail", Subsystem: "statement_log", Name: "buffered",
			Help: "Recorded statement executions not yet appended to the statement log shard."}),
	}
	if r != nil {
		for _, col := range []prometheus.Collector{m.appends, m.records, m.dropped, m.swept, m.buffered} {
			if err := r.Register(col); err != nil {
				return m, fmt.Errorf("register statement log metrics: %w", err)
			}
		}
	}
	return m, nil
}

// Open opens the log's shard, creating it on first use, and starts the
// background flush.
func Open(ctx context.Context, p *persist.Client, cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.MaxBuffered == 0 {
		cfg.MaxBuffered = DefaultMaxBuffered
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := ensureShard(ctx, p); err != nil {
		return nil, err
	}
	w, err := p.OpenWriter(ctx, ShardID)
	if err != nil {
		return nil, fmt.Errorf("open statement log writer: %w", err)
	}
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	l := &Log{cfg: cfg, persist: p, w: w, log: slog.Default(), metrics: met}
	if cfg.Sweep {
		if l.policy, err = p.OpenReader(ctx, ShardID, persist.ReaderOptions{Critical: true, ID: retentionReaderID, Purpose: "statement log retention"}); err != nil {
			return nil, fmt.Errorf("open statement log retention reader: %w", err)
		}
	}
	lctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	if cfg.FlushInterval > 0 {
		l.wg.Add(1)
		go l.run(lctx)
	}
	return l, nil
}

// ensureShard creates the log's shard unless it exists; of several
// processes starting at once one creates it and the others find it.
func ensureShard(ctx context.Context, p *persist.Client) error {
	if _, err := p.State(ctx, ShardID); err == nil {
		return nil
	} else if !errors.Is(err, persist.ErrShardNotFound) {
		return fmt.Errorf("statement log shard: %w", err)
	}
	if _, err := p.CreateShard(ctx, ShardID, Schema); err != nil {
		if _, err2 := p.State(ctx, ShardID); err2 != nil {
			return fmt.Errorf("create statement log shard: %w", err)
		}
	}
	return nil
}

// run flushes every FlushInterval until ctx ends.
func (l *Log) run(ctx context.Context) {
	defer l.wg.Done()
	t := time.NewTicker(l.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := l.Flush(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("statement log: append", "err", err)
		}
	}
}

// Begin starts the record of a statement, sampled at rate (0 logs
// nothing, 1 everything): it returns nil when the statement is not
// sampled. rec carries what is known when the statement begins; Begin sets
// its ID, BeganAt and SampleRate. The caller owns one reference.
func (l *Log) Begin(rate float64, rec Record) *Execution {
	if l == nil || rate <= 0 || (rate < 1 && rand.Float64() >= rate) {
		return nil
	}
	rec.ID, rec.BeganAt, rec.SampleRate = uuid.New(), l.cfg.Now(), min(rate, 1)
	return &Execution{log: l, rec: rec, refs: 1}
}

// add buffers a finished record, dropping it when the buffer is full.
func (l *Log) add(rec Record) {
	rec.validText()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf)+len(l.inflight) >= l.cfg.MaxBuffered {
		l.metrics.dropped.Inc()
		return
	}
	l.buf = append(l.buf, rec)
	l.metrics.records.Inc()
	l.metrics.buffered.Set(float64(len(l.buf) + len(l.inflight)))
}

// Flush appends the buffered records to the shard in one CompareAndAppend
// (and, with Sweep, retracts expired records in the same append). Records
// that could not be appended stay buffered for the next flush.
func (l *Log) Flush(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	batch := l.buf
	l.buf, l.inflight = nil, batch
	l.mu.Unlock()
	sweep := l.cfg.Sweep && l.cfg.Now().Sub(l.lastSweep) >= l.sweepInterval()
	err := l.appendBatch(ctx, batch, sweep)
	l.mu.Lock()
	if err != nil {
		// Put the batch back ahead of what arrived meanwhile.
		l.buf = append(batch, l.buf...)
	}
	l.inflight = nil
	l.metrics.buffered.Set(float64(len(l.buf)))
	l.mu.Unlock()
	if err == nil && sweep {
		l.lastSweep = l.cfg.Now()
	}
	return err
}

// sweepInterval is how often expired records are retracted: often enough
// that the log exceeds its retention by a small fraction, rarely enough
// that the sweep's read costs nothing noticeable.
func (l *Log) sweepInterval() time.Duration {
	return min(max(l.cfg.Retention/24, time.Minute), time.Hour)
}

// appendBatch writes batch (and the retraction of expired records when sweep)
// at the shard's upper, retrying when another process moved it, and
// retrying an indeterminate append with the same arguments (the writer
// recognizes its own commit, so nothing is appended twice).
func (l *Log) appendBatch(ctx context.Context, batch []Record, sweep bool) error {
	if len(batch) == 0 && !sweep {
		return nil
	}
	rows := l.rows(batch)
	upper := l.w.Upper()
	var updates []row.Update
	var ts uint64
	var swept int
	// prepare builds the append for the current upper: a sweep's
	// retractions depend on what the log holds there.
	prepare := func() error {
		var expired []row.Row
		if sweep {
			var err error
			if expired, err = l.expired(ctx, upper); err != nil {
				return err
			}
		}
		ts = max(upper, uint64(l.cfg.Now().UnixMilli()))
		updates = make([]row.Update, 0, len(rows)+len(expired))
		for _, r := range rows {
			updates = append(updates, row.Update{Row: r, T: ts, Diff: 1})
		}
		for _, r := range expired {
			updates = append(updates, row.Update{Row: r, T: ts, Diff: -1})
		}
		swept = len(expired)
		return nil
	}
	if err := prepare(); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		if len(updates) == 0 {
			return l.advanceSince(ctx, upper-min(upper, 1))
		}
		err := l.w.CompareAndAppend(ctx, updates, upper, ts+1)
		var mm *persist.UpperMismatchError
		switch {
		case err == nil:
			l.metrics.appends.Inc()
			l.metrics.swept.Add(float64(swept))
			if sweep {
				return l.advanceSince(ctx, ts)
			}
			return nil
		case attempt >= maxAppendAttempts:
			return err
		case errors.As(err, &mm):
			upper = mm.Current
			if err := prepare(); err != nil {
				return err
			}
		case persist.IsIndeterminate(err):
			// The same call again.
		default:
			return err
		}
	}
}

// rows encodes batch's records, dropping those that do not fit the schema:
// one would fail every append it is in, and hold up the records behind it
// (add has made their text UTF-8 already; this is the check of the rest).
func (l *Log) rows(batch []Record) []row.Row {
	rows := make([]row.Row, 0, len(batch))
	for i := range batch {
		r := batch[i].Row()
		if err := row.CheckRow(Schema, r); err != nil {
			l.log.Warn("statement log: record dropped", "err", err)
			l.metrics.dropped.Inc()
			continue
		}
		rows = append(rows, r)
	}
	return rows
}

// advanceSince moves the retention reader's since to t, so that compaction
// folds retracted records with their insertions.
func (l *Log) advanceSince(ctx context.Context, t uint64) error {
	if l.policy == nil || t <= l.policy.Since() {
		return nil
	}
	return l.policy.Downgrade(ctx, t)
}

// expired reads the log at upper-1 and returns the rows that began before
// the retention window.
func (l *Log) expired(ctx context.Context, upper uint64) ([]row.Row, error) {
	if upper == 0 {
		return nil, nil
	}
	ups, err := l.read(ctx, upper-1)
	if err != nil {
		return nil, err
	}
	cutoff := row.TimestampTZ(l.cfg.Now().Add(-l.cfg.Retention).UnixMicro())
	var out []row.Row
	for _, u := range ups {
		if u.Row[colBegan].(row.TimestampTZ) < cutoff {
			for range u.Diff {
				out = append(out, u.Row)
			}
		}
	}
	return out, nil
}

// read returns the shard's contents at asOf.
func (l *Log) read(ctx context.Context, asOf uint64) ([]row.Update, error) {
	r, err := l.persist.OpenReader(ctx, ShardID, persist.ReaderOptions{Purpose: "statement log"})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cur, err := r.Snapshot(ctx, max(asOf, r.Since()))
	if err != nil {
		return nil, err
	}
	return cur.All(ctx)
}

// Records returns every record in the log, from every process, and this
// process's records not yet appended, oldest first.
func (l *Log) Records(ctx context.Context) ([]Record, error) {
	if l == nil {
		return nil, nil
	}
	st, err := l.persist.State(ctx, ShardID)
	if err != nil {
		return nil, fmt.Errorf("statement log: %w", err)
	}
	var out []Record
	seen := map[uuid.UUID]bool{}
	if st.Upper > 0 {
		ups, err := l.read(ctx, st.Upper-1)
		if err != nil {
			return nil, fmt.Errorf("statement log: %w", err)
		}
		for _, u := range ups {
			if u.Diff <= 0 {
				continue
			}
			rec, err := decode(u.Row)
			if err != nil {
				return nil, err
			}
			if seen[rec.ID] {
				continue // appended twice (an indeterminate append retried by a later flush)
			}
			seen[rec.ID] = true
			out = append(out, rec)
		}
	}
	l.mu.Lock()
	for _, list := range [][]Record{l.inflight, l.buf} {
		for _, rec := range list {
			if !seen[rec.ID] {
				out = append(out, rec)
			}
		}
	}
	l.mu.Unlock()
	sortRecords(out)
	return out, nil
}

// Close appends what is buffered, stops the background flush and releases
// the shard's handles.
func (l *Log) Close(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.cancel()
	l.wg.Wait()
	err := l.Flush(ctx)
	if l.policy != nil {
		l.policy.Close()
	}
	return err
}
