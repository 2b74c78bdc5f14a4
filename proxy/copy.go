package proxy

import (
	"context"
	"errors"
	"io"

	"github.com/shardtail/shardtail/pgwire"
)

// CopyOut streams COPY ... TO STDOUT from upstream; fields and format
// describe its columns (the session describes them from its catalog). It
// returns once the COPY has started or failed, so that an error reaches
// the client instead of a CopyOutResponse.
func (c *Conn) CopyOut(ctx context.Context, sqlText string, fields []pgwire.Field, format int16) (pgwire.Result, error) {
	ch := make(chan []byte, 64)
	res := &copyOut{c: c, ch: ch, fields: fields, format: format, done: make(chan struct{})}
	cctx, cancel := context.WithCancel(ctx)
	res.cancel = cancel
	go func() {
		defer close(res.done)
		tag, err := c.conn.CopyTo(cctx, chanWriter(ch), sqlText)
		res.tag, res.err = tag.String(), err
		close(ch)
	}()
	select {
	case data, ok := <-ch:
		if !ok {
			<-res.done
			if res.err != nil {
				cancel()
				return nil, c.error(res.err)
			}
		} else {
			res.first = data
		}
	case <-ctx.Done():
		cancel()
		<-res.done
		return nil, pgwire.ErrQueryCanceled
	}
	return res, nil
}

// chanWriter sends each Write (one CopyData payload) to a channel.
type chanWriter chan []byte

func (w chanWriter) Write(p []byte) (int, error) {
	w <- append([]byte(nil), p...)
	return len(p), nil
}

// copyOut is the result of CopyOut.
type copyOut struct {
	c      *Conn
	first  []byte
	ch     chan []byte
	fields []pgwire.Field
	format int16
	cancel context.CancelFunc
	done   chan struct{}
	tag    string
	err    error
}

// Describe implements pgwire.Result.
func (r *copyOut) Describe() pgwire.Description {
	return pgwire.Description{Kind: pgwire.ResultCopyOut, Fields: r.fields, CopyFormat: r.format}
}

// Next implements pgwire.Result.
func (r *copyOut) Next(ctx context.Context) ([][]byte, error) {
	if r.first != nil {
		first := r.first
		r.first = nil
		return [][]byte{pgwire.AppendCopyData(nil, first)}, nil
	}
	var data []byte
	var ok bool
	select {
	case <-ctx.Done():
		r.cancel()
		<-r.done
		return nil, pgwire.ErrQueryCanceled
	case data, ok = <-r.ch:
	}
	if !ok {
		<-r.done
		if r.err != nil {
			return nil, r.c.error(r.err)
		}
		return nil, io.EOF
	}
	msgs := [][]byte{pgwire.AppendCopyData(nil, data)}
	for len(msgs) < 256 {
		select {
		case data, ok := <-r.ch:
			if !ok {
				return msgs, nil
			}
			msgs = append(msgs, pgwire.AppendCopyData(nil, data))
			continue
		default:
		}
		break
	}
	return msgs, nil
}

// Tag implements pgwire.Result.
func (r *copyOut) Tag() string { return r.tag }

// Close implements pgwire.Result: it cancels a COPY still running and waits
// for it.
func (r *copyOut) Close() {
	r.cancel()
	go func() {
		for range r.ch {
		}
	}()
	<-r.done
}

// CopyIn returns the result that forwards COPY ... FROM STDIN upstream
// when pgwire hands it the client's data; fields and format describe its
// columns. It connects through connect then, not now: the CopyInResponse
// goes to the client first.
func CopyIn(connect Connect, sqlText string, fields []pgwire.Field, format int16) pgwire.Result {
	return &copyIn{connect: connect, sql: sqlText, fields: fields, format: format}
}

// copyIn is the result of CopyIn.
type copyIn struct {
	connect Connect
	sql     string
	fields  []pgwire.Field
	format  int16
	tag     string
}

// Describe implements pgwire.Result.
func (r *copyIn) Describe() pgwire.Description {
	return pgwire.Description{Kind: pgwire.ResultCopyIn, Fields: r.fields, CopyFormat: r.format}
}

// CopyIn sends the client's data upstream.
func (r *copyIn) CopyIn(ctx context.Context, in io.Reader) error {
	c, err := r.connect(ctx)
	if err != nil {
		return err
	}
	cr := &copyReader{r: in}
	tag, err := c.conn.CopyFrom(ctx, cr, r.sql)
	if err != nil {
		if cr.err != nil {
			// The client's CopyFail (or its disconnect) as the client
			// sent it: the upstream's error would quote its message
			// inside its own.
			return cr.err
		}
		return c.error(err)
	}
	r.tag = tag.String()
	return nil
}

// copyReader is the client's COPY data, keeping the error that ended it.
type copyReader struct {
	r   io.Reader
	err error
}

func (r *copyReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		r.err = err
	}
	return n, err
}

// Next implements pgwire.Result.
func (r *copyIn) Next(ctx context.Context) ([][]byte, error) { return nil, io.EOF }

// Tag implements pgwire.Result.
func (r *copyIn) Tag() string { return r.tag }

// Close implements pgwire.Result.
func (r *copyIn) Close() {}

var (
	_ pgwire.Result = (*copyOut)(nil)
	_ pgwire.Result = (*copyIn)(nil)
)
