package conformance

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// wireConn is one named script connection. pgconn performs the startup and
// authentication; then the connection is hijacked and spoken to message by
// message with pgproto3, so that the runner sees exactly what the server
// sends: the order of RowDescription and NoticeResponse, each CopyData, the
// command tags.
type wireConn struct {
	name   string
	addr   string
	nc     net.Conn
	fe     *pgproto3.Frontend
	pid    uint32
	secret []byte
	// params are the ParameterStatus values reported at startup.
	params map[string]string
	// pending is true between sending a statement and reading its
	// ReadyForQuery.
	pending bool
	// broken is set when a read failed: the protocol state is unknown.
	broken error
}

// dialWire connects as user with application_name app (empty: defaults).
func dialWire(ctx context.Context, name, addr, user, app string) (*wireConn, error) {
	if user == "" {
		user = "materialize"
	}
	u := url.URL{Scheme: "postgres", User: url.User(user), Host: addr, Path: "/materialize"}
	q := url.Values{"sslmode": {"disable"}}
	if app != "" {
		q.Set("application_name", app)
	}
	u.RawQuery = q.Encode()
	pc, err := pgconn.Connect(ctx, u.String())
	if err != nil {
		return nil, err
	}
	hc, err := pc.Hijack()
	if err != nil {
		return nil, err
	}
	return &wireConn{name: name, addr: addr, nc: hc.Conn, fe: pgproto3.NewFrontend(hc.Conn, hc.Conn), pid: hc.PID, secret: hc.SecretKey, params: hc.ParameterStatuses}, nil
}

// close drops the connection without a Terminate message, as a client that
// dies does.
func (c *wireConn) close() { c.nc.Close() }

// sendQuery sends a simple Query.
func (c *wireConn) sendQuery(sql string) error {
	if c.broken != nil {
		return c.broken
	}
	if c.pending {
		return fmt.Errorf("conn %s: a statement is still pending (recv it first)", c.name)
	}
	c.fe.Send(&pgproto3.Query{String: sql})
	if err := c.fe.Flush(); err != nil {
		c.broken = err
		return err
	}
	c.pending = true
	return nil
}

// sendExtended sends Parse, Bind (with resultFormat for every column and
// params as text parameter values), Describe (portal), Execute and Sync
// for sql: the extended protocol.
func (c *wireConn) sendExtended(sql string, resultFormat int16, params ...string) error {
	if c.broken != nil {
		return c.broken
	}
	if c.pending {
		return fmt.Errorf("conn %s: a statement is still pending (recv it first)", c.name)
	}
	c.fe.Send(&pgproto3.Parse{Query: sql})
	values := make([][]byte, len(params))
	for i, p := range params {
		values[i] = []byte(p)
	}
	c.fe.Send(&pgproto3.Bind{ResultFormatCodes: []int16{resultFormat}, Parameters: values})
	c.fe.Send(&pgproto3.Describe{ObjectType: 'P'})
	c.fe.Send(&pgproto3.Execute{})
	c.fe.Send(&pgproto3.Sync{})
	if err := c.fe.Flush(); err != nil {
		c.broken = err
		return err
	}
	c.pending = true
	return nil
}

// describe returns the columns a statement would produce, without running
// it (Parse + Describe statement + Sync).
func (c *wireConn) describe(ctx context.Context, sql string) ([]pgproto3.FieldDescription, error) {
	if c.broken != nil {
		return nil, c.broken
	}
	if c.pending {
		return nil, fmt.Errorf("conn %s: a statement is still pending", c.name)
	}
	c.fe.Send(&pgproto3.Parse{Query: sql})
	c.fe.Send(&pgproto3.Describe{ObjectType: 'S'})
	c.fe.Send(&pgproto3.Sync{})
	if err := c.fe.Flush(); err != nil {
		c.broken = err
		return nil, err
	}
	c.pending = true
	var fields []pgproto3.FieldDescription
	var failed error
	for {
		ev, err := c.receive(ctx)
		if err != nil {
			return nil, err
		}
		switch {
		case ev.fields != nil:
			fields = ev.fields
		case ev.err != nil:
			failed = fmt.Errorf("describe: %s: %s", ev.err.Code, ev.err.Message)
		case ev.ready:
			return fields, failed
		}
	}
}

// event is one backend message, copied out of pgproto3's buffers (which
// are only valid until the next Receive).
type event struct {
	fields   []pgproto3.FieldDescription // RowDescription
	row      [][]byte                    // DataRow; a nil element is NULL
	isRow    bool
	tag      string // CommandComplete
	isTag    bool
	err      *pgproto3.ErrorResponse
	notice   *pgproto3.NoticeResponse
	copyOut  *pgproto3.CopyOutResponse
	copyData []byte
	isCopy   bool
	copyDone bool   // CopyDone
	empty    bool   // EmptyQueryResponse
	ready    bool   // ReadyForQuery
	param    string // ParameterStatus, as name=value
}

// receive reads the next message of interest, waiting until ctx's deadline
// at most. Messages that scripts never assert on (ParameterStatus,
// ParseComplete, ...) are skipped.
func (c *wireConn) receive(ctx context.Context) (event, error) {
	if c.broken != nil {
		return event{}, c.broken
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	c.nc.SetReadDeadline(deadline)
	for {
		msg, err := c.fe.Receive()
		if err != nil {
			c.broken = fmt.Errorf("conn %s: %w", c.name, err)
			return event{}, c.broken
		}
		switch m := msg.(type) {
		case *pgproto3.RowDescription:
			fs := make([]pgproto3.FieldDescription, len(m.Fields))
			for i, f := range m.Fields {
				f.Name = append([]byte(nil), f.Name...)
				fs[i] = f
			}
			return event{fields: fs}, nil
		case *pgproto3.DataRow:
			row := make([][]byte, len(m.Values))
			for i, v := range m.Values {
				if v != nil {
					row[i] = append([]byte{}, v...)
				}
			}
			return event{row: row, isRow: true}, nil
		case *pgproto3.CommandComplete:
			return event{tag: string(m.CommandTag), isTag: true}, nil
		case *pgproto3.ErrorResponse:
			e := *m
			return event{err: &e}, nil
		case *pgproto3.NoticeResponse:
			n := *m
			return event{notice: &n}, nil
		case *pgproto3.CopyOutResponse:
			co := *m
			co.ColumnFormatCodes = append([]uint16(nil), m.ColumnFormatCodes...)
			return event{copyOut: &co}, nil
		case *pgproto3.CopyData:
			return event{copyData: append([]byte{}, m.Data...), isCopy: true}, nil
		case *pgproto3.CopyDone:
			return event{copyDone: true}, nil
		case *pgproto3.EmptyQueryResponse:
			return event{empty: true}, nil
		case *pgproto3.ParameterStatus:
			return event{param: m.Name + "=" + m.Value}, nil
		case *pgproto3.ReadyForQuery:
			c.pending = false
			return event{ready: true}, nil
		case *pgproto3.CopyInResponse:
			// Scripts do not feed COPY FROM: abort it.
			c.fe.Send(&pgproto3.CopyFail{Message: "conformance scripts do not send COPY data"})
			if err := c.fe.Flush(); err != nil {
				c.broken = err
				return event{}, err
			}
		default:
			// ParseComplete, BindComplete, NoData,
			// ParameterDescription, NotificationResponse.
		}
	}
}

// cancelRequest sends a CancelRequest for c's running statement on a new
// connection, as libpq's PQcancel does.
func (c *wireConn) cancelRequest(ctx context.Context) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	buf, err := (&pgproto3.CancelRequest{ProcessID: c.pid, SecretKey: c.secret}).Encode(nil)
	if err != nil {
		return err
	}
	if _, err := nc.Write(buf); err != nil {
		return err
	}
	// The server closes the connection once it has handled the request;
	// waiting for that orders the cancel before what the script does next.
	nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	var one [1]byte
	_, _ = nc.Read(one[:])
	return nil
}

// cancelBackend runs SELECT pg_cancel_backend(pid) on c, which must answer
// t: the backend exists and c's role may cancel it.
func (c *wireConn) cancelBackend(ctx context.Context, pid uint32) error {
	if err := c.sendQuery(fmt.Sprintf("SELECT pg_cancel_backend(%d)", pid)); err != nil {
		return err
	}
	var got string
	for {
		ev, err := c.receive(ctx)
		switch {
		case err != nil:
			return err
		case ev.err != nil:
			got = errorLine(ev.err)
		case ev.isRow && len(ev.row) == 1:
			got = string(ev.row[0])
		case ev.ready:
			if got != "t" {
				return fmt.Errorf("conn %s: pg_cancel_backend(%d) gave %q, want t", c.name, pid, got)
			}
			return nil
		}
	}
}

// pgcopySignature starts a binary COPY stream.
var pgcopySignature = []byte("PGCOPY\n\xff\r\n\x00")

// binaryCopyReader decodes a binary COPY stream one CopyData at a time.
// Each CopyData must hold whole tuples: the header (with flags and the
// header extension) before the first tuple, the trailer (-1) at the end.
type binaryCopyReader struct {
	headerSeen  bool
	trailerSeen bool
}

// next decodes one CopyData: whether it held the header, its tuples (each
// a list of fields, nil for NULL) and whether it held the trailer.
func (r *binaryCopyReader) next(data []byte) (header bool, tuples [][][]byte, trailer bool, err error) {
	if !r.headerSeen {
		if len(data) < len(pgcopySignature)+8 || string(data[:len(pgcopySignature)]) != string(pgcopySignature) {
			return false, nil, false, errors.New("binary COPY data does not start with the PGCOPY signature")
		}
		data = data[len(pgcopySignature):]
		flags := binary.BigEndian.Uint32(data)
		ext := binary.BigEndian.Uint32(data[4:])
		data = data[8:]
		if flags != 0 {
			return false, nil, false, fmt.Errorf("binary COPY header flags %#x, want 0", flags)
		}
		if uint32(len(data)) < ext {
			return false, nil, false, errors.New("binary COPY header extension truncated")
		}
		data = data[ext:]
		r.headerSeen, header = true, true
	}
	for len(data) > 0 {
		if r.trailerSeen {
			return header, tuples, trailer, errors.New("binary COPY data after the trailer")
		}
		if len(data) < 2 {
			return header, tuples, trailer, errors.New("binary COPY tuple truncated")
		}
		n := int16(binary.BigEndian.Uint16(data))
		data = data[2:]
		if n == -1 {
			r.trailerSeen, trailer = true, true
			continue
		}
		if n < 0 {
			return header, tuples, trailer, fmt.Errorf("binary COPY tuple with %d fields", n)
		}
		tuple := make([][]byte, n)
		for i := range tuple {
			if len(data) < 4 {
				return header, tuples, trailer, errors.New("binary COPY field truncated")
			}
			l := int32(binary.BigEndian.Uint32(data))
			data = data[4:]
			if l < 0 {
				continue
			}
			if int(l) > len(data) {
				return header, tuples, trailer, errors.New("binary COPY field truncated")
			}
			tuple[i] = data[:l:l]
			data = data[l:]
		}
		tuples = append(tuples, tuple)
	}
	return header, tuples, trailer, nil
}
