package pgwire

import (
	"context"
	"errors"

	"github.com/jackc/pgproto3/v2"
)

// simpleQuery runs a Query message: every statement's result in turn, the
// first error ending the rest, EmptyQueryResponse for an empty query, and one
// ReadyForQuery at the end. A session that is a QueryStepper runs it
// statement by statement (continueQuery), which can leave a result waiting
// for its next batch and continue from the connection's loop.
func (c *conn) simpleQuery(sql string) {
	// A simple query destroys the unnamed statement and portal, as in
	// Postgres.
	c.closeStatement("")
	c.closePortal("")

	ctx, end := c.beginStatement()
	if qs, ok := c.sess.(QueryStepper); ok {
		c.query = &queryRun{steps: qs.QuerySteps(ctx, sql), ctx: ctx, end: end}
		c.continueQuery()
		return
	}
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
		_, err := c.runResult(ctx, ex, 0, true, false)
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
	c.endQuery(ran, failed, end)
}

// queryRun is a simple query run statement by statement (QueryStepper):
// the state that lets the connection leave it while a result waits for its
// next batch (c.parking) and continue it from the top of its loop.
type queryRun struct {
	steps       QuerySteps
	ctx         context.Context // the query's, from beginStatement
	end         func()          // ends ctx
	ex          *execution      // the result being sent; nil between statements
	ran, failed bool
}

// continueQuery runs the statements of c.query until the query is over, or
// until a result waits for its next batch: c.parking is then set, and the
// connection's loop parks (park.go) and calls continueQuery again once
// woken.
func (c *conn) continueQuery() {
	q := c.query
	for {
		if q.ex == nil {
			res, err := q.steps.Next(q.ctx)
			if res == nil && err == nil {
				break // the query is over
			}
			if err != nil {
				c.reportError(q.ctx, err)
				q.failed = true
				break
			}
			q.ran = true
			q.ex = &execution{res: res}
		}
		_, err := c.runResult(q.ctx, q.ex, 0, true, true)
		if err == nil && c.parking {
			return // parked: run sleeps until the result wakes it
		}
		q.ex.close()
		q.ex = nil
		if err != nil {
			c.reportError(q.ctx, err)
			q.failed = true
			break
		}
		if c.werr != nil || c.ctx.Err() != nil {
			break
		}
	}
	c.query = nil
	q.steps.Stop()
	c.endQuery(q.ran, q.failed, q.end)
}

// endQuery completes a simple query: EmptyQueryResponse when it had no
// statement, then ReadyForQuery.
func (c *conn) endQuery(ran, failed bool, end func()) {
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
