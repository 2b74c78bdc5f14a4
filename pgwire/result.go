package pgwire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgproto3/v2"
)

// execution is a Result being sent: the result of one simple-protocol
// statement, or of a portal, which may be suspended between Executes.
type execution struct {
	res     Result
	kind    ResultKind // of the Description, kept without its fields: a subscribe's execution lives for hours
	started bool       // the header (RowDescription, Copy*Response) was sent
	pending [][]byte   // rest of the current batch, kept across PortalSuspended
	done    bool       // CommandComplete was sent; tag is set
	tag     string
	closed  bool
}

// close releases the result, once.
func (ex *execution) close() {
	if ex.closed {
		return
	}
	ex.closed = true
	ex.pending = nil
	ex.res.Close()
}

// runResult sends ex to the client, pulling batches from the Result, until
// the result completes or, when maxRows > 0, maxRows DataRows were sent
// (PortalSuspended; suspended is true). In the simple protocol a row result
// starts with RowDescription; in the extended one the client used Describe.
// A returned error is the statement's, to report; write failures are recorded
// in c.werr instead. With park, a ReadyResult that would wait for its next
// batch is left instead (c.parking is set, nothing returned): the caller
// parks the connection and resumes it with another runResult once woken.
func (c *conn) runResult(ctx context.Context, ex *execution, maxRows int, simple, park bool) (suspended bool, err error) {
	if c.srv.pacer != nil {
		// A large write keeps its slot for the result's next ones, until
		// the result is done, suspended or parks (pacing.go).
		c.slot.inResult = true
		defer func() {
			c.slot.inResult = false
			c.giveSlot()
		}()
	}
	if ex.done {
		// Executing a completed portal again repeats its completion, as
		// Materialize does.
		c.complete(ex)
		return false, nil
	}
	if !ex.started {
		ex.started = true
		desc := ex.res.Describe()
		ex.kind = desc.Kind
		switch desc.Kind {
		case ResultCommand, ResultEmpty:
		case ResultRows:
			if simple {
				c.send(rowDescription(desc.Fields, false))
			}
		case ResultCopyOut:
			c.send(&pgproto3.CopyOutResponse{OverallFormat: byte(desc.CopyFormat), ColumnFormatCodes: copyFormats(desc.Fields)})
		case ResultCopyIn:
			c.send(&pgproto3.CopyInResponse{OverallFormat: byte(desc.CopyFormat), ColumnFormatCodes: copyFormats(desc.Fields)})
			if c.flush() != nil {
				return false, nil
			}
			if err := c.copyIn(ctx, ex); err != nil {
				return false, err
			}
		default:
			return false, fmt.Errorf("pgwire: result of unknown kind %d", desc.Kind)
		}
	}
	if ex.kind != ResultRows {
		maxRows = 0 // Postgres ignores the row limit for anything but rows
	}
	sent := 0
	for {
		c.reserve(batchBytes(ex.pending))
		for len(ex.pending) > 0 {
			msg := ex.pending[0]
			ex.pending = ex.pending[1:]
			if err := checkResultMessage(ex.kind, msg); err != nil {
				return false, err
			}
			c.sendRaw(msg)
			if maxRows > 0 && isDataRow(msg) {
				if sent++; sent >= maxRows {
					c.send(&pgproto3.PortalSuspended{})
					return true, nil
				}
			}
		}
		ex.pending = nil
		// Flush after every batch, which is also before blocking for the
		// next one: a streaming result reaches the client as it is produced.
		// A StaticResult never blocks: its description, rows and
		// completion go out in one write with the ReadyForQuery after them
		// (a FETCH's took three).
		if _, static := ex.res.(*StaticResult); !static && c.flush() != nil {
			return false, nil
		}
		rr, parks := ex.res.(ReadyResult)
		if parks = parks && park; parks {
			c.prepareSleep() // before the check of ctx: see prepareSleep
		}
		// Stop a canceled statement here too, in case its producer only
		// watches ctx while it blocks.
		if ctx.Err() != nil {
			return false, context.Cause(ctx)
		}
		if parks && !rr.Ready(c.wakeFn) {
			c.parking = true
			return false, nil
		}
		if !parks && c.srv.pacer != nil {
			// Next may block for new data: the slot is for writing.
			c.giveSlot()
		}
		batch, err := ex.res.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return false, err
		}
		ex.pending = batch
	}
	if ex.kind == ResultCopyOut {
		c.send(&pgproto3.CopyDone{})
	}
	ex.done = true
	if ex.kind != ResultEmpty {
		ex.tag = ex.res.Tag()
	}
	ex.close() // release it now: a completed portal only needs its tag
	c.complete(ex)
	return false, nil
}

// batchBytes is the size of a batch's messages that sendRaw copies into
// the send buffer (a large one is written where it lies).
func batchBytes(msgs [][]byte) int {
	n := 0
	for _, m := range msgs {
		if len(m) < flushThreshold {
			n += len(m)
		}
	}
	return n
}

// complete sends the completion of a finished result.
func (c *conn) complete(ex *execution) {
	if ex.kind == ResultEmpty {
		c.send(&pgproto3.EmptyQueryResponse{})
		return
	}
	c.send(&pgproto3.CommandComplete{CommandTag: []byte(ex.tag)})
}

// checkResultMessage rejects a message a Result must not send, so that a bug
// in a producer becomes an error instead of a corrupt stream. A ResultCopyOut
// element may hold several CopyData messages back to back (see Result.Next).
func checkResultMessage(kind ResultKind, msg []byte) error {
	if len(msg) < 5 {
		return errMalformedResult
	}
	n := int64(binary.BigEndian.Uint32(msg[1:])) + 1
	switch {
	case n == int64(len(msg)):
		return checkResultType(kind, msg[0])
	case n < 5 || n > int64(len(msg)) || kind != ResultCopyOut:
		return errMalformedResult
	}
	for len(msg) > 0 {
		if len(msg) < 5 {
			return errMalformedResult
		}
		n := int64(binary.BigEndian.Uint32(msg[1:])) + 1
		if n < 5 || n > int64(len(msg)) || msg[0] != 'd' {
			return errMalformedResult
		}
		msg = msg[n:]
	}
	return nil
}

// checkResultType rejects a message type a Result of kind must not send.
func checkResultType(kind ResultKind, typ byte) error {
	switch typ {
	case 'N', 'S', 'A': // NoticeResponse, ParameterStatus, NotificationResponse
		return nil
	case 'D':
		if kind == ResultRows {
			return nil
		}
	case 'd':
		if kind == ResultCopyOut {
			return nil
		}
	}
	return fmt.Errorf("pgwire: result of kind %d produced a message of type %q", kind, typ)
}

// rowDescription encodes fields; text forces every format to text (Describe
// of a statement, before Bind chose formats).
func rowDescription(fields []Field, text bool) *pgproto3.RowDescription {
	rd := &pgproto3.RowDescription{Fields: make([]pgproto3.FieldDescription, len(fields))}
	for i, f := range fields {
		format := f.Format
		if text {
			format = FormatText
		}
		rd.Fields[i] = pgproto3.FieldDescription{
			Name:                 []byte(f.Name),
			TableOID:             f.TableOID,
			TableAttributeNumber: f.TableAttr,
			DataTypeOID:          f.TypeOID,
			DataTypeSize:         f.TypeSize,
			TypeModifier:         f.TypeMod,
			Format:               format,
		}
	}
	return rd
}

func copyFormats(fields []Field) []uint16 {
	codes := make([]uint16, len(fields))
	for i, f := range fields {
		codes[i] = uint16(f.Format)
	}
	return codes
}

// copyIn hands the client's COPY data to the result, then discards what it
// left unread.
func (c *conn) copyIn(ctx context.Context, ex *execution) error {
	cr, ok := ex.res.(CopyInResult)
	if !ok {
		return errors.New("pgwire: a ResultCopyIn result does not implement CopyInResult")
	}
	r := &copyReader{c: c, ctx: ctx}
	// Let a CancelRequest interrupt a read waiting for the client.
	defer c.input.interruptBy(ctx)()
	if err := cr.CopyIn(ctx, r); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	return nil
}

// copyReader is the io.Reader over the client's CopyData messages.
type copyReader struct {
	c    *conn
	ctx  context.Context // the statement's: its cancellation interrupts a read
	cur  []byte          // unread payload of the current CopyData; valid until the next receive
	done bool            // CopyDone was received
	err  error           // sticky: CopyFail, a protocol violation, a read error
}

// Read implements io.Reader.
func (r *copyReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.done {
			return 0, io.EOF
		}
		msg, err := r.c.receive()
		if err != nil {
			if r.ctx.Err() == nil || !errors.Is(err, context.Cause(r.ctx)) {
				// Not a CancelRequest interrupting the read: the input
				// stream is broken (disconnect, oversized or malformed
				// message), and the connection must end.
				r.c.inputErr = err
			}
			r.err = err
			return 0, err
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			r.cur = m.Data
		case *pgproto3.CopyDone:
			r.done = true
		case *pgproto3.CopyFail:
			r.err = Errorf("57014", "COPY from stdin failed: %s", m.Message).in(ErrCopyFailed)
		case *pgproto3.Flush, *pgproto3.Sync:
			// Ignored during COPY FROM, as Postgres does: a client may have
			// pipelined them.
		default:
			r.err = protocolErrorf("unexpected message type 0x%02X during COPY from stdin", frontendType(msg))
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}
