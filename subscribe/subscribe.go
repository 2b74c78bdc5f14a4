package subscribe

import (
	"context"
	"time"

	"github.com/shardtail/shardtail/formatter"
)

// Subscription is one running SUBSCRIBE as the session sees it, whichever
// path serves it (tail.Subscriber, dataflow.Subscribe). The session pulls
// rows while it executes FETCH or streams COPY; nothing is pushed through
// the coordinator.
type Subscription interface {
	// Next returns up to max output rows (all ready when max <= 0),
	// blocking until at least one is ready or ctx ends. It returns io.EOF
	// once UP TO is reached, ErrDropped when the collection was dropped,
	// and *BufferError when the client fell too far behind. Call it from
	// one goroutine.
	Next(ctx context.Context, max int) ([]formatter.Row, error)
	// Frontier is the progress delivered so far: every update below it was
	// handed to Next's caller or is queued for it. Safe from any goroutine
	// (mz_internal.mz_subscriptions reads it).
	Frontier() uint64
	// QueuedBytes is the memory the subscription holds for its client:
	// rows produced and not yet taken, and a snapshot held back to be
	// ordered or enveloped whole. Safe from any goroutine.
	QueuedBytes() int64
	// Close ends the subscription and releases its readers and queue. It
	// must be called exactly once, after the last Next returned.
	Close()
}

// Request is one subscribe as planned: what to read, from when to when,
// and the output it produces. Both paths take it unchanged.
type Request struct {
	// Shard is the collection's shard. On the dataflow path "" means a
	// constant input (a query that reads no collection).
	Shard string
	// AsOf is the time of the snapshot and of the first progress row.
	AsOf uint64
	// ReadAt, if set, is when the linearizable read of the shard's state
	// that chose AsOf began (persist.Client.ReadState): a read of the
	// shard's state begun after it is as fresh, and the fast path's
	// snapshot takes such a read for its own (persist.Reader.SnapshotAfter)
	// rather than reading consensus again.
	ReadAt time.Time
	// AsOfAtLeast lets the subscribe move AsOf forward to a time its reader
	// holds (the statement had no AS OF, or AS OF AT LEAST): a time chosen
	// a moment ago may have been compacted away since. See StartAt.
	AsOfAtLeast bool
	// UpTo, when set, completes the subscribe once progress reaches it.
	UpTo *uint64
	// Live is the time from which the subscribe is live, when it began
	// (0: from AS OF). Below it progress is reported per timestamp only,
	// not at each batch's frontier too: the batches that hold a collection's
	// past differ between the paths and from run to run, per-timestamp
	// progress does not (formatter.Batcher.SetLive).
	Live uint64
	// Snapshot sends the collection's contents at AsOf first (WITH
	// (SNAPSHOT), the default).
	Snapshot bool
	// Output is the output shape: relation, PROGRESS, envelope, order.
	Output *formatter.Options
	// Shape is the map/filter/project applied to the collection's rows
	// before Output formats them; nil for a bare collection.
	Shape *Shape
	// MaxBufferedBytes is the client's budget (subscribe_max_buffered_bytes):
	// how far behind it may fall. Past it the fast path detaches the
	// subscriber (and fails it with *BufferError only if its position is no
	// longer retained); the dataflow path fails it with *BufferError.
	MaxBufferedBytes int64
	// MaxResultSize bounds the snapshot held back to order or envelope it
	// whole (max_result_size): past it the subscribe fails with a
	// *formatter.ResultSizeError. 0 means no bound.
	MaxResultSize int64
}

// Batcher returns the output state machine of a subscribe of r that
// starts at asOf (StartAt): the request's shape, UP TO, MaxResultSize and
// Live.
func (r *Request) Batcher(asOf uint64) *formatter.Batcher {
	b := formatter.NewBatcher(r.Output, asOf, r.UpTo)
	b.SetMaxBuffered(r.MaxResultSize)
	b.SetLive(r.Live)
	return b
}

// StartAt is the AS OF a subscribe starts at when its reader holds the
// shard from since: AsOf, or since when AsOfAtLeast allows moving forward
// and UP TO does not lie before it (then AsOf stays, and the read fails as
// an exact AS OF would).
func (r *Request) StartAt(since uint64) uint64 {
	if r.AsOfAtLeast && r.AsOf < since && (r.UpTo == nil || since <= *r.UpTo) {
		return since
	}
	return r.AsOf
}
