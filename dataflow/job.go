package dataflow

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// Storage is where background dataflows write: the adapter's owned
// shards, each with its one writer. The dataflow owns its output shard's
// contents, not its writer.
type Storage interface {
	// Append writes updates at the next timestamp of the oracle and
	// returns it (a load generator's tick).
	Append(ctx context.Context, shard string, updates []row.Update) (uint64, error)
	// AppendAt writes updates at their own times, advancing the shard's
	// upper from lower to upper: a materialized view's times follow its
	// input, not the oracle. A lower that is not the shard's upper fails.
	AppendAt(ctx context.Context, shard string, updates []row.Update, lower, upper uint64) error
}

// Job is a background dataflow: a View or a Source. Run works until ctx is
// done, or returns the error that stopped it; it is run again after an
// error, and must resume from what its output shard holds.
type Job interface {
	Run(ctx context.Context) error
}

// Restart backoff of a failed Job.
const (
	restartBackoff    = 100 * time.Millisecond
	maxRestartBackoff = 10 * time.Second
)

// Handle owns one running Job: the goroutine Start started, until Stop.
type Handle struct {
	job    Job
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs job on a goroutine of its own until ctx is done or Stop is
// called, restarting it with a backoff after errors (a storage outage). It
// gives up when the output shard is dropped (persist.ErrShardTombstoned).
// name labels the job's log lines.
func Start(ctx context.Context, log *slog.Logger, name string, job Job) *Handle {
	ctx, cancel := context.WithCancel(ctx)
	h := &Handle{job: job, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		backoff := restartBackoff
		for ctx.Err() == nil {
			err := job.Run(ctx)
			if err == nil || ctx.Err() != nil || errors.Is(err, persist.ErrShardTombstoned) {
				return
			}
			log.Warn("dataflow failed; restarting", "item", name, "err", err, "backoff", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxRestartBackoff)
		}
	}()
	return h
}

// Stop cancels the job and waits for its goroutine to end.
func (h *Handle) Stop() {
	h.cancel()
	<-h.done
}

// Stalled returns why the job's output is stalled (a View that cannot
// evaluate a row), or nil.
func (h *Handle) Stalled() error {
	if s, ok := h.job.(interface{ Stalled() error }); ok {
		return s.Stalled()
	}
	return nil
}
