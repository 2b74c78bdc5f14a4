package conformance

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

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
