package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// BudgetConfig is the memory-budget storm: Readers and Stalled fast-path
// subscribers spread over Collections tables while WriteBytes of rows are
// written to them. The stalled subscribers stop reading after their
// snapshot, with a small socket receive buffer so that the server, not the
// kernel, holds their backlog; once the writes are done they read again,
// each until it has every row of its table, in order and once.
type BudgetConfig struct {
	// URL is the server's connection URL.
	URL string
	// Collections is the number of tables; Readers and Stalled are the
	// subscribers, spread over them.
	Collections, Readers, Stalled int
	// WriteBytes is the payload written over all the tables.
	WriteBytes int64
	// RowBytes is each row's payload (default 4 KiB); RowsPerInsert the
	// rows of one INSERT (default 8).
	RowBytes, RowsPerInsert int
	// StalledRecvBuffer is the stalled clients' SO_RCVBUF (default 4 KiB).
	StalledRecvBuffer int
	// RetainHistory, when set, is the tables' RETAIN HISTORY (an
	// interval, e.g. "1 hour"): a detached stalled subscriber resumes
	// from the shard only if it still holds its position, so with the
	// server's default (1 s) most stalled subscribers of a long run get
	// the history-loss error instead of every row.
	RetainHistory string
	// Prefix names the tables Prefix0, Prefix1, ...; they must not exist.
	Prefix string
	// Timeout bounds each client's connect and snapshot, and the stalled
	// clients' reading again.
	Timeout time.Duration
	// Server, MaxServerRSS, Status and Label are the storm's (StormConfig).
	Server       CPUProbe
	MaxServerRSS int64
	Status       *Status
	Label        string
}

// BudgetResult is what one budget storm measured.
type BudgetResult struct {
	Storm *StormResult `json:"storm"`
	// RowsPerCollection were written to each table, WrittenBytes their
	// payload in all.
	RowsPerCollection int64 `json:"rows_per_collection"`
	WrittenBytes      int64 `json:"written_bytes"`
	// WriterError is the first failed INSERT's error, if any.
	WriterError string `json:"writer_error,omitempty"`
	// WriteSeconds is how long the writers took to write everything:
	// most of the run, and what sets how long (g) takes at a size.
	WriteSeconds float64 `json:"write_seconds,omitempty"`
}

// Defaults of BudgetConfig.
const (
	defaultBudgetRowBytes      = 4 << 10
	defaultBudgetRowsPerInsert = 8
	defaultStalledRecvBuffer   = 4 << 10
)

// budgetColumns are the output columns of the budget storm's subscribes:
// mz_timestamp, mz_progressed, mz_diff, id, payload (which starts with
// its write's wall clock, for write-to-client latency).
const (
	budgetIDColumn      = 3
	budgetLatencyColumn = 4
)

// BudgetStorm creates the tables and runs the storm; failed clients are
// counted in the result (see Storm).
func BudgetStorm(ctx context.Context, cfg BudgetConfig) (*BudgetResult, error) {
	if cfg.Collections < 1 || cfg.Readers < 0 || cfg.Stalled < 0 || cfg.Readers+cfg.Stalled < 1 || cfg.WriteBytes <= 0 {
		return nil, fmt.Errorf("%w: a budget storm needs collections, subscribers and bytes to write", ErrConfig)
	}
	cfg.RowBytes = cmpOr(cfg.RowBytes, defaultBudgetRowBytes)
	cfg.RowsPerInsert = cmpOr(cfg.RowsPerInsert, defaultBudgetRowsPerInsert)
	cfg.StalledRecvBuffer = cmpOr(cfg.StalledRecvBuffer, defaultStalledRecvBuffer)
	if cfg.Prefix == "" {
		cfg.Prefix = "budget"
	}
	tables := make([]string, cfg.Collections)
	for i := range tables {
		tables[i] = fmt.Sprintf("%s%d", cfg.Prefix, i)
		create := "CREATE TABLE " + tables[i] + " (id bigint, payload text)"
		if cfg.RetainHistory != "" {
			create += " WITH (RETAIN HISTORY FOR '" + strings.ReplaceAll(cfg.RetainHistory, "'", "''") + "')"
		}
		if err := execSQL(ctx, cfg.URL, create); err != nil {
			return nil, err
		}
	}
	perInsert := int64(cfg.RowsPerInsert)
	rows := cfg.WriteBytes / int64(cfg.Collections) / int64(cfg.RowBytes)
	rows = max(perInsert, rows/perInsert*perInsert) // whole INSERTs
	res := &BudgetResult{RowsPerCollection: rows, WrittenBytes: rows * int64(cfg.Collections) * int64(cfg.RowBytes)}

	var mu sync.Mutex     // res.WriterError
	var done atomic.Int64 // rows written, over every table
	write := func(ctx context.Context, table string) error {
		c, err := connect(ctx, cfg.URL)
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		pad := payload(nil, 0, cfg.RowBytes)
		var sql []byte
		for id := int64(0); id < rows && ctx.Err() == nil; {
			ns := time.Now().UnixNano()
			sql = append(sql[:0], "INSERT INTO "+table+" VALUES "...)
			for end := id + perInsert; id < end; id++ {
				if sql[len(sql)-1] == ')' {
					sql = append(sql, ',')
				}
				sql = fmt.Appendf(sql, "(%d,'%d-", id, ns)
				sql = append(sql, pad[:max(0, cfg.RowBytes-21)]...)
				sql = append(sql, "')"...)
			}
			if _, err := c.Exec(ctx, string(sql)).ReadAll(); err != nil {
				mu.Lock()
				if res.WriterError == "" {
					res.WriterError = err.Error()
				}
				mu.Unlock()
				return err
			}
			done.Add(perInsert)
		}
		return ctx.Err()
	}
	total := rows * int64(len(tables))
	live := func(ctx context.Context) error {
		start := time.Now()
		defer func() { res.WriteSeconds = time.Since(start).Seconds() }()
		cfg.Status.Set(cfg.Label+": writing", func() string {
			return writeProgress(done.Load(), total, int64(cfg.RowBytes), time.Since(start))
		})
		errs := make([]error, len(tables))
		var wg sync.WaitGroup
		for i, table := range tables {
			wg.Go(func() { errs[i] = write(ctx, table) })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	sc := StormConfig{
		URL: cfg.URL, Clients: cfg.Readers + cfg.Stalled, Mode: ModeCopy, Relations: tables, Timeout: cfg.Timeout,
		LatencyColumn: budgetLatencyColumn, IDColumn: budgetIDColumn, Live: live,
		// Every client, stalled or not, reads until it has every row.
		ResumeStalled: func() int64 { return rows },
		Stalled:       cfg.Stalled, StalledRecvBuffer: cfg.StalledRecvBuffer,
		Server: cfg.Server, MaxServerRSS: cfg.MaxServerRSS, Status: cfg.Status, Label: cfg.Label,
	}
	r, err := Storm(ctx, sc)
	res.Storm = r
	if r == nil {
		return nil, err
	}
	return res, err
}

// writeProgress is the status of the budget storm's writers: how much of
// the total they wrote, at what rate, and when they will be done at it.
func writeProgress(done, total, rowBytes int64, elapsed time.Duration) string {
	line := fmt.Sprintf("%s of %s written", mib(float64(done*rowBytes)), mib(float64(total*rowBytes)))
	if done > 0 && elapsed > 0 {
		rate := float64(done*rowBytes) / elapsed.Seconds()
		left := time.Duration(float64(total-done) * float64(rowBytes) / rate * float64(time.Second))
		line += fmt.Sprintf(", %.2f MiB/s, about %s to go", rate/(1<<20), left.Round(time.Second))
	}
	return line
}

// cmpOr is v, or def when v is not positive.
func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
