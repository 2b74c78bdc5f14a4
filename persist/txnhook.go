package persist

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shardtail/shardtail/row"
)

// This file is persist's side of txn-wal (package persist/txnwal): the
// batches a transaction writes ahead of its commit, their later
// application to the data shards, and the hook through which readers of a
// data shard see its logical upper.

// WrittenBatch is updates uploaded as parts of a shard but not committed to
// it: a transaction writes its batches first, records them in its commit,
// and appends them afterwards (Writer.AppendWritten), possibly in another
// process after a crash. The parts carry no time: AppendWritten stamps them
// with the commit's.
type WrittenBatch struct {
	Parts     []Part `json:"parts,omitempty"`
	RunStarts []int  `json:"run_starts,omitempty"`
	// StartedMs is when the first part was uploaded: the commit that
	// records the batch must happen within half of Config.OrphanGrace of
	// it (see CommitDeadline).
	StartedMs int64 `json:"started_ms,omitempty"`
}

// Empty reports whether the batch holds no updates.
func (b WrittenBatch) Empty() bool { return len(b.Parts) == 0 }

// CommitDeadline is the wall-clock time (ms) after which the batch must not
// be newly recorded anywhere: the sweep may take its parts for orphans
// once Config.OrphanGrace has passed since the upload.
func (c *Client) CommitDeadline(b WrittenBatch) int64 {
	return b.StartedMs + c.cfg.OrphanGrace.Milliseconds()/2
}

// Now is the client's wall clock in milliseconds.
func (c *Client) Now() int64 { return c.cfg.Now() }

// WriteBatch uploads updates (their times are ignored) as one run of parts
// of the writer's shard without committing them.
func (w *Writer) WriteBatch(ctx context.Context, updates []row.Update) (WrittenBatch, error) {
	s, _ := w.m.current()
	clean := make([]row.Update, len(updates))
	for i, u := range updates {
		if err := row.CheckRow(s.Schema, u.Row); err != nil {
			return WrittenBatch{}, fmt.Errorf("write batch: %w", err)
		}
		clean[i] = row.Update{Row: u.Row, Diff: u.Diff}
	}
	started := w.c.cfg.Now()
	parts, err := w.writeParts(ctx, s.ShardID, s.Schema, clean)
	if err != nil {
		return WrittenBatch{}, err
	}
	return WrittenBatch{Parts: parts, StartedMs: started}, nil
}

// Finish uploads what the builder still buffers and returns the whole
// batch, uncommitted, for a transaction to record (see WrittenBatch).
func (b *BatchBuilder) Finish(ctx context.Context) (WrittenBatch, error) {
	if err := b.flush(ctx); err != nil {
		return WrittenBatch{}, err
	}
	return WrittenBatch{Parts: slices.Clone(b.parts), RunStarts: slices.Clone(b.starts), StartedMs: b.startedMs}, nil
}

// AppendWritten appends a written batch at time ts, advancing the shard
// from expectedUpper (<= ts) to ts+1. It is txn-wal's apply: the batch's
// parts may have been uploaded long ago (its commit recorded them in time),
// so no upload deadline applies, and a mismatch never deletes them — it
// means another applier got there first, and the parts are then live.
func (w *Writer) AppendWritten(ctx context.Context, b WrittenBatch, ts, expectedUpper uint64) error {
	if ts < expectedUpper {
		return fmt.Errorf("append written: time %d below expected upper %d", ts, expectedUpper)
	}
	parts := slices.Clone(b.Parts)
	for i := range parts {
		t := ts
		parts[i].TsRewrite, parts[i].MinT, parts[i].MaxT = &t, ts, ts
	}
	var result appendResult
	batch := Batch{Lower: expectedUpper, Upper: ts + 1, Parts: parts, RunStarts: slices.Clone(b.RunStarts)}
	token, _ := w.token(expectedUpper, ts+1)
	_, err := w.m.apply(ctx, compareAndAppend(batch, w.id, token, w.c.cfg.Now(), w.c.cfg.WriterLease.Milliseconds(), &result))
	var mismatch *UpperMismatchError
	if err == nil || errors.As(err, &mismatch) || errors.Is(err, ErrShardTombstoned) {
		w.settle()
	}
	if err == nil {
		w.c.afterAppend(w.m.shard)
	}
	return err
}

// TxnReads presents the data shards of a txn-wal to their readers. A data
// shard's writes are recorded in the txns shard before they are applied to
// it, and nobody advances an idle data shard's upper, so its physical
// upper lags: its logical upper is the txns shard's progress. Readers of a
// shard the TxnReads claims (Registered) therefore make it readable at
// their time first (Snapshot, WaitForUpper) and take progress past the
// physical upper from it (Listen). package persist/txnwal implements it;
// Client.SetTxnReads installs it.
type TxnReads interface {
	// Registered reports whether shard's writes go through the txn-wal.
	Registered(ctx context.Context, shard string) bool
	// ReadyAt makes a read of shard at asOf valid on the shard itself: it
	// waits until the logical upper is above asOf, applies every commit
	// to the shard recorded so far, and advances its physical upper past
	// asOf.
	ReadyAt(ctx context.Context, shard string, asOf uint64) error
	// Progress returns the shard's logical upper as known now, after
	// applying every commit to the shard below it, so that the updates
	// between the physical and the logical upper are none; and a channel
	// closed when the logical upper may have grown.
	Progress(ctx context.Context, shard string) (uint64, <-chan struct{}, error)
	// Upper is the shard's logical upper, read linearizably: every commit
	// acknowledged before the call is below it.
	Upper(ctx context.Context, shard string) (uint64, error)
}

// SetTxnReads installs the txn-wal whose registered data shards this
// client's readers read through it. Call it once, before reading.
func (c *Client) SetTxnReads(t TxnReads) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.txnReads = t
}

// txns returns the TxnReads that claims shard, or nil.
func (c *Client) txns(ctx context.Context, shard string) TxnReads {
	c.mu.Lock()
	t := c.txnReads
	c.mu.Unlock()
	if t == nil || !t.Registered(ctx, shard) {
		return nil
	}
	return t
}

// ReadState is State for readers: for a data shard of a txn-wal, Upper is
// its logical upper (see TxnReads).
func (c *Client) ReadState(ctx context.Context, shard string) (*State, error) {
	s, err := c.State(ctx, shard)
	if err != nil {
		return nil, err
	}
	t := c.txns(ctx, shard)
	if t == nil || s.Tombstone {
		return s, nil
	}
	upper, err := t.Upper(ctx, shard)
	if err != nil {
		return nil, err
	}
	if upper > s.Upper {
		l := s.clone()
		l.Upper = upper
		return l, nil
	}
	return s, nil
}

// logicalProgress is Listen.Next's step for a txn-wal data shard: it
// returns the next frontier past l.frontier when the gap up to it holds no
// updates (ok), or returns with ok false once the physical upper is past
// the frontier and the shard itself has the next batch.
func (l *Listen) logicalProgress(ctx context.Context, t TxnReads) (frontier uint64, ok bool, err error) {
	// The data shard is still polled as waitUntil does: a drop in another
	// process shows only there.
	timer := time.NewTimer(l.r.m.nextPoll())
	defer timer.Stop()
	for {
		s, changed := l.r.m.current()
		if s.Upper > l.frontier || s.Tombstone {
			return 0, false, nil
		}
		p, moved, err := t.Progress(ctx, l.r.m.shard)
		if err != nil {
			return 0, false, err
		}
		if s, _ = l.r.m.current(); s.Upper > l.frontier || s.Tombstone {
			return 0, false, nil
		}
		if p > l.frontier {
			return p, true, nil
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-changed:
		case <-moved:
		case <-l.r.m.pokedChan():
			if _, err := l.r.m.refresh(ctx); err != nil && !IsIndeterminate(err) {
				return 0, false, err
			}
		case <-timer.C:
			timer.Reset(l.r.c.cfg.PollInterval)
			if _, err := l.r.m.refresh(ctx); err != nil && !IsIndeterminate(err) {
				return 0, false, err
			}
		}
	}
}
