package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Defaults for Config. DefaultMaxBatchDelay is short: a row waits up to it
// for its batch to close, and batching costs little by being short, since
// Run writes one batch at a time and the rows that arrive during a write
// make the next batch larger (measured on the PostgreSQL sink at 10,000
// changes/s: 1 ms 27/74 ms p50/p99, 20 ms 46/145 ms, 100 ms 97/186 ms).
const (
	DefaultMaxBatchBytes  = 4 << 20
	DefaultMaxBatchDelay  = 10 * time.Millisecond
	DefaultFetchRows      = 10000
	DefaultFetchTimeout   = 50 * time.Millisecond
	DefaultMaxAttempts    = 10
	DefaultBaseDelay      = 100 * time.Millisecond
	DefaultMaxDelay       = 10 * time.Second
	DefaultAttemptTimeout = 30 * time.Second
)

// HistoryPolicy is what Run does when the checkpoint is below the
// collection's since.
type HistoryPolicy int

const (
	// Resnapshot starts a new generation from a fresh snapshot (default).
	Resnapshot HistoryPolicy = iota
	// Stop returns ErrHistoryLost.
	Stop
)

// ReplacePolicy is what Run does when a source's name refers to another
// object than the one recorded with the checkpoint.
type ReplacePolicy int

const (
	// StopOnReplace returns ErrObjectReplaced (default): the target
	// holds another object's data, which an operator should look at.
	StopOnReplace ReplacePolicy = iota
	// ResnapshotOnReplace lands the new object from a snapshot, as a new
	// generation.
	ResnapshotOnReplace
)

// Config configures Run.
type Config struct {
	// URL is the shardtail server's connection string.
	URL string
	// Sources are the collections to land. Several are subscribed at one
	// AS OF and their batches aligned at one frontier (see Merger).
	Sources []Source
	// Checkpoint stores the position; required.
	Checkpoint Checkpoint
	// MaxBatchBytes and MaxBatchDelay cut batches (see CoreConfig).
	MaxBatchBytes int
	MaxBatchDelay time.Duration
	// FetchRows and FetchTimeout shape each FETCH: up to FetchRows rows,
	// waiting at most FetchTimeout for them.
	FetchRows    int
	FetchTimeout time.Duration
	// Retry bounds the retries of transient errors.
	Retry Retry
	// OnHistoryLost decides what a history loss does.
	OnHistoryLost HistoryPolicy
	// OnObjectReplaced decides what happens when a source's name now
	// refers to another object than the checkpoint's (dropped and
	// recreated).
	OnObjectReplaced ReplacePolicy
	// Logger receives retries and resumes; nil discards them.
	Logger *slog.Logger
	// Metrics, if set, counts what Run lands (see NewMetrics).
	Metrics *Metrics
}

// Retry bounds retries: up to MaxAttempts consecutive failures, waiting an
// exponential backoff from BaseDelay to MaxDelay with full jitter; every
// connection attempt and every FETCH is bounded by AttemptTimeout.
type Retry struct {
	MaxAttempts    int
	BaseDelay      time.Duration
	MaxDelay       time.Duration
	AttemptTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.MaxBatchDelay == 0 {
		c.MaxBatchDelay = DefaultMaxBatchDelay
	}
	if c.FetchRows == 0 {
		c.FetchRows = DefaultFetchRows
	}
	if c.FetchTimeout == 0 {
		c.FetchTimeout = DefaultFetchTimeout
	}
	if c.Retry.MaxAttempts == 0 {
		c.Retry.MaxAttempts = DefaultMaxAttempts
	}
	if c.Retry.BaseDelay == 0 {
		c.Retry.BaseDelay = DefaultBaseDelay
	}
	if c.Retry.MaxDelay == 0 {
		c.Retry.MaxDelay = DefaultMaxDelay
	}
	if c.Retry.AttemptTimeout == 0 {
		c.Retry.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports which field is wrong.
func (c *Config) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("consumer config: URL is required")
	case len(c.Sources) == 0:
		return errors.New("consumer config: Sources is empty")
	case c.Checkpoint == nil:
		return errors.New("consumer config: Checkpoint is required")
	case c.MaxBatchBytes < 0, c.MaxBatchDelay < 0, c.FetchRows < 0, c.FetchTimeout < 0:
		return errors.New("consumer config: sizes and durations must not be negative")
	}
	return nil
}

// Sink writes batches to a target.
//
// Run calls Write with each batch in order; after a Write of a batch that is
// not Partial it commits the batch's Upper through Config.Checkpoint, before
// the next Write. A sink that keeps its checkpoint in its own transaction
// (exactly once) implements Checkpoint too and commits that transaction in
// Commit. An error from Write ends Run with it.
type Sink interface {
	Write(ctx context.Context, b Batch) error
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(ctx context.Context, b Batch) error

// Write calls f.
func (f SinkFunc) Write(ctx context.Context, b Batch) error { return f(ctx, b) }

// Aborter is implemented by sinks that hold uncommitted writes (Partial
// batches, or a batch written but not committed) across Write calls. Run
// calls Abort before resuming from the checkpoint after a source error, so
// the redelivered updates are not applied twice.
type Aborter interface {
	Abort(ctx context.Context) error
}

// Run subscribes to the configured source and feeds the sink closed batches
// until ctx ends or an error it does not retry. When ctx ends it drains:
// the batch closed so far is written and committed (with a context that is
// not cancelled), uncommitted writes are aborted, and Run returns ctx's
// error.
// It starts from the checkpoint's position (a snapshot when it is zero),
// retries transient errors with backoff, resumes at once after falling
// behind, and on a history loss follows OnHistoryLost.
func Run(ctx context.Context, cfg Config, sink Sink) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg.setDefaults()
	pos, err := cfg.Checkpoint.Load(ctx)
	if err != nil {
		return fmt.Errorf("load checkpoint: %w", err)
	}
	r := &runner{cfg: cfg, sink: sink, pos: pos}
	return r.loop(ctx)
}

type runner struct {
	cfg  Config
	sink Sink
	pos  Position // last committed
	// resnapshot makes the next session start from a snapshot in a new
	// generation (after a history loss), until a batch of it commits.
	resnapshot bool
	// objects are the catalog ids the current session resolved (nil
	// when the server does not expose them); committed with each batch.
	objects []string
	// dropped is set when a subscribe by id reported its object dropped:
	// the next session tells a drop from a replacement.
	dropped bool
}

func (r *runner) loop(ctx context.Context) error {
	failures := 0
	for {
		progressed, err := r.session(ctx)
		var se *sinkError
		if errors.As(err, &se) {
			return se.err
		}
		if aerr := r.abort(context.WithoutCancel(ctx)); aerr != nil {
			return aerr
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if progressed {
			failures = 0
		}
		if errors.Is(err, errObjectMissing) {
			failures++
			if failures >= r.cfg.Retry.MaxAttempts {
				return fmt.Errorf("%w: %v", ErrDropped, r.pos.Objects)
			}
			if err := sleep(ctx, backoff(r.cfg.Retry, failures)); err != nil {
				return err
			}
			continue
		}
		class := Classify(err)
		r.cfg.Metrics.sourceError(class)
		r.cfg.Logger.Warn("subscribe ended", "class", class.String(), "frontier", uint64(r.pos.Frontier), "err", err)
		switch class {
		case ClassFellBehind:
			continue
		case ClassTransient:
			failures++
			if failures >= r.cfg.Retry.MaxAttempts {
				return fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, failures, err)
			}
			if err := sleep(ctx, backoff(r.cfg.Retry, failures)); err != nil {
				return err
			}
		case ClassHistoryLost:
			if r.cfg.OnHistoryLost == Stop || r.pos.Frontier == 0 {
				return fmt.Errorf("%w: %w", ErrHistoryLost, err)
			}
			// The next session starts from a snapshot in a new
			// generation; the checkpoint moves to it with the first
			// committed batch.
			r.resnapshot = true
		case ClassDropped:
			if len(r.pos.Objects) == 0 || r.dropped {
				return fmt.Errorf("%w: %w", ErrDropped, err)
			}
			// Subscribed by id: the next session's lookup tells a
			// drop (no such name) from a replacement (another id).
			r.dropped = true
		default:
			return fmt.Errorf("%w: %w", ErrStalled, err)
		}
	}
}

// backoff is the wait before retry attempt n (1-based): full jitter over an
// exponential bound, so many consumers of a restarted server spread out.
func backoff(rc Retry, n int) time.Duration {
	d := rc.BaseDelay << min(n-1, 30)
	if d <= 0 || d > rc.MaxDelay {
		d = rc.MaxDelay
	}
	return time.Duration(rand.Int64N(int64(d)) + 1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (r *runner) abort(ctx context.Context) error {
	if a, ok := r.sink.(Aborter); ok {
		if err := a.Abort(ctx); err != nil {
			return fmt.Errorf("abort sink: %w", err)
		}
	}
	return nil
}

// errObjectMissing is a session's error when a source's name has no object
// after its subscribe by id reported it dropped.
var errObjectMissing = errors.New("subscribed object not found by name")

// sinkError marks an error of the sink or the checkpoint, which Run returns
// as is instead of classifying it as a source error.
type sinkError struct{ err error }

func (e *sinkError) Error() string { return e.err.Error() }
func (e *sinkError) Unwrap() error { return e.err }

// Column describes one relation column of a source, as the server reports
// it.
type Column struct {
	Name     string
	TypeOID  uint32
	TypeName string // the PostgreSQL type name, "text" when unknown
}

// folder is what a session feeds rows into: a Core for one source, a
// Merger for several.
type folder interface {
	Push(i int, r Row, now time.Time) error
	Tick(now time.Time)
	Flush()
	Next() (Batch, bool)
}

// singleCore is a Core as a folder.
type singleCore struct{ *Core }

func (c singleCore) Push(_ int, r Row, now time.Time) error { return c.Core.Push(r, now) }

// fetched is one FETCH's result from source i.
type fetched struct {
	i    int
	rows []Row
	cols []Column // set on the first FETCH
	err  error
}

// session subscribes to every source, each on its own connection with its
// own fetching goroutine, and lands batches until a failure. progressed
// reports whether it committed anything (which resets the retry budget).
func (r *runner) session(ctx context.Context) (progressed bool, err error) {
	n := len(r.cfg.Sources)
	conns := make([]*pgx.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close(context.WithoutCancel(ctx))
		}
	}()
	srcs := slices.Clone(r.cfg.Sources)
	var ids []string
	for i := range srcs {
		conn, id, err := r.connect(ctx, srcs[i])
		if err != nil {
			return false, err
		}
		conns = append(conns, conn)
		if id != "" {
			srcs[i].ID = id
			ids = append(ids, id)
		}
	}
	if len(ids) != n {
		ids = nil // identity only when every source has one
	}
	if err := r.checkObjects(ids); err != nil {
		return false, err
	}
	r.objects = ids

	from, gen := r.pos.Frontier, r.pos.Generation
	if r.resnapshot {
		from, gen = 0, gen+1
	}
	ccfg := CoreConfig{MaxBatchBytes: r.cfg.MaxBatchBytes, MaxBatchDelay: r.cfg.MaxBatchDelay, Generation: gen}
	var fold folder
	var merger *Merger
	if n == 1 {
		fold = singleCore{NewCore(ccfg, from)}
	} else {
		merger = NewMerger(ccfg, from, n)
		fold = merger
	}
	cols := make([][]Column, n)
	for i, src := range srcs {
		stmt := src.Statement(from)
		if from == 0 && i > 0 {
			// Fresh subscribes after the first start at its AS OF:
			// one cut.
			stmt = src.StatementAt(merger.AsOf(0))
		}
		conn := conns[i]
		if err := r.declare(ctx, conn, stmt); err != nil {
			return false, err
		}
		for from == 0 && i == 0 && merger != nil && merger.AsOf(0) == 0 {
			f := r.fetch(ctx, 0, conn, 0)
			if f.err != nil {
				return false, f.err
			}
			if cols[0] == nil {
				cols[0] = f.cols
			}
			for _, row := range f.rows {
				if err := fold.Push(0, row, time.Now()); err != nil {
					return false, &sinkError{fmt.Errorf("%w: %w", ErrStalled, err)}
				}
			}
		}
	}

	fctx, stopFetch := context.WithCancel(ctx)
	ch := make(chan fetched)
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hint := 0
			for {
				f := r.fetch(fctx, i, conn, hint)
				hint = len(f.rows)
				select {
				case ch <- f:
				case <-fctx.Done():
					return
				}
				if f.err != nil {
					return
				}
			}
		}()
	}
	defer func() {
		stopFetch()
		wg.Wait()
	}()

	for {
		var ferr error
		select {
		case f := <-ch:
			if cols[f.i] == nil {
				cols[f.i] = f.cols
			}
			for _, row := range f.rows {
				if err := fold.Push(f.i, row, time.Now()); err != nil {
					// The server broke the protocol: retrying
					// would only repeat it, so stop and report.
					return progressed, &sinkError{fmt.Errorf("%w: %w", ErrStalled, err)}
				}
			}
			ferr = f.err
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			// Shutting down: land what is closed.
			fold.Flush()
		} else if ferr != nil {
			return progressed, ferr
		}
		// The sink is never interrupted in the middle of a batch
		// (cancelling a query closes its connection): ctx's end is
		// seen between batches, and the batch in hand is finished.
		wctx := context.WithoutCancel(ctx)
		fold.Tick(time.Now())
		n, werr := r.deliver(wctx, fold, cols)
		progressed = progressed || n > 0
		if werr != nil {
			return progressed, werr
		}
		if ctx.Err() != nil {
			return progressed, ctx.Err()
		}
	}
}

// connect opens a connection for src and looks up its catalog id in
// mz_internal.mz_storage_shards when src names a collection (not a query)
// and has no ID; "" when the server does not say (a server without the
// relation, a query source, an unknown name).
func (r *runner) connect(ctx context.Context, src Source) (*pgx.Conn, string, error) {
	cctx, cancel := context.WithTimeout(ctx, r.cfg.Retry.AttemptTimeout)
	defer cancel()
	conn, err := pgx.Connect(cctx, r.cfg.URL)
	if err != nil {
		return nil, "", fmt.Errorf("connect: %w", err)
	}
	if src.ID != "" {
		return conn, src.ID, nil
	}
	name, ok := plainName(src.Name)
	if !ok {
		return conn, "", nil
	}
	var id string
	err = conn.QueryRow(cctx, "SELECT object_id FROM mz_internal.mz_storage_shards WHERE name = $1", name).Scan(&id)
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return conn, id, nil
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pe):
		// No such object, or no such relation on this server: the
		// subscribe by name reports what is wrong.
		return conn, "", nil
	}
	conn.Close(context.WithoutCancel(ctx))
	return nil, "", fmt.Errorf("look up %s: %w", src.Name, err)
}

// plainName returns the object name of a collection's name, qualified or
// not, as the catalog stores it: an unquoted part folded to lower case, a
// quoted one as written (with "" for a quote); false for anything else (a
// query).
func plainName(s string) (string, bool) {
	for {
		var name string
		if rest, ok := strings.CutPrefix(s, `"`); ok {
			var b strings.Builder
			for {
				i := strings.IndexByte(rest, '"')
				if i < 0 {
					return "", false
				}
				b.WriteString(rest[:i])
				rest = rest[i+1:]
				if !strings.HasPrefix(rest, `"`) {
					break
				}
				b.WriteByte('"')
				rest = rest[1:]
			}
			name, s = b.String(), rest
		} else {
			i := strings.IndexByte(s, '.')
			if i < 0 {
				i = len(s)
			}
			if strings.ContainsAny(s[:i], "\"( ") {
				return "", false
			}
			name, s = strings.ToLower(s[:i]), s[i:]
		}
		if name == "" {
			return "", false
		}
		if s == "" {
			return name, true
		}
		if s[0] != '.' {
			return "", false
		}
		s = s[1:]
	}
}

// checkObjects compares the session's ids with the checkpoint's.
func (r *runner) checkObjects(ids []string) error {
	dropped := r.dropped
	r.dropped = false
	if len(r.pos.Objects) == 0 || ids == nil && !dropped {
		return nil
	}
	if slices.Equal(ids, r.pos.Objects) {
		if dropped {
			return &sinkError{fmt.Errorf("%w: %v", ErrDropped, r.pos.Objects)}
		}
		return nil
	}
	if ids == nil {
		// The name has no object: dropped, or dropped and not yet
		// recreated (a migration). The loop retries the lookup with
		// backoff before it concludes ErrDropped.
		r.dropped = true
		return errObjectMissing
	}
	if r.cfg.OnObjectReplaced == StopOnReplace {
		return &sinkError{fmt.Errorf("%w: checkpoint has %v, the names now refer to %v", ErrObjectReplaced, r.pos.Objects, ids)}
	}
	r.cfg.Logger.Warn("collection replaced; taking a new snapshot", "was", r.pos.Objects, "now", ids)
	r.resnapshot = true
	return nil
}

// declare declares the cursor for stmt in a transaction on conn.
func (r *runner) declare(ctx context.Context, conn *pgx.Conn, stmt string) error {
	cctx, cancel := context.WithTimeout(ctx, r.cfg.Retry.AttemptTimeout)
	defer cancel()
	if _, err := conn.Exec(cctx, "BEGIN"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if _, err := conn.Exec(cctx, "DECLARE consumer_cursor CURSOR FOR "+stmt); err != nil {
		return fmt.Errorf("declare: %w", err)
	}
	r.cfg.Logger.Info("subscribed", "statement", stmt)
	return nil
}

// deliver writes and commits the batches the folder has closed, and
// returns how many it committed.
func (r *runner) deliver(ctx context.Context, fold folder, cols [][]Column) (int, error) {
	n := 0
	for b, ok := fold.Next(); ok; b, ok = fold.Next() {
		b.Columns = cols
		if err := r.sink.Write(ctx, b); err != nil {
			return n, &sinkError{fmt.Errorf("write batch [%d, %d): %w", b.Lower, b.Upper, err)}
		}
		if b.Partial {
			r.cfg.Metrics.written(b)
			continue
		}
		next := Position{Frontier: b.Upper, Generation: b.Generation, Objects: r.objects}
		if err := r.cfg.Checkpoint.Commit(ctx, r.pos, next); err != nil {
			return n, &sinkError{fmt.Errorf("commit %d: %w", b.Upper, err)}
		}
		r.pos, r.resnapshot = next, false
		r.cfg.Metrics.committed(b)
		n++
	}
	return n, nil
}

// fetch runs one FETCH on source i's cursor and decodes its rows; hint is
// the previous FETCH's row count, the likely size of this one.
func (r *runner) fetch(ctx context.Context, i int, conn *pgx.Conn, hint int) fetched {
	f := fetched{i: i, rows: make([]Row, 0, hint)}
	fctx, cancel := context.WithTimeout(ctx, r.cfg.Retry.AttemptTimeout)
	defer cancel()
	rows, err := conn.Query(fctx, fmt.Sprintf("FETCH %d consumer_cursor WITH (TIMEOUT = '%dms')", r.cfg.FetchRows, r.cfg.FetchTimeout.Milliseconds()))
	if err != nil {
		f.err = fmt.Errorf("fetch: %w", err)
		return f
	}
	defer rows.Close()
	fds := rows.FieldDescriptions()
	if len(fds) >= 3 {
		f.cols = describe(conn, fds[3:])
	}
	dec := newRowDecoder(conn.TypeMap(), fds)
	for rows.Next() {
		row, err := dec.decode(rows.RawValues())
		if err != nil {
			f.err = err
			return f
		}
		f.rows = append(f.rows, row)
	}
	if err := rows.Err(); err != nil {
		f.err = fmt.Errorf("fetch: %w", err)
	}
	return f
}

func describe(conn *pgx.Conn, fds []pgconn.FieldDescription) []Column {
	cols := make([]Column, len(fds))
	for i, fd := range fds {
		name := "text"
		if t, ok := conn.TypeMap().TypeForOID(fd.DataTypeOID); ok {
			name = t.Name
		}
		cols[i] = Column{Name: fd.Name, TypeOID: fd.DataTypeOID, TypeName: name}
	}
	return cols
}

// timestampValue converts mz_timestamp (numeric, scale 0) to uint64.
func timestampValue(v any) (uint64, error) {
	n, ok := v.(pgtype.Numeric)
	if !ok || !n.Valid || n.NaN || n.InfinityModifier != pgtype.Finite || n.Int == nil {
		return 0, fmt.Errorf("decode row: mz_timestamp is %v, want a numeric", v)
	}
	i := new(big.Int).Set(n.Int)
	if n.Exp > 0 {
		i.Mul(i, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.Exp)), nil))
	} else if n.Exp < 0 {
		i.Quo(i, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-n.Exp)), nil))
	}
	if i.Sign() < 0 || !i.IsUint64() {
		return 0, fmt.Errorf("decode row: mz_timestamp %s out of range", i)
	}
	return i.Uint64(), nil
}
