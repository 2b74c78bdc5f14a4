package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// DefaultCheckpointTable is TableCheckpoint's table when Table is empty.
const DefaultCheckpointTable = "consumer_checkpoints"

// TableCheckpoint is a Checkpoint in a table of shardtail itself, one row
// per Name: for a sink whose target cannot hold its own position. It gives
// at least once (the data is written before the position). The
// compare-and-set is one UPDATE … WHERE the stored position is expected,
// which shardtail applies as an atomic read-modify-write, so workers in
// different processes fence each other.
type TableCheckpoint struct {
	// URL is the shardtail server.
	URL string
	// Name is this consumer's row.
	Name string
	// Table is the table (created if missing); DefaultCheckpointTable
	// if empty.
	Table string

	mu   sync.Mutex
	conn *pgx.Conn // mu must be held; nil until used or after a failure
}

func (c *TableCheckpoint) table() string {
	if c.Table == "" {
		return DefaultCheckpointTable
	}
	return c.Table
}

// session returns the connection, connecting and creating the table and
// the row on first use. mu must be held.
func (c *TableCheckpoint) session(ctx context.Context) (*pgx.Conn, error) {
	if c.conn != nil {
		return c.conn, nil
	}
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: connect: %w", err)
	}
	t := pgx.Identifier{c.table()}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+t+" (name text NOT NULL, frontier text NOT NULL, generation int8 NOT NULL, objects text NOT NULL)"); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("checkpoint: create %s: %w", c.table(), err)
	}
	var name string
	err = conn.QueryRow(ctx, "SELECT name FROM "+t+" WHERE name = $1", c.Name).Scan(&name)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		conn.Close(ctx)
		return nil, fmt.Errorf("checkpoint: read: %w", err)
	}
	if err != nil {
		// Two workers may both insert the zero row: identical rows,
		// which every UPDATE moves together, so the CAS still admits
		// one of them.
		if _, err := conn.Exec(ctx, "INSERT INTO "+t+" VALUES ($1, '0', 0, '')", c.Name); err != nil {
			conn.Close(ctx)
			return nil, fmt.Errorf("checkpoint: create row: %w", err)
		}
	}
	c.conn = conn
	return conn, nil
}

// fail drops the connection after an error, so the next call reconnects.
// mu must be held.
func (c *TableCheckpoint) fail(ctx context.Context) {
	if c.conn != nil {
		c.conn.Close(context.WithoutCancel(ctx))
		c.conn = nil
	}
}

// Load reads the position.
func (c *TableCheckpoint) Load(ctx context.Context) (Position, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	conn, err := c.session(ctx)
	if err != nil {
		return Position{}, err
	}
	var f, objects string
	var p Position
	err = conn.QueryRow(ctx, "SELECT frontier, generation, objects FROM "+pgx.Identifier{c.table()}.Sanitize()+" WHERE name = $1", c.Name).
		Scan(&f, &p.Generation, &objects)
	if err != nil {
		c.fail(ctx)
		return Position{}, fmt.Errorf("checkpoint: read: %w", err)
	}
	n, err := strconv.ParseUint(f, 10, 64)
	if err != nil {
		return Position{}, fmt.Errorf("checkpoint: frontier %q: %w", f, err)
	}
	p.Frontier = Frontier(n)
	if objects != "" {
		p.Objects = strings.Split(objects, ",")
	}
	return p, nil
}

// Commit moves the row from expected to next.
func (c *TableCheckpoint) Commit(ctx context.Context, expected, next Position) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	conn, err := c.session(ctx)
	if err != nil {
		return err
	}
	tag, err := conn.Exec(ctx, "UPDATE "+pgx.Identifier{c.table()}.Sanitize()+
		" SET frontier = $2, generation = $3::int8, objects = $4 WHERE name = $1 AND frontier = $5 AND generation = $6::int8 AND objects = $7",
		// Every argument as text: the server infers text for these
		// parameters and casts.
		c.Name, strconv.FormatUint(uint64(next.Frontier), 10), strconv.FormatInt(next.Generation, 10), strings.Join(next.Objects, ","),
		strconv.FormatUint(uint64(expected.Frontier), 10), strconv.FormatInt(expected.Generation, 10), strings.Join(expected.Objects, ","))
	if err != nil {
		c.fail(ctx)
		return fmt.Errorf("checkpoint: update: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s row is not at frontier %d generation %d", ErrFenced, c.Name, expected.Frontier, expected.Generation)
	}
	return nil
}

// Close closes the connection.
func (c *TableCheckpoint) Close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close(ctx)
	c.conn = nil
	return err
}
