package pgwire

import (
	"context"
	"slices"

	"github.com/jackc/pgproto3/v2"
)

// The extended query protocol: pgwire keeps the named and unnamed prepared
// statements and portals of the connection and applies Postgres's rules to
// them; the session only prepares, binds and executes.

// prepared is a prepared statement and the shape it reported at Parse.
type prepared struct {
	stmt   Statement
	params []uint32
	fields []Field // nil: NoData
}

// portal is a bound statement; ex is set from its first Execute on.
type portal struct {
	p      Portal
	fields []Field // the statement's fields with the formats of Bind
	ex     *execution
}

func (p *portal) close() {
	if p.ex != nil {
		p.ex.close()
	}
	p.p.Close()
}

// extendedError reports an error of an extended-protocol message and skips
// the rest of the batch, up to Sync.
func (c *conn) extendedError(ctx context.Context, err error) {
	c.reportError(ctx, err)
	c.ignoreTillSync = true
	c.batchFailed = true
	// Sent at once, as PostgreSQL does: a client that sent Flush (and
	// ignored messages, Flush included, follow until Sync) is waiting
	// for it.
	c.flush()
}

func (c *conn) parse(m *pgproto3.Parse) {
	if m.Name != "" {
		if _, ok := c.stmts[m.Name]; ok {
			c.extendedError(nil, Errorf("42P05", "prepared statement \"%s\" already exists", m.Name))
			return
		}
	} else {
		// Postgres drops the unnamed statement before parsing its successor,
		// even if that fails.
		c.closeStatement("")
	}
	ctx, end := c.beginStatement()
	defer end()
	stmt, err := c.sess.Prepare(ctx, m.Query, slices.Clone(m.ParameterOIDs))
	if err != nil {
		c.extendedError(ctx, err)
		return
	}
	if c.stmts == nil {
		c.stmts = make(map[string]*prepared)
	}
	c.stmts[m.Name] = &prepared{stmt: stmt, params: stmt.ParamOIDs(), fields: stmt.Fields()}
	c.send(&pgproto3.ParseComplete{})
}

func (c *conn) bind(m *pgproto3.Bind) {
	ps, ok := c.stmts[m.PreparedStatement]
	if !ok {
		c.extendedError(nil, unknownStatement(m.PreparedStatement))
		return
	}
	if m.DestinationPortal != "" {
		if _, ok := c.portals[m.DestinationPortal]; ok {
			c.extendedError(nil, Errorf("42P03", "portal \"%s\" already exists", m.DestinationPortal))
			return
		}
	} else {
		c.closePortal("")
	}
	if len(m.Parameters) != len(ps.params) {
		c.extendedError(nil, protocolErrorf("bind message supplies %d parameters, but prepared statement \"%s\" requires %d",
			len(m.Parameters), m.PreparedStatement, len(ps.params)))
		return
	}
	paramFormats, err := normalizeFormats(m.ParameterFormatCodes, len(m.Parameters), "bind message has %d parameter formats but %d parameters")
	if err != nil {
		c.extendedError(nil, err)
		return
	}
	resultFormats, err := normalizeFormats(m.ResultFormatCodes, len(ps.fields), "bind message has %d result formats but query has %d columns")
	if err != nil {
		c.extendedError(nil, err)
		return
	}
	ctx, end := c.beginStatement()
	defer end()
	p, err := ps.stmt.Bind(ctx, m.Parameters, paramFormats, resultFormats)
	if err != nil {
		c.extendedError(ctx, err)
		return
	}
	var fields []Field
	if ps.fields != nil {
		fields = make([]Field, len(ps.fields))
		for i, f := range ps.fields {
			f.Format = resultFormats[i]
			fields[i] = f
		}
	}
	if c.portals == nil {
		c.portals = make(map[string]*portal)
	}
	c.portals[m.DestinationPortal] = &portal{p: p, fields: fields}
	c.send(&pgproto3.BindComplete{})
}

// normalizeFormats expands the format codes of Bind to one per value: none
// means all text, one applies to all.
func normalizeFormats(codes []int16, n int, mismatch string) ([]int16, error) {
	out := make([]int16, n)
	switch len(codes) {
	case 0:
	case 1:
		for i := range out {
			out[i] = codes[0]
		}
	case n:
		copy(out, codes)
	default:
		return nil, protocolErrorf(mismatch, len(codes), n)
	}
	for _, f := range codes {
		if f != FormatText && f != FormatBinary {
			return nil, Errorf("22023", "unsupported format code: %d", f)
		}
	}
	return out, nil
}

func (c *conn) describe(m *pgproto3.Describe) {
	switch m.ObjectType {
	case 'S':
		ps, ok := c.stmts[m.Name]
		if !ok {
			c.extendedError(nil, unknownStatement(m.Name))
			return
		}
		c.send(&pgproto3.ParameterDescription{ParameterOIDs: ps.params})
		c.sendFields(ps.fields, true)
	case 'P':
		p, ok := c.portals[m.Name]
		if !ok {
			c.extendedError(nil, unknownPortal(m.Name))
			return
		}
		c.sendFields(p.fields, false)
	default:
		c.extendedError(nil, protocolErrorf("invalid DESCRIBE message subtype %d", m.ObjectType))
	}
}

// sendFields sends RowDescription, or NoData for nil fields.
func (c *conn) sendFields(fields []Field, text bool) {
	if fields == nil {
		c.send(&pgproto3.NoData{})
		return
	}
	c.send(rowDescription(fields, text))
}

func (c *conn) execute(m *pgproto3.Execute) {
	p, ok := c.portals[m.Portal]
	if !ok {
		c.extendedError(nil, unknownPortal(m.Portal))
		return
	}
	ctx, end := c.beginStatement()
	if p.ex == nil {
		res, err := p.p.Execute(ctx)
		if err == nil && res == nil {
			err = errorNilResult
		}
		if err != nil {
			c.extendedError(ctx, err)
			c.closePortal(m.Portal)
			end()
			return
		}
		p.ex = &execution{res: res}
	}
	c.exec = &executeRun{name: m.Portal, p: p, maxRows: int(m.MaxRows), ctx: ctx, end: end}
	c.continueExecute()
}

// executeRun is an Execute being run: the state that lets the connection
// leave it while its result waits for its next batch (c.parking) and
// continue it from the top of its loop, as a simple query's (queryRun).
type executeRun struct {
	name    string
	p       *portal
	maxRows int
	ctx     context.Context // from beginStatement
	end     func()          // ends ctx
}

// continueExecute runs c.exec until its result completes, fails or is
// suspended at maxRows, or until the result waits for its next batch:
// c.parking is then set, and the connection's loop parks and calls
// continueExecute again once woken. Only an Execute without a row limit parks (the
// limit counts the rows of one Execute, which runResult keeps on its
// stack).
func (c *conn) continueExecute() {
	x := c.exec
	_, err := c.runResult(x.ctx, x.p.ex, x.maxRows, false, x.maxRows == 0)
	if err == nil && c.parking {
		return // parked
	}
	c.exec = nil
	if err != nil {
		c.extendedError(x.ctx, err)
		c.closePortal(x.name) // a failed portal cannot run again
	}
	x.end()
}

func (c *conn) closeMessage(m *pgproto3.Close) {
	switch m.ObjectType {
	case 'S':
		c.closeStatement(m.Name)
	case 'P':
		c.closePortal(m.Name)
	default:
		c.extendedError(nil, protocolErrorf("invalid CLOSE message subtype %d", m.ObjectType))
		return
	}
	// Closing what does not exist is not an error.
	c.send(&pgproto3.CloseComplete{})
}

func (c *conn) sync() {
	c.ignoreTillSync = false
	ctx, end := c.beginStatement()
	err := c.sess.Sync(ctx, c.batchFailed)
	end()
	c.batchFailed = false
	if err != nil {
		c.reportError(ctx, err)
	}
	c.endOfTransaction()
	c.readyForQuery()
}

// closeStatement closes a prepared statement, if it exists. Portals bound
// from it live on.
func (c *conn) closeStatement(name string) {
	if ps, ok := c.stmts[name]; ok {
		delete(c.stmts, name)
		ps.stmt.Close()
	}
}

// closePortal closes a portal and its result, if it exists.
func (c *conn) closePortal(name string) {
	if p, ok := c.portals[name]; ok {
		delete(c.portals, name)
		p.close()
	}
}

func unknownStatement(name string) error {
	if name == "" {
		return Errorf("26000", "unnamed prepared statement does not exist")
	}
	return Errorf("26000", "prepared statement \"%s\" does not exist", name)
}

func unknownPortal(name string) error {
	return Errorf("34000", "portal \"%s\" does not exist", name)
}

// errorNilResult is what a Portal returning (nil, nil) gets reported as.
var errorNilResult = Errorf("XX000", "internal error: portal returned no result")
