package pgsink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardtail/shardtail/consumer"
)

// The sink's own tables in the target database.
const (
	// CheckpointTable holds one row per sink name: its Position.
	CheckpointTable = "shardtail_sink_checkpoints"
	// DeadLetterTable holds the rows the target rejected, with the
	// reason, when the policy is DeadLetter.
	DeadLetterTable = "shardtail_sink_dead_letters"
)

// RejectPolicy is what the sink does with a row the target rejects (a
// constraint violation, a value it cannot store, a key violation in the
// source).
type RejectPolicy int

const (
	// DeadLetter stores the row and the reason in DeadLetterTable, in the
	// batch's transaction (default).
	DeadLetter RejectPolicy = iota
	// Stall fails the write: the sink stops at the batch.
	Stall
	// Skip logs the row and counts it, and lands the rest.
	Skip
)

// ParseRejectPolicy parses "dead-letter", "stall" or "skip".
func ParseRejectPolicy(s string) (RejectPolicy, error) {
	switch s {
	case "dead-letter":
		return DeadLetter, nil
	case "stall":
		return Stall, nil
	case "skip":
		return Skip, nil
	}
	return 0, fmt.Errorf("reject policy %q: want dead-letter, stall or skip", s)
}

// Table is the target of one source.
type Table struct {
	// Name is the target table (an unquoted identifier, created if
	// missing).
	Name string
	// Key are the primary key columns; the source must be subscribed
	// with ENVELOPE UPSERT (KEY (Key...)) (see Envelope).
	Key []string
}

// Envelope returns the envelope clause the sink expects its source to be
// subscribed with.
func (t Table) Envelope() string {
	return "ENVELOPE UPSERT (KEY (" + strings.Join(t.Key, ", ") + "))"
}

// Config configures a Sink.
type Config struct {
	// URL is the target database.
	URL string
	// Name identifies the sink's row in CheckpointTable; two processes
	// with one name fence each other.
	Name string
	// Tables are the targets, one per consumer source, in order.
	Tables []Table
	// OnReject decides what happens to rejected rows.
	OnReject RejectPolicy
	// Registerer, if set, receives the sink's metrics.
	Registerer prometheus.Registerer
	// Logger receives skipped rows; nil discards them.
	Logger *slog.Logger
}

// Sink lands batches of ENVELOPE UPSERT subscribes into PostgreSQL tables.
// It is a consumer.Sink and the consumer.Checkpoint of the same data: Write
// opens a transaction, Commit stores the position in it and commits, so
// each batch lands exactly once.
//
// A snapshot (Batch.Snapshot) is loaded with COPY into a new table that
// replaces the target in the committing transaction: readers see the old
// table or the new one, never a half-loaded one. Other batches are
// consolidated by key (the last state of each key in the batch wins) and
// applied as one upsert and one delete per table.
//
// A Sink is used by one goroutine (Run's).
type Sink struct {
	cfg  Config
	conn *pgx.Conn
	pos  consumer.Position // last loaded or committed

	tx      pgx.Tx
	loading map[int]bool // tables whose new snapshot this transaction loads

	// temps are the temporary staging tables the connection has;
	// newTemps those the open transaction created (gone if it aborts).
	temps    map[string]bool
	newTemps []string
	// used are the staging tables the open transaction has filled: the
	// others are empty (ON COMMIT DELETE ROWS, or rolled back).
	used map[string]bool

	rejected prometheus.Counter
}

// New connects to the target and creates the sink's own tables.
func New(ctx context.Context, cfg Config) (*Sink, error) {
	if cfg.Name == "" || len(cfg.Tables) == 0 {
		return nil, errors.New("pgsink config: Name and Tables are required")
	}
	for _, t := range cfg.Tables {
		if t.Name == "" || len(t.Key) == 0 {
			return nil, fmt.Errorf("pgsink config: table %q needs a name and a key", t.Name)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	conn, err := pgx.Connect(ctx, cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("connect target: %w", err)
	}
	s := &Sink{cfg: cfg, conn: conn, loading: map[int]bool{}, temps: map[string]bool{}, used: map[string]bool{},
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pgsink_rejected_rows_total", Help: "Rows the target rejected (dead-lettered, skipped or stalled on)."})}
	if cfg.Registerer != nil {
		// A process that reopens its target after a failure registers
		// again: keep counting on the first counter.
		var are prometheus.AlreadyRegisteredError
		if err := cfg.Registerer.Register(s.rejected); errors.As(err, &are) {
			s.rejected = are.ExistingCollector.(prometheus.Counter)
		} else if err != nil {
			conn.Close(ctx)
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	// Data and position commit together, so a target crash that loses
	// the last commits (synchronous_commit off) rolls both back to an
	// earlier batch, which the next run lands again: exactly once still
	// holds, and a batch does not wait for the target's WAL flush.
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("set synchronous_commit: %w", err)
	}
	ddl := []string{
		`CREATE TABLE IF NOT EXISTS ` + CheckpointTable + ` (
			sink text PRIMARY KEY,
			frontier numeric(20, 0) NOT NULL,
			generation int8 NOT NULL,
			objects text[] NOT NULL DEFAULT '{}')`,
		`CREATE TABLE IF NOT EXISTS ` + DeadLetterTable + ` (
			sink text NOT NULL,
			table_name text NOT NULL,
			frontier numeric(20, 0) NOT NULL,
			reason text NOT NULL,
			row_json text NOT NULL,
			at timestamptz NOT NULL DEFAULT now())`,
	}
	for _, q := range ddl {
		if _, err := conn.Exec(ctx, q); err != nil && !isCode(err, "23505", "42P07") {
			// Two sinks creating the table at once: one loses the race
			// with a unique violation on the catalog; the table exists.
			conn.Close(ctx)
			return nil, fmt.Errorf("create %s: %w", q[27:60], err)
		}
	}
	if _, err := conn.Exec(ctx, `INSERT INTO `+CheckpointTable+` (sink, frontier, generation) VALUES ($1, 0, 0) ON CONFLICT DO NOTHING`, cfg.Name); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("create checkpoint row: %w", err)
	}
	return s, nil
}

// Close aborts any open transaction and closes the connection.
func (s *Sink) Close(ctx context.Context) error {
	s.Abort(ctx) //nolint:errcheck // the connection goes anyway
	return s.conn.Close(ctx)
}

// Load reads the sink's position.
func (s *Sink) Load(ctx context.Context) (consumer.Position, error) {
	p, err := s.read(ctx, s.conn, "")
	if err != nil {
		return consumer.Position{}, err
	}
	s.pos = p
	return p, nil
}

func (s *Sink) read(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, suffix string) (consumer.Position, error) {
	return s.scanPosition(q.QueryRow(ctx, readSQL+suffix, s.cfg.Name))
}

// readSQL reads the sink's checkpoint row ($1 is its name).
const readSQL = `SELECT frontier::text, generation, objects FROM ` + CheckpointTable + ` WHERE sink = $1`

func (s *Sink) scanPosition(row pgx.Row) (consumer.Position, error) {
	var f string
	var p consumer.Position
	if err := row.Scan(&f, &p.Generation, &p.Objects); err != nil {
		return p, fmt.Errorf("read checkpoint: %w", err)
	}
	n, err := strconv.ParseUint(f, 10, 64)
	if err != nil {
		return p, fmt.Errorf("read checkpoint: frontier %q: %w", f, err)
	}
	p.Frontier = consumer.Frontier(n)
	if len(p.Objects) == 0 {
		p.Objects = nil
	}
	return p, nil
}

// Write lands b in the open transaction, opening one (and locking the
// checkpoint row) if none is open.
func (s *Sink) Write(ctx context.Context, b consumer.Batch) error {
	if s.tx == nil {
		if err := s.begin(ctx); err != nil {
			return err
		}
	}
	if len(b.Columns) < len(s.cfg.Tables) {
		return ErrNoColumns
	}
	byTable := make([][]consumer.Update, len(s.cfg.Tables))
	for _, u := range b.Updates {
		byTable[u.Collection] = append(byTable[u.Collection], u)
	}
	for i, t := range s.cfg.Tables {
		w := &tableWriter{s: s, tx: s.tx, t: t, cols: b.Columns[i], frontier: b.Upper}
		if err := w.init(); err != nil {
			return err
		}
		ups := byTable[i]
		if b.Snapshot && !s.loading[i] {
			if err := w.createStaging(ctx); err != nil {
				return err
			}
			s.loading[i] = true
		}
		if s.loading[i] {
			w.table = stagingName(t.Name)
		}
		if b.Snapshot {
			// The snapshot's rows (at the batch's lower) go into the
			// empty new table with COPY; later timestamps in the same
			// batch are applied as changes.
			n := 0
			for n < len(ups) && ups[n].Timestamp == uint64(b.Lower) {
				n++
			}
			if err := w.copySnapshot(ctx, ups[:n]); err != nil {
				return err
			}
			ups = ups[n:]
		}
		if err := w.apply(ctx, ups); err != nil {
			return err
		}
	}
	return nil
}

// begin opens the batch's transaction and locks the checkpoint row, so a
// second sink with the same name waits here and then finds itself fenced
// before it writes anything.
func (s *Sink) begin(ctx context.Context) error {
	// BEGIN and the lock share one round trip: every round trip adds to
	// each batch's latency.
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	var cur consumer.Position
	var rerr error
	b.Queue(readSQL+" FOR UPDATE", s.cfg.Name).QueryRow(func(row pgx.Row) error {
		cur, rerr = s.scanPosition(row)
		return rerr
	})
	br := s.conn.SendBatch(ctx, b)
	s.tx = br.Tx()
	if err := br.Close(); err != nil {
		s.Abort(ctx) //nolint:errcheck // the batch's error is the one to report
		if rerr != nil {
			return rerr
		}
		return fmt.Errorf("begin: %w", err)
	}
	if !cur.Equal(s.pos) {
		s.Abort(ctx) //nolint:errcheck // nothing was written
		return fmt.Errorf("%w: stored frontier %d generation %d, this sink had %d generation %d",
			consumer.ErrFenced, cur.Frontier, cur.Generation, s.pos.Frontier, s.pos.Generation)
	}
	return nil
}

// Commit swaps in the tables whose snapshot this transaction loaded, stores
// next and commits.
func (s *Sink) Commit(ctx context.Context, expected, next consumer.Position) error {
	if s.tx == nil {
		if err := s.begin(ctx); err != nil {
			return err
		}
	}
	if !expected.Equal(s.pos) {
		return fmt.Errorf("%w: expected frontier %d, this sink holds %d", consumer.ErrFenced, expected.Frontier, s.pos.Frontier)
	}
	for i := range s.cfg.Tables {
		if s.loading[i] {
			if err := s.swap(ctx, s.cfg.Tables[i].Name); err != nil {
				return err
			}
		}
	}
	objects := next.Objects
	if objects == nil {
		objects = []string{}
	}
	tag, err := s.tx.Exec(ctx, `UPDATE `+CheckpointTable+` SET frontier = $2::numeric, generation = $3, objects = $4
		WHERE sink = $1 AND frontier = $5::numeric AND generation = $6`,
		s.cfg.Name, strconv.FormatUint(uint64(next.Frontier), 10), next.Generation, objects,
		strconv.FormatUint(uint64(expected.Frontier), 10), expected.Generation)
	if err != nil {
		return fmt.Errorf("store checkpoint: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: checkpoint row moved", consumer.ErrFenced)
	}
	err = s.tx.Commit(ctx)
	s.tx = nil
	clear(s.loading)
	clear(s.used)
	if err != nil {
		s.newTemps = s.newTemps[:0]
		return fmt.Errorf("commit: %w", err)
	}
	for _, t := range s.newTemps {
		s.temps[t] = true
	}
	s.newTemps = s.newTemps[:0]
	s.pos = next
	return nil
}

// Abort rolls back the open transaction, if any.
func (s *Sink) Abort(ctx context.Context) error {
	if s.tx == nil {
		return nil
	}
	err := s.tx.Rollback(ctx)
	s.tx = nil
	clear(s.loading)
	clear(s.used)
	s.newTemps = s.newTemps[:0]
	if err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

func stagingName(table string) string { return table + "__shardtail_new" }

// swap replaces table by its staging table, in the open transaction, and
// marks it as this sink's (landedBy). A table another sink landed is not
// replaced: two sinks given one target would each drop the other's rows
// at their snapshots, and then dead-letter every update of the other's
// keys. A table nothing marks (one created by hand to be landed into, or
// by a sink before the mark) is replaced, as documented.
func (s *Sink) swap(ctx context.Context, table string) error {
	var owner *string
	err := s.tx.QueryRow(ctx, `SELECT obj_description(to_regclass($1), 'pg_class')`, ident(table)).Scan(&owner)
	if err != nil {
		return fmt.Errorf("swap in %s: %w", table, err)
	}
	if owner != nil && strings.HasPrefix(*owner, landedByPrefix) && *owner != s.landedBy() {
		return fmt.Errorf("%w: %s (%s)", ErrOtherSinksTable, table, *owner)
	}
	staging := stagingName(table)
	// One simple-protocol query: the statements run in order and stop
	// at the first error.
	q := `DROP TABLE IF EXISTS ` + ident(table) + `;
		ALTER TABLE ` + ident(staging) + ` RENAME TO ` + ident(table) + `;
		ALTER TABLE ` + ident(table) + ` RENAME CONSTRAINT ` + ident(staging+"_pkey") + ` TO ` + ident(table+"_pkey") + `;
		COMMENT ON TABLE ` + ident(table) + ` IS ` + literal(s.landedBy())
	if _, err := s.tx.Exec(ctx, q); err != nil {
		return fmt.Errorf("swap in %s: %w", table, err)
	}
	return nil
}

// landedByPrefix begins the comment that marks a target table as a sink's.
const landedByPrefix = "landed by shardtail sink "

// landedBy is the comment that marks a target table as this sink's.
func (s *Sink) landedBy() string { return landedByPrefix + s.cfg.Name }

// literal quotes v as an SQL string literal (standard_conforming_strings,
// PostgreSQL's default since 9.1): COMMENT takes no parameter.
func literal(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

func isCode(err error, codes ...string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && slices.Contains(codes, pe.Code)
}

// reject handles one row the target would not take.
func (s *Sink) reject(ctx context.Context, tx pgx.Tx, table string, frontier consumer.Frontier, vals []any, reason string) error {
	s.rejected.Inc()
	switch s.cfg.OnReject {
	case Stall:
		return fmt.Errorf("%w: table %s: %s: %v", ErrRejected, table, reason, vals)
	case Skip:
		s.cfg.Logger.Warn("pgsink: skipped a rejected row", "table", table, "reason", reason, "row", fmt.Sprint(vals...))
		return nil
	}
	row, err := json.Marshal(vals)
	if err != nil {
		row = []byte(strconv.Quote(fmt.Sprint(vals...)))
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+DeadLetterTable+` (sink, table_name, frontier, reason, row_json) VALUES ($1, $2, $3::numeric, $4, $5)`,
		s.cfg.Name, table, strconv.FormatUint(uint64(frontier), 10), reason, string(row)); err != nil {
		return fmt.Errorf("dead letter: %w", err)
	}
	return nil
}
