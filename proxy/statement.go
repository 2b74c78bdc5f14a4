package proxy

import (
	"context"

	"github.com/shardtail/shardtail/pgwire"
)

// Connect returns a session's upstream connection, connecting it first if
// needed. Statements and COPY results that outlive one call hold a Connect
// rather than a *Conn: the session may have replaced a lost connection by
// the time they run.
type Connect func(ctx context.Context) (*Conn, error)

// Prepare parses an extended-protocol statement upstream and returns it;
// its portals execute upstream through connect.
func (c *Conn) Prepare(ctx context.Context, connect Connect, text string, paramOIDs []uint32) (pgwire.Statement, error) {
	sd, err := c.conn.Prepare(ctx, "", text, paramOIDs)
	if err != nil {
		return nil, upstreamError(err)
	}
	return &statement{connect: connect, sql: text, paramOIDs: sd.ParamOIDs, fields: fieldsFromUpstream(sd.Fields)}, nil
}

// statement is an extended-protocol statement served upstream.
type statement struct {
	connect   Connect
	sql       string
	paramOIDs []uint32
	fields    []pgwire.Field
}

// ParamOIDs implements pgwire.Statement.
func (p *statement) ParamOIDs() []uint32 { return p.paramOIDs }

// Fields implements pgwire.Statement.
func (p *statement) Fields() []pgwire.Field { return p.fields }

// Close implements pgwire.Statement.
func (p *statement) Close() {}

// Bind implements pgwire.Statement. It copies the parameters: pgwire's are
// valid only until the next message.
func (p *statement) Bind(ctx context.Context, params [][]byte, paramFormats, resultFormats []int16) (pgwire.Portal, error) {
	vals := make([][]byte, len(params))
	for i, v := range params {
		if v != nil {
			vals[i] = append([]byte{}, v...)
		}
	}
	return &portal{st: p, params: vals, paramFormats: append([]int16(nil), paramFormats...), resultFormats: append([]int16(nil), resultFormats...)}, nil
}

// portal is a bound statement served upstream.
type portal struct {
	st                          *statement
	params                      [][]byte
	paramFormats, resultFormats []int16
}

// Execute implements pgwire.Portal.
func (p *portal) Execute(ctx context.Context) (pgwire.Result, error) {
	c, err := p.st.connect(ctx)
	if err != nil {
		return nil, err
	}
	return c.ExecParams(ctx, p.st.sql, p.params, p.st.paramOIDs, p.paramFormats, p.resultFormats, p.st.fields), nil
}

// Close implements pgwire.Portal.
func (p *portal) Close() {}

var (
	_ pgwire.Statement = (*statement)(nil)
	_ pgwire.Portal    = (*portal)(nil)
)
