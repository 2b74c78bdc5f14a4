package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/consensus/internal/doorbell"
	"github.com/shardtail/shardtail/persist/consensus/internal/validate"
)

var (
	_ persist.Consensus = (*Consensus)(nil)
	_ persist.Watcher   = (*Consensus)(nil)
)

// NotifyChannel is the LISTEN/NOTIFY channel on which every committed
// CompareAndSet publishes its key.
const NotifyChannel = "shardtail_consensus"

const (
	createTableSQL = `CREATE TABLE IF NOT EXISTS consensus (
	shard text NOT NULL,
	sequence_number bigint NOT NULL,
	data bytea NOT NULL,
	PRIMARY KEY (shard, sequence_number)
)`

	headSQL = `SELECT sequence_number, data FROM consensus
WHERE shard = $1 ORDER BY sequence_number DESC LIMIT 1`

	casSQL = `INSERT INTO consensus (shard, sequence_number, data)
SELECT $1, $2, $3
WHERE (SELECT sequence_number FROM consensus
       WHERE shard = $1 ORDER BY sequence_number DESC LIMIT 1) = $4`

	initSQL = `INSERT INTO consensus (shard, sequence_number, data)
SELECT $1, $2, $3
WHERE NOT EXISTS (SELECT * FROM consensus WHERE shard = $1)`

	scanSQL = `SELECT sequence_number, data FROM consensus
WHERE shard = $1 AND sequence_number >= $2
ORDER BY sequence_number ASC LIMIT $3`

	// truncateSQL returns the head (NULL: no versions) and how many rows
	// it deleted; it deletes only if seqno <= head. Both CTEs see one
	// snapshot, so the check and the delete are atomic.
	truncateSQL = `WITH head AS (
	SELECT max(sequence_number) AS seq FROM consensus WHERE shard = $1
), deleted AS (
	DELETE FROM consensus
	WHERE shard = $1 AND sequence_number < $2 AND $2 <= (SELECT seq FROM head)
	RETURNING 1
)
SELECT (SELECT seq FROM head), (SELECT count(*) FROM deleted)`

	listKeysSQL = `SELECT DISTINCT shard FROM consensus`
)

// withNotify wraps an insert so that it also notifies NotifyChannel, in the
// same transaction; it returns one row per inserted row.
func withNotify(insert string) string {
	return "WITH ins AS (" + insert + "\nRETURNING shard)\nSELECT pg_notify('" + NotifyChannel + "', shard) FROM ins"
}

const (
	// maxAttempts bounds the tries of a statement that fails retryably.
	maxAttempts = 8
	// maxBackoff caps the wait between tries.
	maxBackoff = 100 * time.Millisecond
)

// Consensus is a persist.Consensus in a PostgreSQL or CockroachDB table.
// Create it with Open.
type Consensus struct {
	pool   *pgxpool.Pool
	listen *pgx.ConnConfig // the listener's connection settings

	// notify: the server has LISTEN/NOTIFY (PostgreSQL, not CockroachDB).
	// casSQL and initSQL are the statements CompareAndSet runs.
	notify          bool
	casSQL, initSQL string

	bell doorbell.Bell

	pidMu sync.Mutex
	pids  map[uint32]struct{} // pidMu must be held. Backend PIDs of the pool's connections.

	mu        sync.Mutex
	closed    bool // mu must be held.
	listening bool // mu must be held. The listener goroutine was started.

	ctx    context.Context // canceled by Close; the listener's lifetime
	cancel context.CancelFunc
	wg     sync.WaitGroup // the listener

	closeOnce sync.Once
}

// Open connects to the database at url (a postgres:// or postgresql:// URL,
// or a key=value DSN; pgxpool settings such as pool_max_conns may ride
// along) and creates the consensus table if it is missing.
func Open(ctx context.Context, url string) (*Consensus, error) {
	cfg, err := pgxpool.ParseConfig(url) // its errors never show the password
	if err != nil {
		return nil, fmt.Errorf("postgres consensus: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "serializable"
	c := &Consensus{
		listen: cfg.ConnConfig.Copy(),
		pids:   make(map[uint32]struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	cfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		c.pidMu.Lock()
		c.pids[conn.PgConn().PID()] = struct{}{}
		c.pidMu.Unlock()
		return nil
	}
	cfg.BeforeClose = func(conn *pgx.Conn) {
		c.pidMu.Lock()
		delete(c.pids, conn.PgConn().PID())
		c.pidMu.Unlock()
	}
	c.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		c.cancel()
		return nil, fmt.Errorf("postgres consensus: %w", err)
	}
	if err := c.init(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("postgres consensus: open: %w", err)
	}
	return c, nil
}

// init tells PostgreSQL from CockroachDB and creates the table.
func (c *Consensus) init(ctx context.Context) error {
	var version string
	err := c.retry(ctx, func(ctx context.Context) error {
		return c.pool.QueryRow(ctx, "SELECT version()").Scan(&version)
	})
	if err != nil {
		return fmt.Errorf("server version: %w", err)
	}
	c.notify = !strings.Contains(version, "CockroachDB")
	c.casSQL, c.initSQL = casSQL, initSQL
	if c.notify {
		c.casSQL, c.initSQL = withNotify(casSQL), withNotify(initSQL)
	}

	for attempt := 1; ; attempt++ {
		err = c.retry(ctx, func(ctx context.Context) error {
			_, err := c.pool.Exec(ctx, createTableSQL)
			return err
		})
		// A concurrent CREATE TABLE IF NOT EXISTS in another session can
		// fail on the catalog's unique index, on the table's row type
		// (42710 duplicate_object: type "consensus" already exists) or find
		// the table created meanwhile; the next try sees it and does
		// nothing.
		if (isCode(err, codeUniqueViolation) || isCode(err, codeDuplicateTable) || isCode(err, "42710")) && attempt < maxAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("create table: %w", err)
		}
		return nil
	}
}

// Head returns the latest version of key, or nil if it has none.
func (c *Consensus) Head(ctx context.Context, key string) (*persist.VersionedData, error) {
	if err := ctx.Err(); err != nil {
		return nil, readError("head", key, err)
	}
	var head *persist.VersionedData
	err := c.retry(ctx, func(ctx context.Context) error {
		var seq int64
		var data []byte
		err := c.pool.QueryRow(ctx, headSQL, key).Scan(&seq, &data)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			head = nil
			return nil
		case err != nil:
			return err
		}
		head = &persist.VersionedData{SeqNo: persist.SeqNo(seq), Data: data}
		return nil
	})
	if err != nil {
		return nil, readError("head", key, err)
	}
	return head, nil
}

// CompareAndSet appends new to key's log iff the head is expected (nil: the
// key has no versions) and new.SeqNo is greater.
func (c *Consensus) CompareAndSet(ctx context.Context, key string, expected *persist.SeqNo, new persist.VersionedData) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, readError("cas", key, err) // nothing attempted
	}
	if err := validate.CompareAndSet(expected, new); err != nil {
		return false, readError("cas", key, err)
	}
	data := new.Data
	if data == nil {
		data = []byte{} // pgx sends a nil slice as NULL
	}
	sql, args := c.initSQL, []any{key, int64(new.SeqNo), data}
	if expected != nil {
		sql, args = c.casSQL, append(args, int64(*expected))
	}
	var committed bool
	err := c.retry(ctx, func(ctx context.Context) error {
		conn, err := c.pool.Acquire(ctx)
		if err != nil {
			return &acquireError{err}
		}
		defer conn.Release()
		tag, err := conn.Exec(ctx, sql, args...)
		if err != nil {
			return err
		}
		committed = tag.RowsAffected() > 0
		return nil
	})
	switch {
	case isCode(err, codeUniqueViolation):
		return false, nil // a racing CAS inserted this SeqNo first
	case err != nil:
		return false, writeError("cas", key, err)
	}
	if committed {
		c.bell.Ring(key)
	}
	return committed, nil
}

// Scan returns up to limit versions of key with SeqNo >= from, ascending.
func (c *Consensus) Scan(ctx context.Context, key string, from persist.SeqNo, limit int) ([]persist.VersionedData, error) {
	if err := ctx.Err(); err != nil {
		return nil, readError("scan", key, err)
	}
	if err := validate.Limit(limit); err != nil {
		return nil, readError("scan", key, err)
	}
	if from > validate.MaxSeqNo || limit == 0 {
		return []persist.VersionedData{}, nil
	}
	var out []persist.VersionedData
	err := c.retry(ctx, func(ctx context.Context) error {
		out = []persist.VersionedData{}
		rows, err := c.pool.Query(ctx, scanSQL, key, int64(from), int64(limit))
		if err != nil {
			return err
		}
		var seq int64
		var data []byte
		_, err = pgx.ForEachRow(rows, []any{&seq, &data}, func() error {
			out = append(out, persist.VersionedData{SeqNo: persist.SeqNo(seq), Data: data})
			data = nil // Scan into a nil slice allocates; keep each row's bytes
			return nil
		})
		return err
	})
	if err != nil {
		return nil, readError("scan", key, err)
	}
	return out, nil
}

// Truncate deletes the versions of key below seqno and returns how many it
// deleted; seqno beyond the head, or a key with no versions, is
// persist.ErrTruncateBeyondHead.
func (c *Consensus) Truncate(ctx context.Context, key string, seqno persist.SeqNo) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, readError("truncate", key, err) // nothing attempted
	}
	if seqno > validate.MaxSeqNo {
		return 0, fmt.Errorf("postgres consensus: truncate %q to %s: %w", key, seqno, persist.ErrTruncateBeyondHead)
	}
	var head *int64
	var deleted int64
	err := c.retry(ctx, func(ctx context.Context) error {
		conn, err := c.pool.Acquire(ctx)
		if err != nil {
			return &acquireError{err}
		}
		defer conn.Release()
		return conn.QueryRow(ctx, truncateSQL, key, int64(seqno)).Scan(&head, &deleted)
	})
	switch {
	case err != nil:
		return 0, writeError("truncate", key, err)
	case head == nil:
		return 0, fmt.Errorf("postgres consensus: truncate %q to %s: no versions: %w", key, seqno, persist.ErrTruncateBeyondHead)
	case persist.SeqNo(*head) < seqno:
		return 0, fmt.Errorf("postgres consensus: truncate %q to %s: head is %s: %w", key, seqno, persist.SeqNo(*head), persist.ErrTruncateBeyondHead)
	}
	return int(deleted), nil
}

// ListKeys returns every key with versions; since Truncate never deletes a
// head, that is every key ever written.
func (c *Consensus) ListKeys(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, readError("list keys", "", err)
	}
	var keys []string
	err := c.retry(ctx, func(ctx context.Context) error {
		rows, err := c.pool.Query(ctx, listKeysSQL)
		if err != nil {
			return err
		}
		keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, readError("list keys", "", err)
	}
	if keys == nil {
		keys = []string{}
	}
	return keys, nil
}

// Close stops the listener, closes every Watch channel and the pool (after
// the operations in flight); later operations fail with a determinate
// error. It is idempotent.
func (c *Consensus) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.cancel()
		c.wg.Wait()
		c.bell.Close()
		c.pool.Close()
	})
	return nil
}

// retry runs op until it succeeds, fails with an error that is not worth
// retrying, maxAttempts run out, or ctx is done. Retried errors are
// determinate (see retryable), so a retry never repeats an operation that
// may have happened.
func (c *Consensus) retry(ctx context.Context, op func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil || !retryable(err) || attempt == maxAttempts {
			return err
		}
		// Full jitter: racing writers that collided spread out.
		backoff := min(time.Millisecond<<attempt, maxBackoff)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(rand.N(backoff) + time.Millisecond):
		}
	}
}
