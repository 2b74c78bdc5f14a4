package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// connect opens one connection with a bounded dial.
func connect(ctx context.Context, url string) (*pgconn.PgConn, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return pgconn.Connect(cctx, url)
}

// execSQL runs statements one by one on a new connection.
func execSQL(ctx context.Context, url string, stmts ...string) error {
	c, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	for _, s := range stmts {
		if _, err := c.Exec(ctx, s).ReadAll(); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// payload returns the deterministic payload of row id, n bytes of hex, so
// that every server of a run holds the same rows.
func payload(dst []byte, id int64, n int) []byte {
	const hexdigits = "0123456789abcdef"
	x := uint64(id)*0x9E3779B97F4A7C15 + 1
	for i := 0; i < n; i++ {
		if i%16 == 0 && i > 0 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		dst = append(dst, hexdigits[(x>>(4*(i%16)))&15])
	}
	return dst
}

// copyRows loads rows (id, payload) for ids [first, first+n) into table with
// COPY FROM STDIN, streaming them from a generator.
func copyRows(ctx context.Context, url, table string, first, n int64, payloadBytes int) error {
	c, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(pw, 256<<10)
		line := make([]byte, 0, payloadBytes+32)
		for id := first; id < first+n; id++ {
			line = strconv.AppendInt(line[:0], id, 10)
			line = append(line, '\t')
			line = payload(line, id, payloadBytes)
			line = append(line, '\n')
			if _, err := bw.Write(line); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(bw.Flush())
	}()
	tag, err := c.CopyFrom(ctx, pr, "COPY "+table+" FROM STDIN")
	pr.Close()
	if err != nil {
		return fmt.Errorf("copy %d rows into %s: %w", n, table, err)
	}
	if tag.RowsAffected() != n {
		return fmt.Errorf("copy into %s: %s, want %d rows", table, tag, n)
	}
	return nil
}

// waitRows subscribes to relation with one client until its snapshot holds
// want rows: a materialized view has caught up with its input.
func waitRows(ctx context.Context, url, relation string, want int64, timeout time.Duration, st *Status) error {
	deadline := time.Now().Add(timeout)
	var got int64 = -1
	for time.Now().Before(deadline) {
		res, err := Storm(ctx, StormConfig{URL: url, Clients: 1, Relation: relation, Mode: ModeCopy, Timeout: timeout, Settle: -1, Label: "waiting for " + relation})
		if err != nil {
			return err
		}
		if res.Completed == 1 {
			got = res.SnapshotRows
			if got == want {
				return nil
			}
		}
		st.Set(fmt.Sprintf("waiting for %s: %d of %d rows", relation, got, want), nil)
		sleepCtx(ctx, 500*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("%s has %d rows after %v, want %d", relation, got, timeout, want)
}
