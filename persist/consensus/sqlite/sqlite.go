package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/consensus/internal/doorbell"
	"github.com/shardtail/shardtail/persist/consensus/internal/validate"
)

var (
	_ persist.Consensus = (*Consensus)(nil)
	_ persist.Watcher   = (*Consensus)(nil)
)

const (
	createTableSQL = `CREATE TABLE IF NOT EXISTS consensus (
	shard TEXT NOT NULL,
	sequence_number INTEGER NOT NULL,
	data BLOB NOT NULL,
	PRIMARY KEY (shard, sequence_number)
)`

	headSQL = `SELECT sequence_number, data FROM consensus
WHERE shard = ?1 ORDER BY sequence_number DESC LIMIT 1`

	headSeqSQL = `SELECT max(sequence_number) FROM consensus WHERE shard = ?1`

	// ifnull: the driver binds a nil []byte as NULL, and a version may
	// carry no data.
	casSQL = `INSERT INTO consensus (shard, sequence_number, data)
SELECT ?1, ?2, ifnull(?3, x'')
WHERE (SELECT sequence_number FROM consensus
       WHERE shard = ?1 ORDER BY sequence_number DESC LIMIT 1) = ?4`

	initSQL = `INSERT INTO consensus (shard, sequence_number, data)
SELECT ?1, ?2, ifnull(?3, x'')
WHERE NOT EXISTS (SELECT 1 FROM consensus WHERE shard = ?1)`

	// No LIMIT ?: SQLite marks a LIMIT bound as a parameter as one whose
	// value may change the plan, and prepares the statement again whenever
	// a call binds another (half of a Scan's time: BenchmarkScan 17-23 µs
	// with it, 11 µs without); Scan stops reading at its limit instead,
	// and SQLite reads no further: the rows come in the primary key's
	// order, one step at a time.
	scanSQL = `SELECT sequence_number, data FROM consensus
WHERE shard = ?1 AND sequence_number >= ?2
ORDER BY sequence_number ASC`

	truncateSQL = `DELETE FROM consensus WHERE shard = ?1 AND sequence_number < ?2`

	listKeysSQL = `SELECT DISTINCT shard FROM consensus`
)

// Consensus is a persist.Consensus in a SQLite file. Create it with Open.
type Consensus struct {
	path string
	w    *sql.DB // one connection: CompareAndSet and Truncate
	r    *sql.DB // MaxReaders query_only connections: Head, Scan, ListKeys
	// head and scan are Head's and Scan's statements on r, prepared once
	// per connection: the driver parses a statement given as text at every
	// call, which cost a new snapshot cursor's Head a fifth of its time.
	head, scan *sql.Stmt

	bell doorbell.Bell

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the consensus file cfg.Path.
func Open(ctx context.Context, cfg Config) (*Consensus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	path, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("sqlite consensus: %w", err)
	}
	c := &Consensus{path: path}

	c.w, err = sql.Open("sqlite", dsn(path, cfg, "_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("sqlite consensus: open %s: %w", path, err)
	}
	c.w.SetMaxOpenConns(1)
	c.w.SetMaxIdleConns(1)
	c.w.SetConnMaxIdleTime(0)
	c.w.SetConnMaxLifetime(0)
	if err := c.init(ctx); err != nil {
		c.w.Close()
		return nil, fmt.Errorf("sqlite consensus: open %s: %w", path, err)
	}

	c.r, err = sql.Open("sqlite", dsn(path, cfg, "_query_only=1"))
	if err != nil {
		c.w.Close()
		return nil, fmt.Errorf("sqlite consensus: open %s: %w", path, err)
	}
	c.r.SetMaxOpenConns(cfg.MaxReaders)
	c.r.SetMaxIdleConns(cfg.MaxReaders)
	c.r.SetConnMaxIdleTime(0)
	c.r.SetConnMaxLifetime(0)
	if err := c.prepare(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("sqlite consensus: open %s: %w", path, err)
	}
	return c, nil
}

// prepare prepares the readers' statements (on one connection; database/sql
// prepares them again on each other connection the first time it runs them
// there, then keeps them).
func (c *Consensus) prepare(ctx context.Context) error {
	var err error
	if c.head, err = c.r.PrepareContext(ctx, headSQL); err != nil {
		return fmt.Errorf("prepare head: %w", err)
	}
	if c.scan, err = c.r.PrepareContext(ctx, scanSQL); err != nil {
		return fmt.Errorf("prepare scan: %w", err)
	}
	return nil
}

// dsn is the driver's data source name for path: a file: URI (so that any
// byte of the path survives) with the connection settings every connection
// applies on open, busy_timeout first.
func dsn(path string, cfg Config, extra string) string {
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL") // see "Durability" in doc.go
	return (&url.URL{Scheme: "file", Path: path}).String() + "?" + q.Encode() + "&" + extra
}

// init creates the table and checks that the file really is in WAL mode:
// on a file system without shared memory SQLite silently keeps a rollback
// journal, under which readers and the writer block each other.
func (c *Consensus) init(ctx context.Context) error {
	if _, err := c.w.ExecContext(ctx, createTableSQL); err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	var mode string
	if err := c.w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("journal mode: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("journal mode is %q, want wal (is the file on a network file system?)", mode)
	}
	return nil
}

// Head returns the latest version of key, or nil if it has none.
func (c *Consensus) Head(ctx context.Context, key string) (*persist.VersionedData, error) {
	if err := ctx.Err(); err != nil {
		return nil, c.errorf("head %q: %w", key, err)
	}
	var v persist.VersionedData
	var seq int64
	err := c.head.QueryRowContext(ctx, key).Scan(&seq, &v.Data)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, c.errorf("head %q: %w", key, err)
	}
	v.SeqNo = persist.SeqNo(seq)
	return &v, nil
}

// CompareAndSet appends new to key's log iff the head is expected (nil: the
// key has no versions) and new.SeqNo is greater.
func (c *Consensus) CompareAndSet(ctx context.Context, key string, expected *persist.SeqNo, new persist.VersionedData) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, c.errorf("cas %q: %w", key, err)
	}
	if err := validate.CompareAndSet(expected, new); err != nil {
		return false, c.errorf("cas %q: %w", key, err)
	}
	conn, err := c.w.Conn(ctx)
	if err != nil {
		return false, c.errorf("cas %q: %w", key, err)
	}
	defer conn.Close()

	// Detach cancellation: see "Errors" in doc.go.
	run := context.WithoutCancel(ctx)
	var res sql.Result
	if expected == nil {
		res, err = conn.ExecContext(run, initSQL, key, int64(new.SeqNo), new.Data)
	} else {
		res, err = conn.ExecContext(run, casSQL, key, int64(new.SeqNo), new.Data, int64(*expected))
	}
	if err != nil {
		if isDuplicate(err) {
			// Unreachable while SeqNos only grow (the write lock orders
			// every CAS), but a duplicate key is a mismatch, not a failure.
			return false, nil
		}
		return false, c.writeError("cas", key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, c.writeError("cas", key, err)
	}
	if n == 0 {
		return false, nil
	}
	c.bell.Ring(key)
	return true, nil
}

// Scan returns up to limit versions of key with SeqNo >= from, ascending.
func (c *Consensus) Scan(ctx context.Context, key string, from persist.SeqNo, limit int) ([]persist.VersionedData, error) {
	if err := ctx.Err(); err != nil {
		return nil, c.errorf("scan %q: %w", key, err)
	}
	if err := validate.Limit(limit); err != nil {
		return nil, c.errorf("scan %q: %w", key, err)
	}
	out := []persist.VersionedData{}
	if from > validate.MaxSeqNo || limit == 0 {
		return out, nil
	}
	rows, err := c.scan.QueryContext(ctx, key, int64(from))
	if err != nil {
		return nil, c.errorf("scan %q: %w", key, err)
	}
	defer rows.Close()
	for len(out) < limit && rows.Next() {
		var v persist.VersionedData
		var seq int64
		if err := rows.Scan(&seq, &v.Data); err != nil {
			return nil, c.errorf("scan %q: %w", key, err)
		}
		v.SeqNo = persist.SeqNo(seq)
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, c.errorf("scan %q: %w", key, err)
	}
	return out, nil
}

// Truncate deletes the versions of key below seqno and returns how many it
// deleted; seqno beyond the head, or a key with no versions, is
// persist.ErrTruncateBeyondHead. The head check and the delete run in one
// BEGIN IMMEDIATE transaction, so no CAS slips between them.
func (c *Consensus) Truncate(ctx context.Context, key string, seqno persist.SeqNo) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, c.errorf("truncate %q: %w", key, err)
	}
	if seqno > validate.MaxSeqNo {
		return 0, c.errorf("truncate %q to %s: %w", key, seqno, persist.ErrTruncateBeyondHead)
	}
	conn, err := c.w.Conn(ctx)
	if err != nil {
		return 0, c.errorf("truncate %q: %w", key, err)
	}
	defer conn.Close()

	run := context.WithoutCancel(ctx) // as in CompareAndSet
	tx, err := conn.BeginTx(run, nil) // BEGIN IMMEDIATE: _txlock in the writer's DSN
	if err != nil {
		return 0, c.writeError("truncate", key, err)
	}
	defer tx.Rollback() // after Commit, a no-op

	var head sql.NullInt64
	err = tx.QueryRowContext(run, headSeqSQL, key).Scan(&head)
	switch {
	case err != nil:
		return 0, c.errorf("truncate %q: %w", key, err) // nothing written yet
	case !head.Valid:
		return 0, c.errorf("truncate %q to %s: no versions: %w", key, seqno, persist.ErrTruncateBeyondHead)
	case persist.SeqNo(head.Int64) < seqno:
		return 0, c.errorf("truncate %q to %s: head is %s: %w", key, seqno, persist.SeqNo(head.Int64), persist.ErrTruncateBeyondHead)
	}
	res, err := tx.ExecContext(run, truncateSQL, key, int64(seqno))
	if err != nil {
		return 0, c.writeError("truncate", key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, c.writeError("truncate", key, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, c.writeError("truncate", key, err)
	}
	return int(n), nil
}

// ListKeys returns every key with versions; since Truncate never deletes a
// head, that is every key ever written.
func (c *Consensus) ListKeys(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, c.errorf("list keys: %w", err)
	}
	rows, err := c.r.QueryContext(ctx, listKeysSQL)
	if err != nil {
		return nil, c.errorf("list keys: %w", err)
	}
	defer rows.Close()
	keys := []string{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, c.errorf("list keys: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, c.errorf("list keys: %w", err)
	}
	return keys, nil
}

// Watch returns a channel that receives the key of every CompareAndSet this
// Consensus commits from now on, until ctx is done or Close; then the
// channel is closed. Other processes' commits do not ring; nor do rings
// survive a full channel (see WatchDrops). Watchers must poll as well.
func (c *Consensus) Watch(ctx context.Context) (<-chan string, error) {
	ch, err := c.bell.Watch(ctx)
	if err != nil {
		return nil, c.errorf("watch: %w", err)
	}
	return ch, nil
}

// WatchDrops returns how many rings were dropped because a watcher's
// channel was full.
func (c *Consensus) WatchDrops() uint64 { return c.bell.Dropped() }

// Close closes every Watch channel and both connection pools; later
// operations fail with a determinate error. It is idempotent.
func (c *Consensus) Close() error {
	c.closeOnce.Do(func() {
		c.bell.Close()
		var stmts []error
		for _, st := range []*sql.Stmt{c.head, c.scan} {
			if st != nil { // nil if Open failed preparing it
				stmts = append(stmts, st.Close())
			}
		}
		c.closeErr = errors.Join(append(stmts, c.r.Close(), c.w.Close())...)
		if c.closeErr != nil {
			c.closeErr = c.errorf("close: %w", c.closeErr)
		}
	})
	return c.closeErr
}

// errorf formats a determinate error, naming the file.
func (c *Consensus) errorf(format string, args ...any) error {
	return fmt.Errorf("sqlite consensus %s: "+format, append([]any{c.path}, args...)...)
}

// writeError classifies the error of a write statement that ran (see
// classify.go).
func (c *Consensus) writeError(op, key string, err error) error {
	if determinate(err) {
		return c.errorf("%s %q: %w", op, key, err)
	}
	return fmt.Errorf("%w: sqlite consensus %s: %s %q: %w", persist.ErrIndeterminate, c.path, op, key, err)
}
