package bench

import (
	"context"
	"fmt"
	"io"
)

// Scenario (h), shapes (issue 14): subscribes to a filter over one
// collection, served on the fast path as shapes of the collection's
// shared tail.
//
//   - Storm: ShapesClients clients subscribe at once to
//     (SELECT * FROM mv WHERE id % 64 = i), 64 distinct shapes, and, in
//     the same run, the same number to mv itself: server CPU per client
//     of the two.
//   - Routed: each of ShapesUsers subscribers subscribes to
//     (SELECT * FROM shaped WHERE user_id = <own id>) while a writer
//     inserts ShapesRate rows/s spread over the users; then the same with
//     ShapesSmallUsers subscribers. Write-to-client latency, every row
//     delivered once, server CPU per written row, and the tail's shape
//     counters (rows evaluated, routed through the index).
//
// PostgreSQL has no equivalent of a subscribe and is not run.

// ScenarioShapes is (h).
const ScenarioShapes = "h"

// shapesModulus is the number of distinct shapes of (h)'s storm.
const shapesModulus = 64

// tableShaped is (h)'s routed table: (user_id, id, payload).
const tableShaped = "shaped"

// ShapeCounterNames are the fast path's shape counters recorded around
// (h)'s live runs.
var ShapeCounterNames = []string{
	"shardtail_tail_shape_evaluations_total",
	"shardtail_tail_shape_rows_evaluated_total",
	"shardtail_tail_shape_rows_routed_total",
	"shardtail_tail_shape_pushes_skipped_total",
}

// ShapesResult is (h) on one path.
type ShapesResult struct {
	// Bare and Shaped are the storms on mv and on its 64 shapes.
	Bare   *StormResult `json:"bare"`
	Shaped *StormResult `json:"shaped"`
	// Routed and RoutedSmall are the live runs with ShapesUsers and
	// ShapesSmallUsers subscribers.
	Routed      *ShapesLive `json:"routed,omitempty"`
	RoutedSmall *ShapesLive `json:"routed_small,omitempty"`
}

// ShapesLive is one live run of (h): Users subscribers, each of its own
// user_id, under a writer.
type ShapesLive struct {
	Users int         `json:"users"`
	Live  *LiveResult `json:"live"`
	// ServerCPU is the server's CPU seconds while the writer ran (and the
	// subscribers drained), not the subscribes before it.
	ServerCPU float64 `json:"server_cpu_seconds"`
	// Counters are ShapeCounterNames' increase over the same time.
	Counters map[string]float64 `json:"counters,omitempty"`
}

// CPUPerRowMS is the server's CPU per written row in ms, -1 unknown.
func (l *ShapesLive) CPUPerRowMS() float64 {
	if l == nil || l.Live == nil || l.Live.Written == 0 || l.ServerCPU < 0 {
		return -1
	}
	return l.ServerCPU * 1000 / float64(l.Live.Written)
}

// shapesRouted is one of (h)'s routed runs: users subscribers, its
// result stored into *into.
type shapesRouted struct {
	users int
	into  **ShapesLive
}

// routedRuns returns (h)'s routed runs on path, into res: ShapesUsers
// subscribers, then ShapesSmallUsers. As (i)'s idle streams, the dataflow
// path runs at most --dataflow-max-clients: each of its subscribes is a
// pipeline of its own, and 10,000 of them take the server over the
// bench's memory guard.
func (res *ShapesResult) routedRuns(cfg *SuiteConfig, path string) []shapesRouted {
	return []shapesRouted{
		{cfg.capClients(path, cfg.ShapesUsers), &res.Routed},
		{cfg.capClients(path, cfg.ShapesSmallUsers), &res.RoutedSmall},
	}
}

// runShapesRouted runs r on srv (holding tableShaped).
func runShapesRouted(ctx context.Context, cfg *SuiteConfig, srv *Server, path string, r shapesRouted, label func(string) string) error {
	l, err := runShapesLive(ctx, cfg, srv, r.users, label(fmt.Sprintf("(h) %d routed subscribers", r.users)))
	if err != nil {
		return err
	}
	*r.into = l
	cfg.Status.Logf("%s (h) %d routed subscribers, %d rows/s: p99 %.1f ms, delivered %.1f%%, %.3f ms CPU per row",
		path, r.users, cfg.ShapesRate, l.Live.Storm.Latency.P99, 100*l.Live.Delivered, l.CPUPerRowMS())
	return nil
}

// runShapesStorms runs (h)'s storms on srv (holding viewSmall) into res.
func runShapesStorms(ctx context.Context, cfg *SuiteConfig, srv *Server, res *ShapesResult, path string, label func(string) string) error {
	n := cfg.capClients(path, cfg.ShapesClients)
	storm := func(name string, relationFor func(i int) string) (*StormResult, error) {
		return Storm(ctx, StormConfig{
			URL: srv.URL, Clients: n, Mode: cfg.StormMode, Relation: relationFor(-1), RelationFor: relationFor,
			Timeout: cfg.Timeout, Server: srv.CPU(), MaxServerRSS: cfg.MaxServerRSS,
			Status: cfg.Status, Label: label(fmt.Sprintf("(h) %s storm N=%d", name, n)),
		})
	}
	var err error
	if res.Bare, err = storm("bare", func(int) string { return viewSmall }); err != nil {
		return err
	}
	if res.Shaped, err = storm("shaped", func(i int) string {
		if i < 0 {
			return fmt.Sprintf("(SELECT * FROM %s WHERE id %% %d = i)", viewSmall, shapesModulus)
		}
		return fmt.Sprintf("(SELECT * FROM %s WHERE id %% %d = %d)", viewSmall, shapesModulus, i%shapesModulus)
	}); err != nil {
		return err
	}
	cfg.Status.Logf("%s (h) storm N=%d: bare %s; shaped %s", path, n, stormLine(res.Bare), stormLine(res.Shaped))
	return nil
}

// runShapesLive runs users subscribers of tableShaped, each of its own
// user_id, while a writer inserts cfg.ShapesRate rows/s round robin over
// the users. Every row must reach exactly its user's subscriber:
// Delivered is rows received over rows written.
func runShapesLive(ctx context.Context, cfg *SuiteConfig, srv *Server, users int, label string) (*ShapesLive, error) {
	if err := execSQL(ctx, srv.URL, "DELETE FROM "+tableShaped); err != nil {
		return nil, err
	}
	res := &ShapesLive{Users: users, ServerCPU: -1}
	lr := &LiveResult{Rate: cfg.ShapesRate, PayloadBytes: cfg.PayloadBytes}
	var lats []float64
	writer := func(ctx context.Context) error {
		probe := srv.CPU()
		before, cpuErr := probe.Read(ctx)
		delta := counterDeltaOf(ctx, srv.MetricsURL, ShapeCounterNames)
		err := writeLive(ctx, srv.URL, tableShaped, cfg.LiveDuration, lr, &lats, func(sql []byte, id int64) []byte {
			return fmt.Appendf(sql, "%d,%d,", id%int64(users), id)
		})
		if after, err := probe.Read(ctx); err == nil && cpuErr == nil {
			res.ServerCPU = after - before
		}
		res.Counters = delta()
		return err
	}
	r, err := Storm(ctx, StormConfig{
		URL: srv.URL, Clients: users, Mode: ModeCopy, Relation: tableShaped + " WHERE user_id = i",
		RelationFor: func(i int) string {
			return fmt.Sprintf("(SELECT * FROM %s WHERE user_id = %d)", tableShaped, i)
		},
		// Output columns: mz_timestamp, mz_progressed, mz_diff, user_id,
		// id, payload.
		LatencyColumn: 5, Live: writer, Server: srv.CPU(), MaxServerRSS: cfg.MaxServerRSS, Timeout: cfg.Timeout,
		Status: cfg.Status, Label: label,
	})
	if r == nil {
		return nil, err
	}
	if err != nil && lr.WriterError == "" {
		lr.WriterError = err.Error()
	}
	lr.Storm, lr.WriteLatency = r, NewDist(lats)
	if lr.Written > 0 {
		lr.Delivered = float64(r.LiveRows) / float64(lr.Written)
	}
	res.Live = lr
	return res, nil
}

// writeShapesSection writes (h) when it ran.
func writeShapesSection(w io.Writer, v *reportView) {
	type path struct {
		name string
		res  *ShapesResult
	}
	var paths []path
	for _, p := range []*PathResults{v.fast, v.flow} {
		if p != nil && p.Shapes != nil {
			paths = append(paths, path{p.Path, p.Shapes})
		}
	}
	if len(paths) == 0 {
		return
	}
	cfg := v.r.Config
	fmt.Fprintf(w, "## (h) Shapes: filtered subscribes on the shared path\n\n")
	fmt.Fprintf(w, "Storm: %s clients subscribe at once to `(SELECT * FROM %s WHERE id %% %d = i)` (%d distinct shapes), "+
		"and in the same run as many to `%s` itself. Routed: each subscriber subscribes to `(SELECT * FROM %s WHERE user_id = <its id>)` "+
		"while a writer inserts %d rows/s spread over the users for %s; CPU per row is the server's while the writer ran.\n\n",
		commas(cfg.ShapesClients), viewSmall, shapesModulus, shapesModulus, viewSmall, tableShaped, cfg.ShapesRate, cfg.LiveDuration)
	fmt.Fprintf(w, "| path | bare storm CPU/client | shaped storm CPU/client | shaped ÷ bare | shaped storm errors |\n|---|---|---|---|---|\n")
	for _, p := range paths {
		bare, shaped := p.res.Bare.ServerCPUPerClientMS(), p.res.Shaped.ServerCPUPerClientMS()
		ratio := "—"
		if bare > 0 && shaped >= 0 {
			ratio = fmt.Sprintf("%.2f", shaped/bare)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d |\n", p.name, fmtOr(ms, bare), fmtOr(ms, shaped), ratio, p.res.Shaped.Errors)
	}
	fmt.Fprintf(w, "\n| path | subscribers | rows written | delivered | p50 | p99 | CPU per row | rows evaluated per row | routed per row |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range paths {
		for _, l := range []*ShapesLive{p.res.Routed, p.res.RoutedSmall} {
			if l == nil || l.Live == nil {
				continue
			}
			perRow := func(name string) string {
				v, ok := l.Counters[name]
				// The dataflow path has no shapes: its counters stay 0.
				if !ok || l.Live.Written == 0 || p.name != PathFast {
					return "—"
				}
				return fmt.Sprintf("%.2f", v/float64(l.Live.Written))
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p.name, commas(l.Users), commas(int(l.Live.Written)),
				pct(100*l.Live.Delivered), msRaw(l.Live.Storm.Latency.P50), msRaw(l.Live.Storm.Latency.P99), fmtOr(ms, l.CPUPerRowMS()),
				perRow("shardtail_tail_shape_rows_evaluated_total"), perRow("shardtail_tail_shape_rows_routed_total"))
		}
	}
	fmt.Fprintln(w)
	for _, p := range paths {
		if l := p.res.Routed; l != nil && l.Users < cfg.ShapesUsers {
			fmt.Fprintf(w, "The %s path ran %s routed subscribers, not %s: each is a pipeline of its own, so it stops where (a)'s storms do "+
				"(`--dataflow-max-clients`).\n\n", p.name, commas(l.Users), commas(cfg.ShapesUsers))
		}
	}
}
