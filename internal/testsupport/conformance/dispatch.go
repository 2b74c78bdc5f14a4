package conformance

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func (r *runner) dispatch(ctx context.Context, c *Case, out *output) error {
	name, _ := c.Arg("conn")
	if name == "" {
		name = "default"
	}
	switch c.Cmd {
	case "connect":
		if _, ok := r.conns[name]; ok {
			return fmt.Errorf("conn %s already exists", name)
		}
		user, _ := c.Arg("user")
		app, _ := c.Arg("app")
		wc, err := dialWire(ctx, name, r.addr, user, app)
		if err != nil {
			out.add(connectError(err))
			return nil
		}
		r.conns[name] = wc
		out.add("ok")
		if c.Flag("params") {
			// The parameters SUBSCRIBE-SPEC.md says are reported; drivers
			// rely on these, others are not asserted.
			for _, k := range []string{"application_name", "client_encoding", "DateStyle", "integer_datetimes",
				"server_encoding", "server_version", "standard_conforming_strings", "TimeZone"} {
				v, ok := wc.params[k]
				if !ok {
					v = "(not reported)"
				}
				out.add("param " + k + "=" + v)
			}
		}
		return nil
	case "disconnect":
		wc, ok := r.conns[name]
		if !ok {
			return fmt.Errorf("no conn %s", name)
		}
		wc.close()
		delete(r.conns, name)
		return nil
	}
	if c.Cmd == "now" {
		return r.now(ctx, c, out)
	}
	wc, err := r.conn(ctx, c, name)
	if err != nil {
		return err
	}
	switch c.Cmd {
	case "exec", "query", "fetch":
		return r.statement(ctx, c, wc, out)
	case "fetch-until":
		return r.fetchUntil(ctx, c, wc, out)
	case "subscribe", "copy":
		return r.stream(ctx, c, wc, out)
	case "send":
		sql, err := r.substitute(c.Input)
		if err != nil {
			return err
		}
		st := r.newStmt(wc, sql)
		if err := wc.sendQuery(sql); err != nil {
			return err
		}
		r.setPending(wc, st)
		time.Sleep(sendSettle)
		return nil
	case "recv":
		st := r.pendingStmt(wc)
		if st == nil || !wc.pending {
			return fmt.Errorf("conn %s: nothing pending", name)
		}
		n, notices := -1, 0
		if v, ok := c.Arg("rows"); ok {
			if n, err = strconv.Atoi(v); err != nil {
				return fmt.Errorf("bad rows: %v", err)
			}
		}
		if v, ok := c.Arg("notices"); ok {
			if notices, err = strconv.Atoi(v); err != nil || notices <= 0 {
				return fmt.Errorf("bad notices: %q", v)
			}
		}
		return r.read(ctx, wc, st, out, readOpts{rows: n, notices: notices, tags: true, cols: c.Flag("cols"), ordered: c.Flag("ordered")})
	case "cancel":
		st := r.pendingStmt(wc)
		if st == nil || !wc.pending {
			return fmt.Errorf("conn %s: nothing pending", name)
		}
		send := wc.cancelRequest
		if by, ok := c.Arg("by"); ok {
			// pg_cancel_backend from another connection, in place of
			// the CancelRequest.
			bc, err := r.conn(ctx, &Case{}, by)
			if err != nil {
				return err
			}
			if bc == wc {
				return fmt.Errorf("conn %s: by= names the connection being cancelled", name)
			}
			send = func(ctx context.Context) error { return bc.cancelBackend(ctx, wc.pid) }
		}
		return r.cancelWith(ctx, wc, st, out, send)
	}
	return fmt.Errorf("unknown directive %q", c.Cmd)
}

// conn returns the named connection, connecting on first use with the
// case's user= and app= (application_name).
func (r *runner) conn(ctx context.Context, c *Case, name string) (*wireConn, error) {
	if wc, ok := r.conns[name]; ok {
		if c.Flag("user") || c.Flag("app") {
			return nil, fmt.Errorf("conn %s exists already: user= and app= apply only when it connects", name)
		}
		return wc, nil
	}
	user, _ := c.Arg("user")
	app, _ := c.Arg("app")
	wc, err := dialWire(ctx, name, r.addr, user, app)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %v", name, err)
	}
	r.conns[name] = wc
	return wc, nil
}

func connectError(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Sprintf("error %s: %s", pe.Code, pe.Message)
	}
	return "connect failed: " + err.Error()
}

// substitute replaces placeholders in a case's SQL by their values.
func (r *runner) substitute(sql string) (string, error) {
	var firstErr error
	out := placeholderRe.ReplaceAllStringFunc(sql, func(p string) string {
		m := placeholderRe.FindStringSubmatch(p)
		if m[4] != "" {
			wc, ok := r.conns[m[4]]
			if !ok {
				firstErr = fmt.Errorf("%s: no conn %s", p, m[4])
				return p
			}
			return strconv.FormatUint(uint64(wc.pid), 10)
		}
		v, err := r.ts.value(m[1])
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return strconv.FormatUint(v, 10)
	})
	return out, firstErr
}

// now prints the latest complete time of a relation: the AS OF that a
// SUBSCRIBE without AS OF picks, read from the first progress row of
// SUBSCRIBE <relation> WITH (PROGRESS, SNAPSHOT = false) on a connection of
// its own. With the tick off that is the time of the relation's last write.
func (r *runner) now(ctx context.Context, c *Case, out *output) error {
	rel := strings.TrimSpace(c.Input)
	if rel == "" {
		return errors.New("now: give the relation as input")
	}
	wc, ok := r.conns["\x00now"]
	if !ok {
		var err error
		if wc, err = dialWire(ctx, "now", r.addr, "", ""); err != nil {
			return err
		}
		r.conns["\x00now"] = wc
	}
	st := &stmtState{stmts: []stmtInfo{{stream: &streamCheck{}}}}
	if err := wc.sendQuery("SUBSCRIBE " + rel + " WITH (PROGRESS, SNAPSHOT = false)"); err != nil {
		return err
	}
	r.setPending(wc, st)
	probe := &output{} // raw: the timestamp is named when printed below
	if err := r.read(ctx, wc, st, probe, readOpts{rows: 1, tags: true}); err != nil {
		return err
	}
	if wc.pending {
		if err := r.cancel(ctx, wc, st, &output{}); err != nil {
			return err
		}
	}
	for _, l := range probe.lines {
		if strings.HasPrefix(l, "NOTICE ") {
			continue
		}
		if f := strings.Fields(l); len(f) > 2 && f[1] == "t" {
			out.add(f[0])
			continue
		}
		out.add(l)
	}
	return nil
}

// fetchUntil repeats a FETCH until it has returned rows=N data rows, and
// prints only those: the progress rows before and between them, whose
// number depends on the tick, are checked but not printed.
func (r *runner) fetchUntil(ctx context.Context, c *Case, wc *wireConn, out *output) error {
	sql, err := r.substitute(c.Input)
	if err != nil {
		return err
	}
	v, _ := c.Arg("rows")
	want, err := strconv.Atoi(v)
	if err != nil || want <= 0 {
		return fmt.Errorf("fetch-until needs rows=N > 0")
	}
	opts := readOpts{rows: -1, skipProgress: true, ordered: c.Flag("ordered")}
	for n := 0; n < want; {
		if ctx.Err() != nil {
			return fmt.Errorf("fetch-until: %d of %d rows before the timeout", n, want)
		}
		st := r.newStmt(wc, sql)
		if err := wc.sendQuery(sql); err != nil {
			return err
		}
		r.setPending(wc, st)
		before := len(out.rows) + len(out.lines)
		if err := r.read(ctx, wc, st, out, opts); err != nil {
			return err
		}
		n += len(out.lines) - before
	}
	return nil
}

// statement runs exec, query and fetch: one round trip, read to
// ReadyForQuery.
func (r *runner) statement(ctx context.Context, c *Case, wc *wireConn, out *output) error {
	sql, err := r.substitute(c.Input)
	if err != nil {
		return err
	}
	st := r.newStmt(wc, sql)
	switch {
	case c.Flag("binary"):
		err = wc.sendExtended(sql, 1, c.args()...)
	case c.Flag("args"):
		err = wc.sendExtended(sql, 0, c.args()...)
	default:
		err = wc.sendQuery(sql)
	}
	if err != nil {
		return err
	}
	r.setPending(wc, st)
	opts := readOpts{rows: -1, tags: c.Cmd != "query", cols: c.Flag("cols"), ordered: c.Flag("ordered"), sortAll: c.Flag("sort"), params: c.Flag("params")}
	err = r.read(ctx, wc, st, out, opts)
	if c.Cmd == "exec" {
		time.Sleep(writeSpacing)
	}
	return err
}

// stream runs subscribe and copy: with rows=N it reads N rows and then
// cancels the statement, else it reads to completion.
func (r *runner) stream(ctx context.Context, c *Case, wc *wireConn, out *output) error {
	sql, err := r.substitute(c.Input)
	if err != nil {
		return err
	}
	st := r.newStmt(wc, sql)
	if c.Cmd == "copy" && binaryCopyRe.MatchString(sql) {
		// Binary COPY carries no type information: ask for the inner
		// SUBSCRIBE's columns first.
		if inner := innerQuery(sql); inner != "" {
			fields, err := wc.describe(ctx, inner)
			if err != nil {
				return err
			}
			for _, f := range fields {
				st.copyOIDs = append(st.copyOIDs, f.DataTypeOID)
			}
		}
	}
	switch {
	case c.Flag("extended"):
		err = wc.sendExtended(sql, 0, c.args()...)
	case c.Flag("binary"):
		err = wc.sendExtended(sql, 1, c.args()...)
	default:
		err = wc.sendQuery(sql)
	}
	if err != nil {
		return err
	}
	r.setPending(wc, st)
	n := -1
	if v, ok := c.Arg("rows"); ok {
		if n, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("bad rows: %v", err)
		}
	}
	opts := readOpts{rows: n, tags: true, cols: c.Flag("cols"), ordered: c.Flag("ordered")}
	if err := r.read(ctx, wc, st, out, opts); err != nil {
		return err
	}
	if wc.pending && n >= 0 {
		return r.cancel(ctx, wc, st, out)
	}
	return nil
}

// cancel sends CancelRequests (again every 300 ms, in case the first one
// overtook the statement) until the statement ends, and prints how it
// ended. Rows still streaming in are not printed.
func (r *runner) cancel(ctx context.Context, wc *wireConn, st *stmtState, out *output) error {
	return r.cancelWith(ctx, wc, st, out, wc.cancelRequest)
}

// cancelWith is cancel with send as the way of cancelling. A send that
// fails (pg_cancel_backend not answering t, say) is the case's error, but
// only once the statement ended: its connection is read to the end first.
func (r *runner) cancelWith(ctx context.Context, wc *wireConn, st *stmtState, out *output, send func(context.Context) error) error {
	var sendErr error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(300 * time.Millisecond)
		defer t.Stop()
		for {
			if err := send(ctx); err != nil && sendErr == nil && ctx.Err() == nil {
				sendErr = err
			}
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	err := r.read(ctx, wc, st, out, readOpts{rows: -1, tags: true, dropRows: true})
	close(stop)
	wg.Wait()
	if err == nil {
		err = sendErr
	}
	return err
}
