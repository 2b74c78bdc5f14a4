package bench

import (
	"context"
	"time"
)

// The statement log around a storm. The server records a statement when it
// ends and appends the buffered records to its log shard about once a
// second, off the statement path; a storm's subscribes end when its
// clients close, at the very end of Storm. Counters scraped right then
// would miss the log's appends for the storm (they would land between two
// storms and be counted nowhere), so the scrape after a storm first waits
// for the log to settle.

// Waiting for the statement log after a storm.
const (
	// stmtLogPoll is how often /metrics is read while waiting.
	stmtLogPoll = 250 * time.Millisecond
	// stmtLogSettleMax bounds the wait: a server whose log cannot append
	// (or that has none) must not hold the suite up.
	stmtLogSettleMax = 15 * time.Second
)

// The gauges awaitStatementLog reads.
const (
	gaugeSessions    = "shardtail_sessions"
	gaugeLogBuffered = "shardtail_statement_log_buffered"
)

// statementLogSettler reads the server's open sessions now, before a storm,
// and returns a function to call after it, which waits until the server is
// back to at most that many sessions (the storm's clients have closed, so
// each of their statements has ended and was recorded) and its statement
// log holds no record waiting for an append, or until stmtLogSettleMax
// passes. It returns at once when /metrics cannot be read or has no
// statement log gauge.
func statementLogSettler(ctx context.Context, metricsURL string) func() {
	names := []string{gaugeSessions, gaugeLogBuffered}
	before, err := ScrapeCounters(ctx, metricsURL, names)
	return func() {
		if err != nil {
			return
		}
		deadline := time.Now().Add(stmtLogSettleMax)
		for {
			now, err := ScrapeCounters(ctx, metricsURL, names)
			if err != nil {
				return
			}
			buffered, ok := now[gaugeLogBuffered]
			if !ok || now[gaugeSessions] <= before[gaugeSessions] && buffered == 0 || time.Now().After(deadline) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(stmtLogPoll):
			}
		}
	}
}
