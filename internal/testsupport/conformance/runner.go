package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	"github.com/shardtail/shardtail/persist"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
)

// Paths are the ways the server can serve a SUBSCRIBE; every script runs on
// each and must print the same output: the fast path and the dataflow path
// of a role-all server, and both again through a tail process (clients
// connect to the tail, which serves the fast path itself and proxies the
// rest to its upstream over shared storage).
var Paths = []struct {
	Name string
	Fast bool
	Tail bool
}{{"FastPath", true, false}, {"DataflowPath", false, false}, {"TailFastPath", true, true}, {"TailDataflowPath", false, true}}

const (
	// defaultTimeout bounds one case; a case that hangs fails with what it
	// had read so far.
	defaultTimeout = 10 * time.Second
	// defaultRetry bounds how long a retry case is repeated.
	defaultRetry = 5 * time.Second
	// writeSpacing is waited after every exec, so that the statements
	// of a script get timestamps more than maxOffset apart.
	writeSpacing = 5 * time.Millisecond
	// sendSettle is waited after a send, so that the server has started
	// the statement before the script goes on (a cancel, a write that the
	// statement must see arrive).
	sendSettle = 30 * time.Millisecond
	// slowCase is how long a case may take before the run logs it.
	slowCase = 2 * time.Second
)

// Test runs the script at path on both paths, each against a fresh server,
// and compares every case's output with the script's expectation. With
// rewrite, the fast path's output becomes the expectation (the file is
// rewritten) and the dataflow path is checked against it. A script marked
// "# known-failure" reports its mismatches with t.Log instead of failing.
func Test(t *testing.T, path string, rewrite bool) {
	s, err := ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	report := t.Errorf
	if s.KnownFailure {
		report = t.Logf
	}
	if rewrite && s.KnownFailure {
		// Its expectations are the spec's, which the server does not meet:
		// rewriting would record the bugs.
		t.Logf("%s: known-failure script, not rewritten", path)
		rewrite = false
	}
	failures := 0
	rewritten := map[*Case]string{}
	for _, p := range Paths {
		t.Run(p.Name, func(t *testing.T) {
			results := RunMode(t, s, p.Fast, p.Tail)
			if rewrite {
				// The fast path's output is the expectation; cases that run
				// only on the dataflow path take its output.
				for _, r := range results {
					if _, ok := rewritten[r.Case]; !ok {
						rewritten[r.Case] = r.Got
						r.Case.Expected = r.Got
					}
				}
				if err := os.WriteFile(path, []byte(s.Rewrite(rewritten)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range results {
				if r.Got != r.Case.Expected {
					failures++
					report("%s\n%s path: output differs\n--- want\n%s\n--- got\n%s", r.Case.Pos(path), p.Name, r.Case.Expected, r.Got)
				}
			}
		})
	}
	if s.KnownFailure {
		if failures == 0 && !rewrite {
			t.Logf("%s: every known failure passes now: move its cases to the other scripts", path)
		} else {
			t.Logf("%s: %d known-failure mismatches (not failing the test)", path, failures)
		}
	}
}

// Result is one case's output in one run.
type Result struct {
	Case *Case
	Got  string
}

// Run starts a fresh in-memory server with the fast path on or off, runs
// the script's cases in order, stops the server and returns the outputs.
func Run(t testing.TB, s *Script, fast bool) []Result { return RunMode(t, s, fast, false) }

// RunMode is Run, optionally through a tail process: a second server on
// the same storage with --upstream pointing at the first.
func RunMode(t testing.TB, s *Script, fast, tail bool) []Result {
	opts, err := serverOptions(s, fast)
	if err != nil {
		t.Fatalf("%s: %v", s.Path, err)
	}
	opts.Blob, opts.Consensus = blobmem.New(), consmem.New()
	srv := testserver.Start(t, opts)
	defer srv.Stop()
	addr := srv.Addr
	if tail {
		topts := opts
		upstream := srv.Addr
		topts.Adapter = func(c *adapter.Config) { c.Upstream = upstream }
		ts := testserver.Start(t, topts)
		defer ts.Stop()
		addr = ts.Addr
	}
	r := &runner{
		addr:    addr,
		conns:   map[string]*wireConn{},
		cursors: map[string]*cursorInfo{},
		ts:      newTimestamps(),
		types:   pgtype.NewMap(),
	}
	_, r.ts.noOffsets = s.Header["tick"]
	defer r.closeAll()
	var results []Result
	for _, c := range s.Cases {
		if !c.OnPath(fast) {
			continue
		}
		start := time.Now()
		results = append(results, Result{Case: c, Got: r.runCase(c)})
		if d := time.Since(start); d > slowCase {
			t.Logf("%s: slow case: %v", c.Pos(s.Path), d.Round(time.Millisecond))
		}
	}
	return results
}

// serverOptions reads the script header: "# tick: 20ms" turns on the
// coordinator's tick (off by default, so that uppers and progress rows
// move only with writes and every output is deterministic), "# compaction:
// N" turns on background compaction after N batches (off by default, so
// that historical reads see the batches as written), "# snapshot-chunk-rows:
// N" and "# part-target-bytes: N" cut snapshots and writes into small
// pieces, so that a few rows make a timestamp of many pieces.
func serverOptions(s *Script, fast bool) (testserver.Options, error) {
	opts := testserver.Options{FastPath: &fast, Tick: -1, Persist: persist.Config{CompactionMinInputs: -1}}
	if v, ok := s.Header["tick"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return opts, fmt.Errorf("header tick: %v", err)
		}
		opts.Tick = d
	}
	for key, field := range map[string]*int{
		"compaction":          &opts.Persist.CompactionMinInputs,
		"snapshot-chunk-rows": &opts.Persist.SnapshotChunkRows,
		"part-target-bytes":   &opts.Persist.PartTargetBytes,
	} {
		if v, ok := s.Header[key]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return opts, fmt.Errorf("header %s: %v", key, err)
			}
			*field = n
		}
	}
	return opts, nil
}

// runner is the state of one run: connections by name, cursors, and the
// timestamp placeholders.
type runner struct {
	addr    string
	conns   map[string]*wireConn
	pending map[string]*stmtState
	cursors map[string]*cursorInfo // by conn + "/" + cursor name
	ts      *timestamps
	types   *pgtype.Map
}

// cursorInfo is what the runner knows of a DECLAREd cursor.
type cursorInfo struct {
	ordered bool
	stream  *streamCheck
}

func (r *runner) closeAll() {
	for _, c := range r.conns {
		c.close()
	}
}

// runCase runs one case, repeating it while its output differs from the
// expectation when it is marked retry.
func (r *runner) runCase(c *Case) string {
	if !c.Flag("retry") {
		return r.do(c)
	}
	limit := defaultRetry
	if v, _ := c.Arg("retry"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			limit = d
		}
	}
	deadline := time.Now().Add(limit)
	for {
		saved := r.ts.clone()
		got := r.do(c)
		if got == c.Expected || time.Now().After(deadline) {
			return got
		}
		r.ts = saved
		time.Sleep(50 * time.Millisecond)
	}
}

// do runs one directive and returns its output.
func (r *runner) do(c *Case) string {
	timeout := defaultTimeout
	if v, ok := c.Arg("timeout"); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return "!! bad timeout: " + err.Error()
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := &output{ts: r.ts, unnamed: c.Flag("unnamed")}
	if err := r.dispatch(ctx, c, out); err != nil {
		out.add("!! " + err.Error())
	}
	return out.String()
}

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
		n := -1
		if v, ok := c.Arg("rows"); ok {
			if n, err = strconv.Atoi(v); err != nil {
				return fmt.Errorf("bad rows: %v", err)
			}
		}
		return r.read(ctx, wc, st, out, readOpts{rows: n, tags: true, cols: c.Flag("cols"), ordered: c.Flag("ordered")})
	case "cancel":
		st := r.pendingStmt(wc)
		if st == nil || !wc.pending {
			return fmt.Errorf("conn %s: nothing pending", name)
		}
		return r.cancel(ctx, wc, st, out)
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
	if c.Flag("binary") {
		err = wc.sendExtended(sql, 1)
	} else {
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
		err = wc.sendExtended(sql, 0)
	case c.Flag("binary"):
		err = wc.sendExtended(sql, 1)
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
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(300 * time.Millisecond)
		defer t.Stop()
		for {
			_ = wc.cancelRequest(ctx)
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
	return err
}

// stmtState follows the statements of one query text as their results
// arrive: which subscribe stream rows belong to, the columns, the COPY
// format.
type stmtState struct {
	stmts    []stmtInfo
	idx      int
	fields   []pgproto3.FieldDescription
	copying  bool
	copyDone bool
	copyBin  *binaryCopyReader
	copyOIDs []uint32
}

// stmtInfo is what the runner derives from one statement's text.
type stmtInfo struct {
	stream  *streamCheck // nil: not a subscribe
	ordered bool         // WITHIN TIMESTAMP ORDER BY
	csv     bool         // COPY ... FORMAT csv
}

func (st *stmtState) cur() stmtInfo {
	if st.idx < len(st.stmts) {
		return st.stmts[st.idx]
	}
	return stmtInfo{}
}

// next moves to the next statement's results.
func (st *stmtState) next() {
	st.idx++
	st.fields = nil
	st.copying, st.copyDone = false, false
	st.copyBin = nil
}

func (r *runner) setPending(wc *wireConn, st *stmtState) {
	if r.pending == nil {
		r.pending = map[string]*stmtState{}
	}
	r.pending[wc.name] = st
}

func (r *runner) pendingStmt(wc *wireConn) *stmtState { return r.pending[wc.name] }

var (
	withinOrderRe = regexp.MustCompile(`(?i)\bwithin\s+timestamp\s+order\s+by\b`)
	declareRe     = regexp.MustCompile(`(?is)^\s*declare\s+("[^"]+"|\w+)\s+cursor\b.*\bsubscribe\b`)
	fetchRe       = regexp.MustCompile(`(?is)^\s*fetch\b`)
	fetchWithRe   = regexp.MustCompile(`(?is)\bwith\s*\(.*$`)
	subscribeRe   = regexp.MustCompile(`(?is)^\s*(subscribe\b|copy\s*\(\s*subscribe\b)`)
	csvRe         = regexp.MustCompile(`(?i)\bformat\s*=?\s*'?csv\b`)
	binaryCopyRe  = regexp.MustCompile(`(?i)\bformat\s*=?\s*'?binary\b`)
)

// newStmt classifies the statements of sql. A DECLARE of a SUBSCRIBE
// cursor starts a new stream that the cursor's FETCHes continue.
func (r *runner) newStmt(wc *wireConn, sql string) *stmtState {
	st := &stmtState{}
	for _, s := range splitStatements(sql) {
		var info stmtInfo
		switch {
		case declareRe.MatchString(s):
			name := cursorName(declareRe.FindStringSubmatch(s)[1])
			r.cursors[wc.name+"/"+name] = &cursorInfo{ordered: withinOrderRe.MatchString(s), stream: &streamCheck{}}
		case fetchRe.MatchString(s):
			words := strings.Fields(strings.TrimSuffix(strings.TrimSpace(fetchWithRe.ReplaceAllString(s, "")), ";"))
			if ci := r.cursors[wc.name+"/"+cursorName(words[len(words)-1])]; ci != nil {
				info = stmtInfo{stream: ci.stream, ordered: ci.ordered}
			}
		case subscribeRe.MatchString(s):
			info = stmtInfo{stream: &streamCheck{}, ordered: withinOrderRe.MatchString(s), csv: csvRe.MatchString(s)}
		}
		st.stmts = append(st.stmts, info)
	}
	return st
}

func cursorName(s string) string {
	if strings.HasPrefix(s, `"`) {
		return strings.Trim(s, `"`)
	}
	return strings.ToLower(s)
}

// splitStatements splits SQL text at semicolons outside quotes.
func splitStatements(sql string) []string {
	var out []string
	var quote rune
	start := 0
	for i, ch := range sql {
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == ';':
			if s := strings.TrimSpace(sql[start:i]); s != "" {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	if s := strings.TrimSpace(sql[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// innerQuery returns the statement inside COPY ( ... ).
func innerQuery(sql string) string {
	open := strings.Index(sql, "(")
	if open < 0 {
		return ""
	}
	depth := 0
	for i := open; i < len(sql); i++ {
		switch sql[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return sql[open+1 : i]
			}
		}
	}
	return ""
}

// readOpts say how to read and print one directive's messages.
type readOpts struct {
	rows     int  // stop after this many rows; -1: read to ReadyForQuery
	tags     bool // print command tags
	cols     bool // print RowDescription
	ordered  bool // do not sort rows within a timestamp
	sortAll  bool // sort all rows (query sort)
	dropRows bool // do not print rows (draining a canceled stream)
	params   bool // print ParameterStatus messages
	// skipProgress does not print progress rows (they are still checked).
	skipProgress bool
}

// read reads messages of wc's pending statement and prints them.
func (r *runner) read(ctx context.Context, wc *wireConn, st *stmtState, out *output, o readOpts) error {
	defer out.flush()
	out.sortAll = o.sortAll
	n := 0
	for o.rows < 0 || n < o.rows {
		ev, err := wc.receive(ctx)
		if err != nil {
			out.add("!! " + err.Error())
			return nil
		}
		info := st.cur()
		out.ordered = o.ordered || info.ordered
		switch {
		case ev.fields != nil:
			st.fields = ev.fields
			if o.cols {
				out.add("columns: " + describeFields(ev.fields))
			}
		case ev.isRow:
			n++
			vals := make([]string, len(ev.row))
			for i, v := range ev.row {
				var f *pgproto3.FieldDescription
				if i < len(st.fields) {
					f = &st.fields[i]
				}
				vals[i] = r.fieldText(f, v)
			}
			isSub := len(st.fields) > 0 && string(st.fields[0].Name) == "mz_timestamp"
			progressCol := len(st.fields) > 1 && string(st.fields[1].Name) == "mz_progressed"
			skip := o.dropRows || (o.skipProgress && progressCol && len(vals) > 1 && vals[1] == "t")
			r.addRow(out, info, vals, strings.Join(vals, " "), isSub, progressCol, skip)
		case ev.isTag:
			if st.copying && !st.copyDone {
				out.add("!! COPY completed without CopyDone")
			}
			if o.tags {
				out.add(ev.tag)
			}
			st.next()
		case ev.err != nil:
			out.add(errorLine(ev.err))
			for _, l := range extraLines(ev.err) {
				out.add(l)
			}
			st.next()
		case ev.notice != nil:
			e := pgproto3.ErrorResponse(*ev.notice)
			out.add(fmt.Sprintf("%s %s: %s", e.Severity, e.Code, e.Message))
			for _, l := range extraLines(&e) {
				out.add(l)
			}
		case ev.copyOut != nil:
			st.copying = true
			format := "text"
			if ev.copyOut.OverallFormat == 1 {
				format = "binary"
				st.copyBin = &binaryCopyReader{}
			}
			line := fmt.Sprintf("copy-out: %s, %d columns", format, len(ev.copyOut.ColumnFormatCodes))
			for _, f := range ev.copyOut.ColumnFormatCodes {
				if f != uint16(ev.copyOut.OverallFormat) {
					line += fmt.Sprintf(" (column formats %v)", ev.copyOut.ColumnFormatCodes)
					break
				}
			}
			out.add(line)
		case ev.isCopy:
			n += r.copyData(out, st, info, ev.copyData, o.dropRows)
		case ev.copyDone:
			st.copyDone = true
		case ev.empty:
			out.add("empty query")
		case ev.param != "":
			if o.params {
				out.add("param " + ev.param)
			}
		case ev.ready:
			return nil
		}
	}
	return nil
}

// copyData prints one CopyData message and returns how many rows it held.
func (r *runner) copyData(out *output, st *stmtState, info stmtInfo, data []byte, drop bool) int {
	if st.copyBin != nil {
		header, tuples, trailer, err := st.copyBin.next(data)
		if header {
			out.add("PGCOPY header")
		}
		for _, tup := range tuples {
			vals := make([]string, len(tup))
			for i, v := range tup {
				var f *pgproto3.FieldDescription
				if i < len(st.copyOIDs) {
					f = &pgproto3.FieldDescription{DataTypeOID: st.copyOIDs[i], Format: 1}
				}
				vals[i] = r.fieldText(f, v)
			}
			r.addRow(out, info, vals, strings.Join(vals, " "), info.stream != nil, true, drop)
		}
		if len(tuples) > 1 {
			out.add(fmt.Sprintf("!! one CopyData held %d rows", len(tuples)))
		}
		if trailer {
			out.add("PGCOPY trailer")
		}
		if err != nil {
			out.add("!! " + err.Error())
		}
		return len(tuples)
	}
	line, ok := strings.CutSuffix(string(data), "\n")
	if !ok || strings.Contains(line, "\n") {
		out.add(fmt.Sprintf("!! CopyData is not one row: %q", data))
		return 1
	}
	sep := "\t"
	if info.csv {
		sep = ","
	}
	vals := strings.Split(line, sep)
	text := line
	if !info.csv {
		text = strings.Join(quoteEmpty(vals), " ")
	}
	r.addRow(out, info, vals, text, info.stream != nil, true, drop)
	return 1
}

func quoteEmpty(vals []string) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		if v == "" {
			v = `""`
		}
		out[i] = v
	}
	return out
}

// addRow checks a subscribe row against the stream's invariants and
// buffers it for printing. vals[0] is mz_timestamp when isSub; vals[1] is
// mz_progressed when it reads t or f and progressCol says it may be.
func (r *runner) addRow(out *output, info stmtInfo, vals []string, text string, isSub, progressCol, drop bool) {
	key := ""
	if isSub && len(vals) > 0 {
		progress := progressCol && len(vals) > 1 && vals[1] == "t"
		key = vals[0]
		if progressCol && len(vals) > 1 && (vals[1] == "t" || vals[1] == "f") {
			key += "/" + vals[1]
		}
		if info.stream != nil {
			if v, err := strconv.ParseUint(vals[0], 10, 64); err == nil {
				if msg := info.stream.observe(v, progress); msg != "" {
					out.add("!! " + msg)
				}
			}
		}
	}
	if drop {
		return
	}
	out.rows = append(out.rows, rowLine{key: key, text: text})
}

// fieldText renders a value as text: NULL, "" for the empty string, and
// binary values decoded by type and re-encoded as Postgres text.
func (r *runner) fieldText(f *pgproto3.FieldDescription, v []byte) string {
	if v == nil {
		return "NULL"
	}
	if f == nil || f.Format == 0 {
		if len(v) == 0 {
			return `""`
		}
		return string(v)
	}
	t, ok := r.types.TypeForOID(f.DataTypeOID)
	if !ok {
		return fmt.Sprintf(`\x%x`, v)
	}
	val, err := t.Codec.DecodeValue(r.types, f.DataTypeOID, pgtype.BinaryFormatCode, v)
	if err != nil {
		return fmt.Sprintf("!!(binary %s: %v)", typeName(f.DataTypeOID), err)
	}
	txt, err := r.types.Encode(f.DataTypeOID, pgtype.TextFormatCode, val, nil)
	if err != nil {
		return fmt.Sprintf("!!(binary %s: %v)", typeName(f.DataTypeOID), err)
	}
	if len(txt) == 0 {
		return `""`
	}
	return string(txt)
}

func errorLine(e *pgproto3.ErrorResponse) string {
	s := fmt.Sprintf("error %s: %s", e.Code, e.Message)
	if e.Position > 0 {
		s += fmt.Sprintf(" (position %d)", e.Position)
	}
	return s
}

func extraLines(e *pgproto3.ErrorResponse) []string {
	var out []string
	if e.Detail != "" {
		out = append(out, "detail: "+e.Detail)
	}
	if e.Hint != "" {
		out = append(out, "hint: "+e.Hint)
	}
	return out
}

var typeNames = map[uint32]string{
	16: "bool", 17: "bytea", 20: "int8", 21: "int2", 23: "int4", 25: "text", 114: "json",
	700: "float4", 701: "float8", 1043: "varchar", 1082: "date", 1114: "timestamp",
	1184: "timestamptz", 1186: "interval", 1700: "numeric", 2950: "uuid", 3802: "jsonb",
}

func typeName(oid uint32) string {
	if n, ok := typeNames[oid]; ok {
		return n
	}
	return strconv.FormatUint(uint64(oid), 10)
}

// describeFields renders a RowDescription: name:type per column, with
// ":binary" for binary columns.
func describeFields(fs []pgproto3.FieldDescription) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = string(f.Name) + ":" + typeName(f.DataTypeOID)
		if f.Format == 1 {
			parts[i] += ":binary"
		}
	}
	return strings.Join(parts, " ")
}

// streamCheck checks the ordering invariants of one subscribe's rows,
// across the FETCHes of a cursor: timestamps never decrease, progress
// strictly advances, and no row is below a progress row already seen.
type streamCheck struct {
	last, progress uint64
	seen, progSeen bool
}

func (s *streamCheck) observe(ts uint64, progress bool) string {
	defer func() { s.last, s.seen = max(s.last, ts), true }()
	switch {
	case s.seen && ts < s.last:
		return fmt.Sprintf("timestamp went backwards: %d after %d", ts, s.last)
	case progress && s.progSeen && ts <= s.progress:
		return fmt.Sprintf("progress did not advance: %d after %d", ts, s.progress)
	case !progress && s.progSeen && ts < s.progress:
		return fmt.Sprintf("row at %d below the progress frontier %d", ts, s.progress)
	}
	if progress {
		s.progress, s.progSeen = ts, true
	}
	return ""
}

// output collects a case's printed lines. Rows are buffered and flushed
// by groups of equal timestamp (and mz_progressed), each group sorted
// unless the subscribe is ordered, so that the order Materialize leaves
// unspecified does not matter; timestamps are replaced by placeholders as
// lines are printed, in order.
type output struct {
	ts      *timestamps // nil: print timestamps as they are
	lines   []string
	rows    []rowLine
	ordered bool
	sortAll bool
	// unnamed prints timestamps that are not placeholders yet as <T?>.
	unnamed bool
}

type rowLine struct {
	key  string // "" for rows that are not subscribe rows
	text string
}

func (o *output) add(line string) {
	o.flush()
	o.emit(line)
}

func (o *output) emit(line string) {
	if o.ts == nil {
		o.lines = append(o.lines, line)
		return
	}
	if o.unnamed {
		o.lines = append(o.lines, o.ts.replaceKnown(line))
		return
	}
	s, err := o.ts.replace(line)
	o.lines = append(o.lines, s)
	if err != nil {
		o.lines = append(o.lines, "!! "+err.Error())
	}
}

func (o *output) flush() {
	rows := o.rows
	o.rows = nil
	switch {
	case o.sortAll:
		slices.SortStableFunc(rows, func(a, b rowLine) int { return strings.Compare(a.text, b.text) })
	case !o.ordered:
		for i := 0; i < len(rows); {
			j := i + 1
			for j < len(rows) && rows[i].key != "" && rows[j].key == rows[i].key {
				j++
			}
			slices.SortStableFunc(rows[i:j], func(a, b rowLine) int { return strings.Compare(a.text, b.text) })
			i = j
		}
	}
	for _, r := range rows {
		o.emit(r.text)
	}
}

func (o *output) String() string {
	o.flush()
	return strings.Join(o.lines, "\n")
}
