package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Targets of (f): the process a storm's clients connect to.
const (
	TargetTail = "tail"     // the tail process (`serve --upstream`)
	TargetAll  = "role all" // its upstream, directly
)

// TailResults is (f): the storm of (a) through a tail process, next to the
// same storm on its upstream (role all) directly, both processes on the
// same shared storage in the same run.
type TailResults struct {
	// StorageKind is StorageS3 or StorageFile; Storage describes it.
	StorageKind string `json:"storage_kind"`
	Storage     string `json:"storage"`
	// Rows of PayloadBytes make the view.
	Rows         int `json:"rows"`
	PayloadBytes int `json:"payload_bytes"`
	// Load times the set-up, done through the tail's proxy port.
	Load map[string]float64 `json:"load_seconds,omitempty"`
	// Storms in the order they ran.
	Storms []*TailStorm `json:"storms,omitempty"`
	// Problems are failures observed: a process that exited, a set-up
	// step that failed.
	Problems []string `json:"problems,omitempty"`
	// Run is set when (f) was measured in a run of its own and merged into
	// an earlier report (MergeTail).
	Run *RunInfo `json:"run,omitempty"`
}

func (t *TailResults) problem(format string, args ...any) {
	t.Problems = append(t.Problems, fmt.Sprintf(format, args...))
}

// TailStorm is one storm of (f).
type TailStorm struct {
	// Via is TargetTail or TargetAll; Path is PathFast or PathDataflow.
	Via   string       `json:"via"`
	Path  string       `json:"path"`
	Storm *StormResult `json:"storm"`
	// TailCPU, UpstreamCPU and ConsensusCPU are the CPU seconds of the
	// tail process, of role all and of the consensus server (PostgreSQL,
	// backends included) from before the first connect to after the last
	// close; -1: not measured (StorageFile has no consensus server).
	TailCPU      float64 `json:"tail_cpu_seconds"`
	UpstreamCPU  float64 `json:"upstream_cpu_seconds"`
	ConsensusCPU float64 `json:"consensus_cpu_seconds"`
	// TailCounters and UpstreamCounters are the increase of
	// StormCounterNames on each process: which one did the work.
	TailCounters     map[string]float64 `json:"tail_counters,omitempty"`
	UpstreamCounters map[string]float64 `json:"upstream_counters,omitempty"`
}

// PerClientMS is cpu seconds per connected client of the storm, in ms.
func (t *TailStorm) PerClientMS(cpu float64) float64 {
	if cpu < 0 || t.Storm == nil || t.Storm.Connected == 0 {
		return -1
	}
	return cpu * 1000 / float64(t.Storm.Connected)
}

// RunInfo is when and how a report section merged from another run was
// measured.
type RunInfo struct {
	Started   time.Time `json:"started"`
	Seconds   float64   `json:"seconds"`
	Command   string    `json:"command"`
	LoadStart string    `json:"load_start"`
	LoadEnd   string    `json:"load_end"`
	Shardtail string    `json:"shardtail"`
	Commit    string    `json:"commit,omitempty"`
}

// tailDeployment is (f)'s processes: role all and one tail process in
// front of it, on shared storage.
type tailDeployment struct {
	storage  *SharedStorage
	upstream *Server
	tail     *Server
}

// runProxyScenario runs (f). It returns what it measured so far with the
// error that stopped it.
func runProxyScenario(ctx context.Context, cfg *SuiteConfig) (*TailResults, error) {
	tr := &TailResults{Rows: cfg.SmallRows, PayloadBytes: cfg.PayloadBytes, Load: map[string]float64{}}
	st := cfg.Status
	st.Set("(f): starting shared storage", nil)
	storage, err := StartSharedStorage(ctx, cfg.TailStorage)
	if errors.Is(err, ErrNoPostgres) {
		tr.problem("%s storage needs PostgreSQL for consensus (%v); used %s storage instead", cfg.TailStorage, err, StorageFile)
		storage, err = StartSharedStorage(ctx, StorageFile)
	}
	if err != nil {
		return tr, fmt.Errorf("shared storage: %w", err)
	}
	defer func() {
		if err := storage.Close(); err != nil {
			tr.problem("stop shared storage: %v", err)
		}
	}()
	tr.StorageKind, tr.Storage = storage.Kind, storage.Describe()
	d := &tailDeployment{storage: storage}

	st.Set("(f): starting role all", nil)
	d.upstream, err = StartServer(ctx, cfg.ServerBin, ServerOptions{FastPath: true, Blob: storage.Blob, Consensus: storage.Consensus})
	if err != nil {
		return tr, fmt.Errorf("role all: %w", err)
	}
	defer stopServer(d.upstream, TargetAll, tr)
	st.Set("(f): starting the tail process", nil)
	d.tail, err = StartServer(ctx, cfg.ServerBin, ServerOptions{FastPath: true, Blob: storage.Blob, Consensus: storage.Consensus, Upstream: d.upstream.Addr})
	if err != nil {
		return tr, fmt.Errorf("tail process: %w", err)
	}
	defer stopServer(d.tail, TargetTail, tr)

	// DDL and the COPY go through the tail's proxy port to role all; the
	// tail then serves the view from the shared storage. Both must see
	// every row before the storms. Role all first: a tail process's first
	// subscribe to a view that has no complete time yet (upper 0) can
	// wait forever on a consensus without a cross-process doorbell
	// (SQLite), since it re-reads consensus only at the 1 s poll interval
	// but gives up each wait after 100 ms (adapter latestTime).
	if err := loadDataSet(ctx, cfg, d.tail.URL, viewSmall, "(f) through the tail", tr.Load, d.upstream.URL, d.tail.URL); err != nil {
		return tr, fmt.Errorf("load %s through the tail: %w", viewSmall, err)
	}

	type run struct {
		n         int
		via, path string
	}
	var runs []run
	for _, n := range cfg.TailClients {
		runs = append(runs, run{n, TargetAll, PathFast}, run{n, TargetTail, PathFast})
	}
	if n := cfg.TailDataflowClients; n > 0 {
		runs = append(runs, run{n, TargetAll, PathDataflow}, run{n, TargetTail, PathDataflow})
	}
	for _, r := range runs {
		label := fmt.Sprintf("(f) %s path via %s, N=%d", r.path, r.via, r.n)
		quiesce(ctx, d.upstream.CPU(), st, "(f): waiting for role all to idle")
		quiesce(ctx, d.tail.CPU(), st, "(f): waiting for the tail process to idle")
		ts, err := d.storm(ctx, cfg, r.n, r.via, r.path, label)
		if err != nil {
			return tr, fmt.Errorf("%s: %w", label, err)
		}
		tr.Storms = append(tr.Storms, ts)
		s := ts.Storm
		if s.Aborted != "" {
			tr.problem("%s: %s (peak %s)", label, s.Aborted, mib(float64(s.ServerPeakRSS)))
		}
		st.Logf("%s: %s; CPU per client: tail %s, role all %s", label, stormLine(s),
			fmtOr(ms, ts.PerClientMS(ts.TailCPU)), fmtOr(ms, ts.PerClientMS(ts.UpstreamCPU)))
		if err := d.check(ctx); err != nil {
			return tr, fmt.Errorf("after %s: %w", label, err)
		}
	}
	return tr, nil
}

// storm runs one storm of (f) against via, on the path given: the
// dataflow path sets enable_subscribe_persist_fast_path off on each
// connection, which a tail process applies both to itself and to the
// client's upstream session, so the tail proxies the SUBSCRIBE and role
// all runs its dataflow.
func (d *tailDeployment) storm(ctx context.Context, cfg *SuiteConfig, n int, via, path, label string) (*TailStorm, error) {
	target, other := d.tail, d.upstream
	if via == TargetAll {
		target, other = d.upstream, d.tail
	}
	fastPath := "" // the servers' default: on
	if path == PathDataflow {
		fastPath = "off"
	}
	cpu := cpuSince(ctx, d.tail.CPU(), d.upstream.CPU(), d.storage.ConsensusCPU())
	tailCounters, upCounters := counterDelta(ctx, d.tail.MetricsURL), counterDelta(ctx, d.upstream.MetricsURL)
	r, err := Storm(ctx, StormConfig{
		URL: target.URL, Clients: n, Mode: cfg.StormMode, Relation: viewSmall, FastPath: fastPath,
		Timeout: cfg.Timeout, ExpectRows: cfg.SmallRows, Server: target.CPU(),
		MaxServerRSS: cfg.MaxServerRSS, GuardPIDs: []int{other.PID},
		Status: cfg.Status, Label: label,
	})
	if err != nil {
		return nil, err
	}
	c := cpu()
	return &TailStorm{
		Via: via, Path: path, Storm: r,
		TailCPU: c[0], UpstreamCPU: c[1], ConsensusCPU: c[2],
		TailCounters: tailCounters(), UpstreamCounters: upCounters(),
	}, nil
}

// check reports a process of the deployment that has exited or stopped
// answering.
func (d *tailDeployment) check(ctx context.Context) error {
	for _, p := range []struct {
		name string
		srv  *Server
	}{{TargetAll, d.upstream}, {TargetTail, d.tail}} {
		if dead, err := p.srv.Exited(); dead {
			return fmt.Errorf("%s (pid %d) exited: %s; last log lines:\n%s", p.name, p.srv.PID, exitText(err, p.srv), p.srv.LogTail(10))
		}
		if err := p.srv.Healthy(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("%s (pid %d) stopped answering (%v); last log lines:\n%s", p.name, p.srv.PID, err, p.srv.LogTail(10))
		}
	}
	return nil
}

// stopServer stops one of (f)'s processes, noting a failure.
func stopServer(s *Server, name string, tr *TailResults) {
	if err := s.Stop(); err != nil {
		tr.problem("stop %s: %v", name, err)
	}
}
