package proxy

import (
	"context"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/pgwire"
)

// result streams one upstream result (rows or a command) to the client. A
// goroutine reads the upstream's rows as they arrive, so a streaming
// statement (SUBSCRIBE) reaches the client row by row while bulk results
// still travel in large batches.
type result struct {
	c      *Conn
	fields []pgwire.Field
	kind   pgwire.ResultKind
	msgs   chan []byte // DataRows and NoticeResponses, in upstream order
	done   chan struct{}
	tag    string
	err    error
	onDone func()
	closed bool
	pre    [][]byte
	// cancel, when set, cancels the context the upstream statement runs
	// under, which the result owns (Conn.ExecParams): Next links it to
	// the context of each call, and Close cancels a statement that has
	// not ended.
	cancel context.CancelCauseFunc
	// last is the context of the latest call (ExecParams, then Next),
	// kept only for its cause: a result closed because its client
	// disconnected (a write to the client failed after Next returned)
	// must close the upstream connection, not cancel the statement.
	last context.Context
}

func (c *Conn) newResult(rr *pgconn.ResultReader, kind pgwire.ResultKind, fields []pgwire.Field, onDone func()) *result {
	r := &result{c: c, fields: fields, kind: kind, msgs: make(chan []byte, 1024), done: make(chan struct{}), onDone: onDone,
		pre: c.takeNotices()}
	c.setSink(func(m []byte) { r.msgs <- m })
	c.mu.Lock()
	c.reading++
	c.mu.Unlock()
	go func() {
		defer close(r.done)
		defer func() {
			c.mu.Lock()
			c.reading--
			c.mu.Unlock()
		}()
		for rr.NextRow() {
			r.msgs <- pgwire.AppendDataRow(nil, rr.Values())
		}
		tag, err := rr.Close()
		r.tag, r.err = tag.String(), err
		if r.onDone != nil {
			r.onDone()
		}
		c.setSink(nil)
		close(r.msgs)
	}()
	return r
}

// newSimpleResult streams one result of an upstream simple Query.
func (c *Conn) newSimpleResult(rr *pgconn.ResultReader, onDone func()) *result {
	kind, fields := pgwire.ResultCommand, []pgwire.Field(nil)
	if fds := rr.FieldDescriptions(); fds != nil {
		kind, fields = pgwire.ResultRows, fieldsFromUpstream(fds)
	}
	return c.newResult(rr, kind, fields, onDone)
}

// Describe implements pgwire.Result.
func (r *result) Describe() pgwire.Description {
	return pgwire.Description{Kind: r.kind, Fields: r.fields}
}

// Next implements pgwire.Result.
func (r *result) Next(ctx context.Context) ([][]byte, error) {
	if r.cancel != nil {
		r.last = ctx
		defer context.AfterFunc(ctx, func() { r.cancel(context.Cause(ctx)) })()
	}
	if len(r.pre) > 0 {
		pre := r.pre
		r.pre = nil
		return pre, nil
	}
	var out [][]byte
	select {
	case m, ok := <-r.msgs:
		if !ok {
			<-r.done
			if r.err != nil {
				return nil, r.c.error(r.err)
			}
			return nil, io.EOF
		}
		out = append(out, m)
	case <-ctx.Done():
		// The cancel has gone upstream (pgconn sends a CancelRequest);
		// what the upstream sent before it, and its error, follow.
		select {
		case m, ok := <-r.msgs:
			if ok {
				return [][]byte{m}, nil
			}
			<-r.done
			if r.err != nil {
				return nil, r.c.error(r.err)
			}
			return nil, pgwire.ErrQueryCanceled
		case <-time.After(10 * time.Second):
			return nil, pgwire.ErrQueryCanceled
		}
	}
	for len(out) < 1024 {
		select {
		case m, ok := <-r.msgs:
			if !ok {
				return out, nil
			}
			out = append(out, m)
			continue
		default:
		}
		break
	}
	return out, nil
}

// Tag implements pgwire.Result.
func (r *result) Tag() string { return r.tag }

// Close waits for the upstream to finish the statement (a canceled client
// context has already made pgconn send a CancelRequest upstream).
func (r *result) Close() {
	if r.closed {
		return
	}
	r.closed = true
	if r.cancel != nil {
		// A portal closed before its statement ended (a suspended
		// SUBSCRIBE, or one whose client has gone): cancel it upstream,
		// or close the connection if the client has gone. After the end
		// this is a no-op.
		var cause error
		if r.last != nil && sessionEnded(r.last) {
			cause = context.Cause(r.last)
		}
		defer r.cancel(cause)
		select {
		case <-r.done:
		default:
			r.cancel(cause)
		}
	}
	go func() {
		for range r.msgs {
		}
	}()
	<-r.done
}

// emptyResult is the result of an empty query string.
type emptyResult struct{}

func (emptyResult) Describe() pgwire.Description           { return pgwire.Description{Kind: pgwire.ResultEmpty} }
func (emptyResult) Next(context.Context) ([][]byte, error) { return nil, io.EOF }
func (emptyResult) Tag() string                            { return "" }
func (emptyResult) Close()                                 {}

var (
	_ pgwire.Result = (*result)(nil)
	_ pgwire.Result = emptyResult{}
)
