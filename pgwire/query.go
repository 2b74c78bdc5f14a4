package pgwire

import (
	"errors"

	"github.com/jackc/pgproto3/v2"
)

// simpleQuery runs a Query message: every statement's result in turn, the
// first error ending the rest, EmptyQueryResponse for an empty query, and one
// ReadyForQuery at the end.
func (c *conn) simpleQuery(sql string) {
	// A simple query destroys the unnamed statement and portal, as in
	// Postgres.
	c.closeStatement("")
	c.closePortal("")

	ctx, end := c.beginStatement()
	ran, failed := false, false
	for res, err := range c.sess.Query(ctx, sql) {
		if err == nil && res == nil {
			err = errors.New("pgwire: session yielded a nil result")
		}
		if err != nil {
			c.reportError(ctx, err)
			failed = true
			break
		}
		ran = true
		ex := &execution{res: res}
		_, err := c.runResult(ctx, ex, 0, true)
		ex.close()
		if err != nil {
			c.reportError(ctx, err)
			failed = true
			break
		}
		if c.werr != nil || c.ctx.Err() != nil {
			break
		}
	}
	end()
	if !ran && !failed {
		c.send(&pgproto3.EmptyQueryResponse{})
	}
	c.endOfTransaction()
	c.readyForQuery()
}

// endOfTransaction closes every portal once the session is out of a
// transaction block: portals live no longer than their transaction.
func (c *conn) endOfTransaction() {
	if c.sess.TxStatus() != TxIdle {
		return
	}
	for name := range c.portals {
		c.closePortal(name)
	}
}
