package persist

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/shardtail/shardtail/persist/codec"
	"github.com/shardtail/shardtail/row"
)

// Writer appends to one shard. It is safe for concurrent use, though appends
// to one shard are serialized by their expected uppers anyway.
type Writer struct {
	c  *Client
	m  *machine
	id WriterID

	mu sync.Mutex
	// pending is the append whose outcome is unknown (it failed with an
	// error after its CAS may have been sent). A retry of the same bounds
	// reuses its token, so that state recognizes it if it did commit.
	pending pendingAppend // mu
}

type pendingAppend struct {
	lower, upper uint64
	token        string
}

// OpenWriter returns a writer of shard. Registration is implicit in the
// first append.
func (c *Client) OpenWriter(ctx context.Context, shard string) (*Writer, error) {
	m, err := c.machine(ctx, shard)
	if err != nil {
		return nil, err
	}
	return &Writer{c: c, m: m, id: WriterID("w" + uuid.NewString())}, nil
}

// Upper returns the newest upper this process knows for the shard.
func (w *Writer) Upper() uint64 {
	s, _ := w.m.current()
	return s.Upper
}

// Schema returns the shard's schema.
func (w *Writer) Schema() row.Schema {
	s, _ := w.m.current()
	return s.Schema
}

// CompareAndAppend adds updates to the shard and advances its upper from
// expectedUpper to newUpper, iff the shard's upper is expectedUpper. Every
// update's time must be in [expectedUpper, newUpper). updates may be empty,
// which only advances the upper (progress). The caller's slice is not
// modified.
//
// On a mismatch it returns an *UpperMismatchError carrying the shard's
// current upper. An error for which IsIndeterminate holds means the append
// may have committed: retrying the same call with the same arguments is
// safe, because the writer recognizes its own committed append. An append
// whose parts took more than half of Config.OrphanGrace to commit fails with
// ErrUploadExpired (also indeterminate).
func (w *Writer) CompareAndAppend(ctx context.Context, updates []row.Update, expectedUpper, newUpper uint64) error {
	if newUpper <= expectedUpper {
		return fmt.Errorf("compare and append: new upper %d must be above expected upper %d", newUpper, expectedUpper)
	}
	s, _ := w.m.current()
	for _, u := range updates {
		if u.T < expectedUpper || u.T >= newUpper {
			return fmt.Errorf("compare and append: update at %d outside [%d, %d)", u.T, expectedUpper, newUpper)
		}
		if err := row.CheckRow(s.Schema, u.Row); err != nil {
			return fmt.Errorf("compare and append: %w", err)
		}
	}
	token, retry := w.token(expectedUpper, newUpper)
	// A cheap pre-check avoids uploading parts that cannot commit.
	if !retry && s.Upper > expectedUpper {
		if _, err := w.m.refresh(ctx); err != nil {
			return err
		}
		if s, _ = w.m.current(); s.Upper != expectedUpper {
			return &UpperMismatchError{Expected: expectedUpper, Current: s.Upper}
		}
	}
	started := w.c.cfg.Now()
	parts, err := w.writeParts(ctx, s.ShardID, s.Schema, slices.Clone(updates))
	if err != nil {
		return err
	}
	var result appendResult
	b := Batch{Lower: expectedUpper, Upper: newUpper, Parts: parts}
	commit := compareAndAppend(b, w.id, token, w.c.cfg.Now(), w.c.cfg.WriterLease.Milliseconds(), &result)
	if len(parts) > 0 {
		commit = w.c.commitUploads(started, commit)
	}
	_, err = w.m.apply(ctx, commit)
	if err != nil {
		var mismatch *UpperMismatchError
		if errors.As(err, &mismatch) || errors.Is(err, ErrShardTombstoned) {
			// Determinate: the parts are garbage.
			w.settle()
			w.c.deleteBlobs(context.WithoutCancel(ctx), parts)
		}
		return err
	}
	w.settle()
	if cur, _ := w.m.current(); result == appendAlreadyCommitted && len(parts) > 0 && !referencesPart(cur, parts[0].Key) {
		// An earlier call committed; this call's uploads are garbage.
		w.c.deleteBlobs(context.WithoutCancel(ctx), parts)
	}
	w.c.afterAppend(s.ShardID)
	return nil
}

// token returns the idempotency token for an append of [lower, upper): the
// pending one if this is a retry of it, else a new one.
func (w *Writer) token(lower, upper uint64) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending.token != "" && w.pending.lower == lower && w.pending.upper == upper {
		return w.pending.token, true
	}
	w.pending = pendingAppend{lower: lower, upper: upper, token: uuid.NewString()}
	return w.pending.token, false
}

// settle forgets the pending append once its outcome is known.
func (w *Writer) settle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = pendingAppend{}
}

// writeParts consolidates updates, splits them into parts of about
// PartTargetBytes and uploads them concurrently. The parts form one run.
func (w *Writer) writeParts(ctx context.Context, shard string, schema row.Schema, updates []row.Update) ([]Part, error) {
	updates = row.Consolidate(updates)
	if len(updates) == 0 {
		return nil, nil
	}
	chunks := splitBySize(updates, w.c.cfg.PartTargetBytes)
	parts := make([]Part, len(chunks))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i, chunk := range chunks {
		g.Go(func() error {
			p, err := w.c.writePart(gctx, shard, schema, chunk)
			parts[i] = p
			return err
		})
	}
	if err := g.Wait(); err != nil {
		w.c.deleteBlobs(context.WithoutCancel(ctx), parts)
		return nil, err
	}
	return parts, nil
}

// writePart encodes one sorted, consolidated chunk and uploads it. The
// encoding takes one of the client's encode slots and is charged to its
// memory holder, and so are the encoded bytes until they are uploaded.
func (c *Client) writePart(ctx context.Context, shard string, schema row.Schema, updates []row.Update) (Part, error) {
	data, stats, err := c.encodePart(ctx, schema, updates)
	if err != nil {
		return Part{}, err
	}
	c.charge(int64(len(data)))
	defer c.charge(-int64(len(data)))
	key := partKey(shard)
	if err := c.blob.Set(ctx, key, data); err != nil {
		return Part{}, fmt.Errorf("write part %s: %w", key, err)
	}
	c.metrics.partsWritten.Inc()
	c.metrics.partBytes.Add(float64(len(data)))
	return Part{Key: key, Rows: stats.Rows, Bytes: int64(len(data)), MinT: stats.MinT, MaxT: stats.MaxT}, nil
}

// encodePart encodes updates as a part, in one of the client's encode
// slots unless it is small, charging its working set (encodeCost) while
// it runs.
func (c *Client) encodePart(ctx context.Context, schema row.Schema, updates []row.Update) ([]byte, codec.Stats, error) {
	raw := 0
	for _, u := range updates {
		raw += rowSize(u.Row) + 16
	}
	if raw > smallEncode {
		if err := c.encodes.Acquire(ctx, 1); err != nil {
			return nil, codec.Stats{}, err
		}
		defer c.encodes.Release(1)
	}
	cost := encodeCost(raw)
	c.charge(cost)
	defer c.charge(-cost)
	data, stats, err := codec.EncodePart(schema, updates)
	if err != nil {
		return nil, codec.Stats{}, fmt.Errorf("encode part: %w", err)
	}
	return data, stats, nil
}

// deleteBlobs removes parts that no state references (best effort: a leak
// is harmless, a failure here must not mask the caller's error).
func (c *Client) deleteBlobs(ctx context.Context, parts []Part) {
	for _, p := range parts {
		if p.Key == "" {
			continue
		}
		if _, err := c.blob.Delete(ctx, p.Key); err != nil {
			c.log.Warn("persist: delete unreferenced part", "key", p.Key, "err", err)
		} else {
			c.metrics.blobsDeleted.Inc()
		}
	}
}

// splitBySize cuts sorted updates into chunks whose estimated encoded size
// is about target bytes. Encoded parts are compressed, so the estimate (the
// raw size) errs towards smaller parts.
func splitBySize(updates []row.Update, target int) [][]row.Update {
	var chunks [][]row.Update
	start, size := 0, 0
	for i, u := range updates {
		size += rowSize(u.Row) + 16
		if size >= target {
			chunks = append(chunks, updates[start:i+1])
			start, size = i+1, 0
		}
	}
	if start < len(updates) {
		chunks = append(chunks, updates[start:])
	}
	return chunks
}

// rowSize estimates the raw size of a row's datums.
func rowSize(r row.Row) int {
	n := 0
	for _, d := range r {
		switch v := d.(type) {
		case string:
			n += len(v) + 4
		case []byte:
			n += len(v) + 4
		case row.Numeric:
			n += len(v) + 4
		case row.JSON:
			n += len(v) + 4
		case row.UUID:
			n += 16
		default:
			n += 8
		}
	}
	return n
}

// Close releases the writer. It does not end the shard.
func (w *Writer) Close() error { return nil }

// BatchBuilder accumulates a large write in bounded memory: every few
// PartTargetBytes of updates it consolidates them and uploads them as one
// run of parts, and Append commits all the runs as one batch — atomically, so a
// failed load changes nothing (its parts become garbage).
type BatchBuilder struct {
	w      *Writer
	schema row.Schema
	buf    []row.Update
	size   int
	parts  []Part
	starts []int
	// startedMs is when the first part was uploaded: Append must commit
	// within half of Config.OrphanGrace of it (ErrUploadExpired).
	startedMs int64
}

// NewBatch starts a batch of updates for w's shard.
func (w *Writer) NewBatch() *BatchBuilder {
	s, _ := w.m.current()
	return &BatchBuilder{w: w, schema: s.Schema}
}

// Add buffers updates (their times are set at Append), uploading a part
// when the buffer reaches the target size.
func (b *BatchBuilder) Add(ctx context.Context, updates ...row.Update) error {
	for _, u := range updates {
		if err := row.CheckRow(b.schema, u.Row); err != nil {
			return fmt.Errorf("batch: %w", err)
		}
		b.buf = append(b.buf, u)
		b.size += rowSize(u.Row) + 16
	}
	if b.size >= runTargetFactor*b.w.c.cfg.PartTargetBytes {
		return b.flush(ctx)
	}
	return nil
}

// runTargetFactor sizes a batch builder's runs: each flush writes a run of
// several parts. Fewer, longer runs keep reads cheap — a reader holds one
// part per run — at the cost of buffering more rows while loading.
const runTargetFactor = 4

// flush uploads the buffered updates as one run.
func (b *BatchBuilder) flush(ctx context.Context) error {
	if len(b.buf) == 0 {
		return nil
	}
	s, _ := b.w.m.current()
	if len(b.parts) == 0 {
		b.startedMs = b.w.c.cfg.Now()
	}
	parts, err := b.w.writeParts(ctx, s.ShardID, b.schema, b.buf)
	if err != nil {
		return err
	}
	if len(parts) > 0 {
		if len(b.parts) > 0 {
			b.starts = append(b.starts, len(b.parts))
		}
		b.parts = append(b.parts, parts...)
	}
	b.buf, b.size = nil, 0
	return nil
}

// Parts is the number of parts uploaded so far.
func (b *BatchBuilder) Parts() int { return len(b.parts) }

// Append commits the batch: every update at time ts, advancing the shard
// from expectedUpper to ts+1, like CompareAndAppend (a mismatch is an
// *UpperMismatchError and the uploaded parts are deleted). The parts
// uploaded before ts was known carry it as a timestamp rewrite.
func (b *BatchBuilder) Append(ctx context.Context, ts, expectedUpper uint64) error {
	if ts < expectedUpper {
		return fmt.Errorf("batch: time %d below expected upper %d", ts, expectedUpper)
	}
	if err := b.flush(ctx); err != nil {
		return err
	}
	parts := slices.Clone(b.parts)
	for i := range parts {
		t := ts
		parts[i].TsRewrite, parts[i].MinT, parts[i].MaxT = &t, ts, ts
	}
	token, _ := b.w.token(expectedUpper, ts+1)
	var result appendResult
	batch := Batch{Lower: expectedUpper, Upper: ts + 1, Parts: parts, RunStarts: b.starts}
	commit := compareAndAppend(batch, b.w.id, token, b.w.c.cfg.Now(), b.w.c.cfg.WriterLease.Milliseconds(), &result)
	if len(parts) > 0 {
		commit = b.w.c.commitUploads(b.startedMs, commit)
	}
	_, err := b.w.m.apply(ctx, commit)
	if err != nil {
		var mismatch *UpperMismatchError
		if errors.As(err, &mismatch) || errors.Is(err, ErrShardTombstoned) {
			b.w.settle()
		}
		return err
	}
	b.w.settle()
	b.w.c.afterAppend(b.w.m.shard)
	return nil
}

// Abort deletes the uploaded parts of a batch that will not be appended.
func (b *BatchBuilder) Abort(ctx context.Context) {
	b.w.c.deleteBlobs(context.WithoutCancel(ctx), b.parts)
	b.parts, b.buf = nil, nil
}
