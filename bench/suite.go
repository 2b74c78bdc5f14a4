package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Paths of the report: shardtail's two SUBSCRIBE paths and the peer.
const (
	PathFast     = "fast"
	PathDataflow = "dataflow"
	PathPostgres = "postgres"
)

// Scenarios, by letter, as in the report.
const (
	ScenarioStorm  = "a" // storms at each N on the small materialized view
	ScenarioBig    = "b" // one client on the large materialized view
	ScenarioLive   = "c" // live fan-out latency
	ScenarioSlow   = "d" // slow-client isolation
	ScenarioMemory = "e" // RSS per idle subscriber
	ScenarioTail   = "f" // the storm through a tail process
	ScenarioFeed   = "i" // the HTTP change feed's storms and idle streams
)

// scenarioLetters are every scenario. (i) runs on each path after (h),
// before (f).
const scenarioLetters = "abcdefghi"

// SuiteConfig configures `shardtail bench`. Zero fields take the full
// run's defaults (or the quick run's, with Quick).
type SuiteConfig struct {
	// ServerBin is the shardtail binary to run as `serve`.
	ServerBin string
	// Quick runs a small version for smoke checks.
	Quick bool
	// Scenarios to run, letters a-i; empty: all. ParseScenarios reads
	// names too.
	Scenarios string
	// Postgres runs the peer when its binaries are installed.
	Postgres bool

	// Clients are the storm sizes of (a).
	Clients []int
	// StormMode is how storm clients subscribe.
	StormMode Mode
	// SmallRows rows of PayloadBytes make the storms' view; BigRows the
	// large one of (b).
	SmallRows, BigRows, PayloadBytes int
	// Runs is how many times each measurement of (a) and (c)-(e) runs;
	// the report shows the median of each figure with its min–max.
	Runs int
	// Repeat is how many times each single-client read of (b) runs; the
	// report shows the median and min–max.
	Repeat int
	// Clients over DataflowMaxClients are not run on the dataflow path,
	// in (a) and (c), and storms over PostgresMaxClients not on
	// PostgreSQL (0: no limit): a dataflow subscribe costs some 20 ms of
	// CPU, so its storm of 10,000 would take minutes, and PostgreSQL's
	// backend process per connection would not fit the machine.
	DataflowMaxClients, PostgresMaxClients int
	// LiveSizes are (c)'s runs: each its Clients subscribers while a
	// writer inserts Rate rows/s for FanoutDuration.
	LiveSizes      []LiveSize
	FanoutDuration time.Duration
	// LiveClients and LiveRate were (c)'s one size, in reports from
	// before LiveSizes (liveSizes reads them).
	LiveClients, LiveRate int
	// LiveDuration is how long the writers of (d) and (h) run (and (c)'s
	// in reports from before FanoutDuration).
	LiveDuration time.Duration
	// SlowClients subscribe, SlowStalled of them stop reading, while a
	// writer inserts SlowRate rows/s of SlowPayloadBytes (d).
	SlowClients, SlowStalled, SlowRate, SlowPayloadBytes int
	// SlowBudgetBytes is the stalled clients' subscribe_max_buffered_bytes
	// in (d): small, so that they are really detached (fast path) or cut
	// off (dataflow path). What the writer writes in the run must also be
	// well over what the kernel buffers on a loopback connection (its
	// 64 KiB segments let the server's send buffer grow to some MiB).
	SlowBudgetBytes int
	// IdleClients hold idle subscriptions for the memory probe (e).
	IdleClients int
	// TailClients are the storm sizes of (f), each run on role all and
	// through a tail process; TailDataflowClients the size of its
	// dataflow-path storms (0: none).
	TailClients         []int
	TailDataflowClients int
	// TailStorage is what (f)'s processes share: StorageS3 or
	// StorageFile.
	TailStorage string
	// BudgetReaders and BudgetStalled fast-path subscribers spread over
	// BudgetCollections tables while BudgetWriteBytes are written, on a
	// server with --memory-budget BudgetBytes (g).
	BudgetReaders, BudgetStalled, BudgetCollections int
	BudgetWriteBytes, BudgetBytes                   int64
	// BudgetRetainHistory is (g)'s tables' RETAIN HISTORY ("": the
	// server's default), see BudgetConfig.RetainHistory.
	BudgetRetainHistory string
	// ShapesClients is the size of (h)'s storms; ShapesUsers and
	// ShapesSmallUsers the subscribers of its two live runs, under a
	// writer of ShapesRate rows/s for LiveDuration.
	ShapesClients, ShapesUsers, ShapesSmallUsers, ShapesRate int
	// FeedClients are the size of (i)'s storms, after FeedChanges rows
	// of the storms' view were updated; FeedIdleClients the idle SSE
	// streams of its memory probe.
	FeedClients, FeedChanges, FeedIdleClients int
	// Timeout bounds each client (connect; statement to snapshot).
	Timeout time.Duration
	// MaxServerRSS aborts a storm whose server grows past it (a shared
	// machine must keep its memory); 0: no limit.
	MaxServerRSS int64

	// Status shows progress; may be nil.
	Status *Status `json:"-"`
}

// DefaultSlowBudgetBytes is (d)'s stalled clients' queue budget: the
// server's default, 128 MiB, is more than a stalled client of the full run
// is ever behind, so it was never detached.
const DefaultSlowBudgetBytes = 64 << 10

// SlowCounterNames are the fast path's counters recorded around each run
// of (d): the stalled clients' detaches and resumes.
var SlowCounterNames = []string{
	"shardtail_tail_detaches_total",
	"shardtail_tail_resumes_total",
	"shardtail_tail_private_catchups_total",
	"shardtail_tail_history_loss_errors_total",
}

// Defaults of SuiteConfig.DataflowMaxClients and PostgresMaxClients: the
// largest N the last reports ran on both.
const (
	DefaultDataflowMaxClients = 2048
	DefaultPostgresMaxClients = 2048
)

// LiveSize is one run of (c): Clients subscribers under a writer of Rate
// rows/s.
type LiveSize struct {
	Clients int `json:"clients"`
	Rate    int `json:"rate"`
}

// ParseLiveSizes parses --live: comma-separated CLIENTSxRATE pairs, e.g.
// "10000x100,1000x1000".
func ParseLiveSizes(s string) ([]LiveSize, error) {
	var out []LiveSize
	for _, f := range strings.Split(s, ",") {
		c, r, ok := strings.Cut(strings.TrimSpace(f), "x")
		var ls LiveSize
		if ok {
			var err1, err2 error
			ls.Clients, err1 = strconv.Atoi(c)
			ls.Rate, err2 = strconv.Atoi(r)
			ok = err1 == nil && err2 == nil && ls.Clients > 0 && ls.Rate > 0
		}
		if !ok {
			return nil, fmt.Errorf("%w: live size %q (want CLIENTSxRATE, e.g. 10000x100)", ErrConfig, f)
		}
		out = append(out, ls)
	}
	return out, nil
}

// liveSizes are (c)'s sizes: LiveSizes, or the one of a report from before
// them.
func (c *SuiteConfig) liveSizes() []LiveSize {
	if len(c.LiveSizes) > 0 || c.LiveClients == 0 {
		return c.LiveSizes
	}
	return []LiveSize{{Clients: c.LiveClients, Rate: c.LiveRate}}
}

// fanoutDuration is how long (c)'s writer runs: FanoutDuration, or
// LiveDuration in a report from before it.
func (c *SuiteConfig) fanoutDuration() time.Duration {
	if c.FanoutDuration > 0 {
		return c.FanoutDuration
	}
	return c.LiveDuration
}

// onPath reports whether a storm or live run of n clients runs on the
// given path (PathFast, PathDataflow, PathPostgres).
func (c *SuiteConfig) onPath(path string, n int) bool {
	switch path {
	case PathDataflow:
		return c.DataflowMaxClients <= 0 || n <= c.DataflowMaxClients
	case PathPostgres:
		return c.PostgresMaxClients <= 0 || n <= c.PostgresMaxClients
	}
	return true
}

// capClients is n, or the largest number of clients the path runs if
// that is less (see onPath): for scenarios that run a smaller size rather
// than none.
func (c *SuiteConfig) capClients(path string, n int) int {
	if c.onPath(path, n) {
		return n
	}
	switch path {
	case PathDataflow:
		return c.DataflowMaxClients
	case PathPostgres:
		return c.PostgresMaxClients
	}
	return n
}

// DefaultMaxServerRSS is the suite's memory guard: 10 GiB of a 24 GiB
// machine that others share.
const DefaultMaxServerRSS = 10 << 30

// DefaultSuite returns the full run's configuration, or the quick one.
func DefaultSuite(quick bool) SuiteConfig {
	if quick {
		return SuiteConfig{
			Quick: true, Postgres: true, StormMode: ModeCopy,
			Clients:   []int{64},
			SmallRows: 10_000, BigRows: 100_000, PayloadBytes: 64, Repeat: DefaultQuickRuns, Runs: DefaultQuickRuns,
			LiveSizes: []LiveSize{{Clients: 32, Rate: 50}}, FanoutDuration: 3 * time.Second, LiveDuration: 3 * time.Second,
			SlowClients: 20, SlowStalled: 2, SlowRate: 1000, SlowPayloadBytes: 2048, SlowBudgetBytes: DefaultSlowBudgetBytes,
			IdleClients: 200,
			FeedClients: 64, FeedChanges: 1000, FeedIdleClients: 200,
			TailClients: []int{64}, TailDataflowClients: 32, TailStorage: StorageS3,
			BudgetReaders: 64, BudgetStalled: 32, BudgetCollections: 8, BudgetWriteBytes: 64 << 20, BudgetBytes: 32 << 20,
			ShapesClients: 64, ShapesUsers: 200, ShapesSmallUsers: 20, ShapesRate: 100,
			Timeout: time.Minute, MaxServerRSS: DefaultMaxServerRSS,
		}
	}
	return SuiteConfig{
		Postgres: true, StormMode: ModeCopy,
		Clients:   []int{256, 1024, 2048, 4096, 10_000},
		SmallRows: 10_000, BigRows: 1_000_000, PayloadBytes: 64, Repeat: DefaultRuns, Runs: DefaultRuns,
		DataflowMaxClients: DefaultDataflowMaxClients, PostgresMaxClients: DefaultPostgresMaxClients,
		LiveSizes:      []LiveSize{{Clients: 10_000, Rate: 100}, {Clients: 1000, Rate: 1000}},
		FanoutDuration: 30 * time.Second, LiveDuration: 15 * time.Second,
		SlowClients: 256, SlowStalled: 26, SlowRate: 200, SlowPayloadBytes: 2048, SlowBudgetBytes: DefaultSlowBudgetBytes,
		IdleClients: 10_000,
		FeedClients: 2048, FeedChanges: 1000, FeedIdleClients: 10_000,
		TailClients: []int{256, 1024, 2048}, TailDataflowClients: 256, TailStorage: StorageS3,
		BudgetReaders: 1000, BudgetStalled: 500, BudgetCollections: 8, BudgetWriteBytes: 2e9, BudgetBytes: 256 << 20,
		ShapesClients: 2048, ShapesUsers: 10_000, ShapesSmallUsers: 100, ShapesRate: 1000,
		Timeout: 3 * time.Minute, MaxServerRSS: DefaultMaxServerRSS,
	}
}

// Validate reports the first invalid field.
func (c *SuiteConfig) Validate() error {
	switch {
	case c.ServerBin == "":
		return fmt.Errorf("%w: ServerBin is empty", ErrConfig)
	case len(c.Clients) == 0 || slices.Min(c.Clients) < 1:
		return fmt.Errorf("%w: Clients must be positive", ErrConfig)
	case c.SmallRows < 1 || c.BigRows < 1 || c.PayloadBytes < 24:
		return fmt.Errorf("%w: SmallRows and BigRows must be positive, PayloadBytes at least 24", ErrConfig)
	case c.Runs < 1 || c.Repeat < 1:
		return fmt.Errorf("%w: Runs and Repeat must be at least 1", ErrConfig)
	case c.SlowStalled > c.SlowClients:
		return fmt.Errorf("%w: SlowStalled %d over SlowClients %d", ErrConfig, c.SlowStalled, c.SlowClients)
	case c.SlowRate < 1 || c.LiveDuration <= 0 || c.FanoutDuration < 0:
		return fmt.Errorf("%w: SlowRate and LiveDuration must be positive, FanoutDuration not negative", ErrConfig)
	case c.runs(ScenarioLive) && len(c.liveSizes()) == 0:
		return fmt.Errorf("%w: (c) needs a live size", ErrConfig)
	}
	for _, ls := range c.LiveSizes {
		if ls.Clients < 1 || ls.Rate < 1 {
			return fmt.Errorf("%w: live size %dx%d: clients and rate must be positive", ErrConfig, ls.Clients, ls.Rate)
		}
	}
	for _, r := range c.Scenarios {
		if !strings.ContainsRune(scenarioLetters, r) {
			return fmt.Errorf("%w: scenario %q (want letters a-i)", ErrConfig, r)
		}
	}
	if c.runs(ScenarioShapes) && (c.ShapesClients < 1 || c.ShapesUsers < 1 || c.ShapesSmallUsers < 1 || c.ShapesRate < 1) {
		return fmt.Errorf("%w: ShapesClients, ShapesUsers, ShapesSmallUsers and ShapesRate must be positive", ErrConfig)
	}
	if c.runs(ScenarioFeed) && (c.FeedClients < 1 || c.FeedChanges < 1 || c.FeedChanges > c.SmallRows || c.FeedIdleClients < 0) {
		return fmt.Errorf("%w: FeedClients and FeedChanges must be positive, FeedChanges at most SmallRows, FeedIdleClients not negative", ErrConfig)
	}
	if c.runs(ScenarioTail) {
		switch {
		case len(c.TailClients) == 0 || slices.Min(c.TailClients) < 1:
			return fmt.Errorf("%w: TailClients must be positive", ErrConfig)
		case c.TailDataflowClients < 0:
			return fmt.Errorf("%w: TailDataflowClients must not be negative", ErrConfig)
		case c.TailStorage != StorageS3 && c.TailStorage != StorageFile:
			return fmt.Errorf("%w: TailStorage %q (want %s or %s)", ErrConfig, c.TailStorage, StorageS3, StorageFile)
		}
	}
	if c.runs(ScenarioBudget) {
		switch {
		case c.BudgetCollections < 1 || c.BudgetReaders < 1 || c.BudgetStalled < 0 || c.BudgetWriteBytes <= 0:
			return fmt.Errorf("%w: (g) needs collections, readers and bytes to write", ErrConfig)
		case c.BudgetBytes <= 0:
			return fmt.Errorf("%w: (g) needs a memory budget", ErrConfig)
		}
	}
	return nil
}

// ParseScenarios reads --scenarios: letters a-i, or comma-separated
// letters and names ("budget" is g, "feed" i).
func ParseScenarios(s string) (string, error) {
	var out strings.Builder
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if l, ok := scenarioNames[f]; ok {
			f = l
		}
		for _, r := range f {
			if !strings.ContainsRune(scenarioLetters, r) {
				return "", fmt.Errorf("%w: scenario %q (want letters a-i, budget, shapes or feed)", ErrConfig, f)
			}
		}
		out.WriteString(f)
	}
	return out.String(), nil
}

func (c *SuiteConfig) runs(s string) bool {
	return c.Scenarios == "" || strings.Contains(c.Scenarios, s)
}

// Results is everything one `shardtail bench` measured: (a)-(e) by path,
// and (f).
type Results struct {
	Paths  map[string]*PathResults `json:"paths"`
	Tail   *TailResults            `json:"tail,omitempty"`
	Budget *BudgetScenario         `json:"budget,omitempty"`
	// Floor is (c)'s floor on this machine (with (c) only).
	Floor *Floor `json:"floor,omitempty"`
}

// PathResults is one path's measurements. Nil fields were not run.
type PathResults struct {
	Path string `json:"path"`
	// Version is the peer's version (PostgreSQL).
	Version string `json:"version,omitempty"`
	// Load times the data set-up: COPY into the tables and the views
	// catching up.
	Load map[string]float64 `json:"load_seconds,omitempty"`
	// Storms (a), one per N: the run of median storm time.
	Storms []*StormResult `json:"storms,omitempty"`
	// StormRuns are every run of (a), by N.
	StormRuns map[int][]*StormResult `json:"storm_runs,omitempty"`
	// StormCounters are the server's counters' increase during each storm
	// of (a), by N (shardtail only): how much work was shared.
	StormCounters map[int]map[string]float64 `json:"storm_counters,omitempty"`
	// Big (b).
	Big *BigResult `json:"big,omitempty"`
	// Live (c): fan-out under a steady writer (the run of median p99;
	// LiveRuns has every run).
	Live     *LiveResult   `json:"live,omitempty"`
	LiveRuns []*LiveResult `json:"live_runs,omitempty"`
	// SlowBaseline and Slow (d): the same run without and with stalled
	// clients (the runs of median p99; the *Runs fields have every run).
	SlowBaseline     *LiveResult   `json:"slow_baseline,omitempty"`
	Slow             *LiveResult   `json:"slow,omitempty"`
	SlowBaselineRuns []*LiveResult `json:"slow_baseline_runs,omitempty"`
	SlowRuns         []*LiveResult `json:"slow_runs,omitempty"`
	// Memory (e): the run of median RSS per subscriber; MemoryRuns has
	// every run.
	Memory     *MemoryResult   `json:"memory,omitempty"`
	MemoryRuns []*MemoryResult `json:"memory_runs,omitempty"`
	// Shapes (h).
	Shapes *ShapesResult `json:"shapes,omitempty"`
	// Feed (i): the HTTP change feed next to pgwire.
	Feed *FeedResult `json:"feed,omitempty"`
	// Problems are failures observed on this path: scenario errors, a
	// server that exited.
	Problems []string `json:"problems,omitempty"`
	// Replaced lists the measurements after which the server was replaced
	// because it held more than half of the memory guard.
	Replaced []string `json:"replaced,omitempty"`
}

func (p *PathResults) problem(format string, args ...any) {
	p.Problems = append(p.Problems, fmt.Sprintf(format, args...))
}

// BigResult is (b): one client reading a large collection. Seconds are the
// median of Repeat runs.
type BigResult struct {
	Rows int `json:"rows"`
	// Fetch10 is sending BEGIN; DECLARE; FETCH 10 on a new cursor until
	// ten rows are in; Fetch10Rows is what the first FETCH returned.
	Fetch10     float64 `json:"fetch10_seconds"`
	Fetch10Rows int     `json:"fetch10_first_fetch_rows"`
	// Spread is each figure's [min, max] over the runs, by its JSON name.
	Spread map[string][2]float64 `json:"spread,omitempty"`
	// CopyFirstRow, CopyLastRow: statement to the first and the last
	// snapshot row over COPY; CopyComplete to the progress row that
	// completes the snapshot (for PostgreSQL, the end of the COPY).
	CopyFirstRow float64 `json:"copy_first_row_seconds"`
	CopyLastRow  float64 `json:"copy_last_row_seconds"`
	CopyComplete float64 `json:"copy_complete_seconds"`
	// ServerCPU is one COPY read's server CPU (median).
	ServerCPU float64  `json:"server_cpu_seconds"`
	Errors    []string `json:"errors,omitempty"`
}

// LiveResult is (c) or (d): subscribers under a steady writer.
type LiveResult struct {
	Storm *StormResult `json:"storm"`
	// Rate is the writer's target rows/s; Written what it wrote; Writes
	// the INSERT statements and their latency (ms).
	Rate         int     `json:"rate"`
	PayloadBytes int     `json:"payload_bytes"`
	Written      int64   `json:"written"`
	WriteLatency Dist    `json:"insert_latency_ms"`
	WriteErrors  int     `json:"write_errors"`
	WriterError  string  `json:"writer_error,omitempty"`
	Delivered    float64 `json:"delivered_fraction"`
	// WriteSeconds is how long the writer wrote (its drain not counted).
	WriteSeconds float64 `json:"write_seconds,omitempty"`
	// While the writer ran (its drain included): the server's CPU
	// seconds, this process's (the subscribers' and the writer's), and
	// the server's write system calls (-1: not measured). Reports from
	// before them have zeros.
	WriteServerCPU float64 `json:"write_server_cpu_seconds,omitempty"`
	WriteClientCPU float64 `json:"write_client_cpu_seconds,omitempty"`
	WriteSyscalls  int64   `json:"server_write_syscalls,omitempty"`
	// Counters are SlowCounterNames' increase over the run (d).
	Counters map[string]float64 `json:"counters,omitempty"`
}

// MemoryResult is (e): server RSS before and with IdleClients idle
// subscribers. A storm cut short by the memory guard never had them idle:
// it has PeakRSS, the peak during the subscribe storm, and no RSSIdle or
// PerClientKB (-1).
type MemoryResult struct {
	Storm     *StormResult `json:"storm"`
	RSSBefore int64        `json:"rss_before_bytes"`
	// RSSIdle is the settled RSS with the subscribers idle (see
	// settleRSS), reached SettleSeconds after the storm; RSSFirst the
	// first reading, memorySettle after it (what earlier runs reported).
	RSSIdle       int64   `json:"rss_idle_bytes"`
	RSSFirst      int64   `json:"rss_first_bytes,omitempty"`
	SettleSeconds float64 `json:"settle_seconds,omitempty"`
	PerClientKB   float64 `json:"per_subscriber_kib"`
	PeakRSS       int64   `json:"storm_peak_rss_bytes,omitempty"`
}

// Idle reports whether the subscribers got to idle, so that RSSIdle and
// PerClientKB were measured.
func (m *MemoryResult) Idle() bool {
	return m.Storm != nil && m.Storm.Aborted == "" && m.PerClientKB >= 0 && m.RSSIdle > 0
}

// StormCounterNames are the server counters recorded around each storm:
// how many snapshot cursors and part fetches the storm cost, how many
// subscribes each path served, and how many statements the statement log
// recorded and in how many appends (batched: a few per storm, not one per
// statement).
var StormCounterNames = []string{
	"shardtail_subscribes_total",
	"shardtail_tail_snapshot_cursors_total",
	"shardtail_tail_snapshot_pieces_total",
	"shardtail_tail_snapshot_bytes_total",
	"shardtail_persist_parts_fetched_total",
	"shardtail_persist_cas_attempts_total",
	"shardtail_persist_cas_conflicts_total",
	"shardtail_statement_log_appends_total",
	"shardtail_statement_log_records_total",
}

// Table and relation names. Both shardtail servers and PostgreSQL hold the
// same rows.
const (
	tableSmall = "src"
	viewSmall  = "mv"
	tableBig   = "big"
	viewBig    = "bigmv"
	tableLive  = "live"
	tableIdle  = "idle"
)

// loadWait bounds a view catching up with its input.
const loadWait = 10 * time.Minute

// Run runs the suite: each shardtail path on fresh servers, then the peer.
func Run(ctx context.Context, cfg SuiteConfig) (*Results, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Both paths must run the same build even if the binary is rebuilt
	// during the run (make build by someone else): run a private copy.
	bin, cleanup, err := copyBinary(cfg.ServerBin)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	cfg.ServerBin = bin
	res := &Results{Paths: map[string]*PathResults{}}
	if cfg.runs(ScenarioLive) {
		res.Floor = runFloor(ctx, &cfg)
	}
	for _, fast := range []bool{true, false} {
		name := PathDataflow
		if fast {
			name = PathFast
		}
		pr := &PathResults{Path: name, Load: map[string]float64{}}
		res.Paths[name] = pr
		if err := runPath(ctx, &cfg, fast, pr); err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			pr.problem("%v", err)
			cfg.Status.Logf("%s path: %v", name, err)
		}
	}
	if cfg.Postgres && (cfg.runs(ScenarioStorm) || cfg.runs(ScenarioBig)) {
		pr := &PathResults{Path: PathPostgres, Load: map[string]float64{}}
		err := runPostgres(ctx, &cfg, pr)
		switch {
		case errors.Is(err, ErrNoPostgres):
			cfg.Status.Logf("peer skipped: %v", err)
		case err != nil:
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			res.Paths[PathPostgres] = pr
			pr.problem("%v", err)
			cfg.Status.Logf("postgres: %v", err)
		default:
			res.Paths[PathPostgres] = pr
		}
	}
	if cfg.runs(ScenarioTail) {
		tr, err := runProxyScenario(ctx, &cfg)
		res.Tail = tr
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			tr.problem("%v", err)
			cfg.Status.Logf("(f): %v", err)
		}
	}
	if cfg.runs(ScenarioBudget) {
		res.Budget = runBudgetScenario(ctx, &cfg)
	}
	return res, ctx.Err()
}

// runFloor measures (c)'s Floor at its largest number of subscribers, or
// at as many sockets as the file limit allows both ends of, before any
// server starts.
func runFloor(ctx context.Context, cfg *SuiteConfig) *Floor {
	n := 0
	for _, ls := range cfg.liveSizes() {
		n = max(n, ls.Clients)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		n = min(n, int(max(lim.Cur, floorSpareFiles)-floorSpareFiles)/2)
	}
	if n == 0 {
		return &Floor{Error: "no descriptors to spare"}
	}
	cfg.Status.Set(fmt.Sprintf("(c) this machine's floor: %d loopback sockets", n), nil)
	f := measureFloor(ctx, n, cfg.Runs)
	if f.Error != "" {
		cfg.Status.Logf("(c) floor: %s", f.Error)
	} else {
		cfg.Status.Logf("(c) floor: a sweep of %d sockets %s, %s of CPU per write and read", n, f.sweepMS(n).text(msRaw), f.cpuUS().text(us))
	}
	return f
}

// floorSpareFiles are the descriptors runFloor leaves to the rest of the
// process.
const floorSpareFiles = 1024

// copyBinary copies the server binary into a temporary directory; cleanup
// removes it.
func copyBinary(src string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "shardtail-bench-bin-*")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	in, err := os.Open(src)
	if err != nil {
		cleanup()
		return "", nil, fmt.Errorf("server binary: %w", err)
	}
	defer in.Close()
	dst := filepath.Join(dir, "shardtail")
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err == nil {
		_, err = io.Copy(out, in)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		cleanup()
		return "", nil, fmt.Errorf("copy server binary: %w", err)
	}
	return dst, cleanup, nil
}

// serverSession is one path's current server and what it has loaded. A
// server that dies is noted and replaced for the next scenario.
type serverSession struct {
	cfg    *SuiteConfig
	fast   bool
	pr     *PathResults
	srv    *Server
	loaded map[string]bool
}

func (s *serverSession) close() {
	if s.srv != nil {
		if err := s.srv.Stop(); err != nil {
			s.pr.problem("stop server: %v", err)
		}
		s.srv = nil
	}
}

// ensure returns a live server holding the given data sets.
func (s *serverSession) ensure(ctx context.Context, data ...string) (*Server, error) {
	if s.srv != nil {
		if dead, err := s.srv.Exited(); dead {
			s.pr.problem("server (pid %d) exited: %s; last log lines:\n%s", s.srv.PID, exitText(err, s.srv), s.srv.LogTail(10))
			s.srv.Stop()
			s.srv = nil
		}
	}
	if s.srv == nil {
		s.cfg.Status.Set(s.pr.Path+": starting server", nil)
		srv, err := StartServer(ctx, s.cfg.ServerBin, ServerOptions{FastPath: s.fast, Feed: s.cfg.runs(ScenarioFeed)})
		if err != nil {
			return nil, err
		}
		s.srv, s.loaded = srv, map[string]bool{}
	}
	for _, d := range data {
		if s.loaded[d] {
			continue
		}
		if err := s.load(ctx, d); err != nil {
			return nil, fmt.Errorf("load %s: %w", d, err)
		}
		s.loaded[d] = true
	}
	return s.srv, nil
}

// load creates and fills one data set on the current server.
func (s *serverSession) load(ctx context.Context, name string) error {
	return loadDataSet(ctx, s.cfg, s.srv.URL, name, s.pr.Path, s.pr.Load)
}

// loadDataSet creates and fills one data set through url, recording how
// long each step took in times; who names the server on the status line.
// A view is ready when a subscribe through each of readURLs (url when
// none), in order, sees every row.
func loadDataSet(ctx context.Context, cfg *SuiteConfig, url, name, who string, times map[string]float64, readURLs ...string) error {
	cfg.Status.Set(who+": loading "+name, nil)
	t0 := time.Now()
	var table, view string
	var rows int
	switch name {
	case viewSmall:
		table, view, rows = tableSmall, viewSmall, cfg.SmallRows
	case viewBig:
		table, view, rows = tableBig, viewBig, cfg.BigRows
	case tableLive:
		return execSQL(ctx, url, "CREATE TABLE "+tableLive+" (id bigint, payload text)")
	case tableShaped:
		return execSQL(ctx, url, "CREATE TABLE "+tableShaped+" (user_id bigint, id bigint, payload text)")
	case tableIdle:
		table, rows = tableIdle, 10
	default:
		return fmt.Errorf("unknown data set %q", name)
	}
	if err := execSQL(ctx, url, "CREATE TABLE "+table+" (id bigint, payload text)"); err != nil {
		return err
	}
	if err := copyRows(ctx, url, table, 1, int64(rows), cfg.PayloadBytes); err != nil {
		return err
	}
	times["copy "+table] = time.Since(t0).Seconds()
	if view == "" {
		return nil
	}
	t1 := time.Now()
	if err := execSQL(ctx, url, "CREATE MATERIALIZED VIEW "+view+" AS SELECT * FROM "+table); err != nil {
		return err
	}
	if len(readURLs) == 0 {
		readURLs = []string{url}
	}
	for _, u := range readURLs {
		if err := waitRows(ctx, u, view, int64(rows), loadWait, cfg.Status); err != nil {
			return err
		}
	}
	times["view "+view] = time.Since(t1).Seconds()
	return nil
}

// exitText says how a server exited. A clean exit that logged "shutting
// down" means it got SIGINT or SIGTERM, which the bench sends only in Stop.
func exitText(err error, s *Server) string {
	if err != nil {
		return err.Error()
	}
	if strings.Contains(s.LogTail(50), "shutting down") {
		return "exit status 0 after SIGINT/SIGTERM from outside the bench"
	}
	return "exit status 0"
}

// check notes a server that exited, or stopped answering, during
// scenario, and stops it so that the next scenario gets a new one.
func (s *serverSession) check(ctx context.Context, scenario string) {
	if s.srv == nil {
		return
	}
	if dead, err := s.srv.Exited(); dead {
		s.pr.problem("server (pid %d) exited during %s: %s; last log lines:\n%s", s.srv.PID, scenario, exitText(err, s.srv), s.srv.LogTail(10))
		s.srv.Stop()
		s.srv = nil
		return
	}
	if err := s.srv.Healthy(ctx); err != nil && ctx.Err() == nil {
		s.pr.problem("server (pid %d) stopped answering during %s (%v); last log lines:\n%s", s.srv.PID, scenario, err, s.srv.LogTail(10))
		s.close()
	}
}

// replaceIfSwollen stops a server that a measurement left holding more
// than half of the memory guard, so that the next one starts on a new
// server, as the first did. A Go process returns freed memory to the
// system only slowly: without this, the second run of a storm that peaked
// near the guard starts near it and is aborted at once, and every later
// measurement on that server pays for the first one's heap.
func (s *serverSession) replaceIfSwollen(after string) {
	if s.srv == nil || s.cfg.MaxServerRSS <= 0 {
		return
	}
	rss, err := s.srv.RSS()
	if err != nil || rss <= s.cfg.MaxServerRSS/2 {
		return
	}
	s.cfg.Status.Logf("%s: server RSS %s after %s: replacing it for the next measurement", s.pr.Path, mib(float64(rss)), after)
	s.pr.Replaced = append(s.pr.Replaced, fmt.Sprintf("after %s (RSS %s)", after, mib(float64(rss))))
	s.close()
}

func runPath(ctx context.Context, cfg *SuiteConfig, fast bool, pr *PathResults) error {
	ss := &serverSession{cfg: cfg, fast: fast, pr: pr}
	defer ss.close()
	st := cfg.Status
	label := func(s string) string { return pr.Path + " path: " + s }
	// step runs one measurement on a live server holding data; a failure
	// is noted and the path goes on with the next one (on a new server if
	// this one died). Only a cancelled run stops the path.
	step := func(name string, data string, run func(srv *Server) error) error {
		srv, err := ss.ensure(ctx, data)
		if err == nil {
			quiesce(ctx, srv.CPU(), st, label("waiting for the server to idle"))
			err = run(srv)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			pr.problem("%s: %v", name, err)
			st.Logf("%s %s: %v", pr.Path, name, err)
		}
		ss.check(ctx, name)
		ss.replaceIfSwollen(name)
		return nil
	}

	if cfg.runs(ScenarioStorm) {
		for _, n := range cfg.Clients {
			if !cfg.onPath(pr.Path, n) {
				continue
			}
			counters := map[*StormResult]map[string]float64{}
			for run := range cfg.Runs {
				err := step(fmt.Sprintf("(a) the storm at N=%d%s", n, runLabel(run, cfg.Runs)), viewSmall, func(srv *Server) error {
					delta := counterDelta(ctx, srv.MetricsURL)
					gauges := gaugeDelta(ctx, srv)
					var perConn map[string]float64
					var idle idleProbe
					r, err := Storm(ctx, StormConfig{
						URL: srv.URL, Clients: n, Mode: cfg.StormMode, Relation: viewSmall,
						Timeout: cfg.Timeout, ExpectRows: cfg.SmallRows, Server: srv.CPU(), MaxServerRSS: cfg.MaxServerRSS,
						Status: st, Label: label(fmt.Sprintf("(a) storm N=%d%s", n, runLabel(run, cfg.Runs))),
						// Every client holds its subscribe here: what the
						// process grew by since before the storm is theirs,
						// and what it costs while they sit idle is measured.
						Live: func(ctx context.Context) error {
							idle.run(ctx, srv, func() { perConn = gauges() })
							return nil
						},
					})
					if err != nil {
						return err
					}
					r.PerConnection = perConnection(perConn, r.Completed)
					idle.apply(r)
					counters[r] = delta()
					if pr.StormRuns == nil {
						pr.StormRuns = map[int][]*StormResult{}
					}
					pr.StormRuns[n] = append(pr.StormRuns[n], r)
					if r.Aborted != "" {
						pr.problem("(a) the storm at N=%d%s: %s (peak %s)", n, runLabel(run, cfg.Runs), r.Aborted, mib(float64(r.ServerPeakRSS)))
					}
					st.Logf("%s (a) N=%d%s: %s", pr.Path, n, runLabel(run, cfg.Runs), stormLine(r))
					return nil
				})
				if err != nil {
					return err
				}
			}
			if r := medianRun(pr.StormRuns[n], func(r *StormResult) float64 { return r.StormSeconds }); r != nil {
				pr.Storms = append(pr.Storms, r)
				if d := counters[r]; d != nil {
					if pr.StormCounters == nil {
						pr.StormCounters = map[int]map[string]float64{}
					}
					pr.StormCounters[n] = d
				}
			}
		}
	}
	if cfg.runs(ScenarioBig) {
		err := step("(b)", viewBig, func(srv *Server) error {
			pr.Big = runBig(ctx, cfg, srv.URL, viewBig, srv.CPU(), false, label("(b) 1 client on "+viewBig))
			st.Logf("%s (b): FETCH 10 %s, COPY first row %s, last row %s, complete %s",
				pr.Path, secs(pr.Big.Fetch10), secs(pr.Big.CopyFirstRow), secs(pr.Big.CopyLastRow), secs(pr.Big.CopyComplete))
			for _, e := range pr.Big.Errors {
				pr.problem("(b): %s", e)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if cfg.runs(ScenarioLive) {
		for _, ls := range cfg.liveSizes() {
			if !cfg.onPath(pr.Path, ls.Clients) {
				continue
			}
			var runs []*LiveResult
			for run := range cfg.Runs {
				name := fmt.Sprintf("(c) %d subscribers at %d rows/s%s", ls.Clients, ls.Rate, runLabel(run, cfg.Runs))
				err := step(name, tableLive, func(srv *Server) error {
					// Every run starts on an empty table, as (d)'s: the
					// rows of the runs before would make the subscribes
					// of each run cost more than the last's.
					if err := execSQL(ctx, srv.URL, "DELETE FROM "+tableLive); err != nil {
						return err
					}
					r, err := runLive(ctx, cfg, srv, liveRun{clients: ls.Clients, rate: ls.Rate, payloadBytes: cfg.PayloadBytes,
						duration: cfg.fanoutDuration(), everyRow: true}, label(name))
					if err != nil {
						return err
					}
					runs = append(runs, r)
					pr.LiveRuns = append(pr.LiveRuns, r)
					if a := r.Storm.Aborted; a != "" {
						pr.problem("%s: %s", name, a)
					}
					st.Logf("%s %s: p50 %.1f ms, p99 %.1f ms, delivered %.1f%%, %d missing",
						pr.Path, name, r.Storm.Latency.P50, r.Storm.Latency.P99, 100*r.Delivered, r.Storm.LiveMissing)
					return nil
				})
				if err != nil {
					return err
				}
			}
			if pr.Live == nil {
				pr.Live = medianRun(runs, liveP99)
			}
		}
	}
	if cfg.runs(ScenarioSlow) {
		for run := range cfg.Runs {
			for _, stalled := range []int{0, cfg.SlowStalled} {
				name := fmt.Sprintf("(d) with %d stalled clients%s", stalled, runLabel(run, cfg.Runs))
				err := step(name, tableLive, func(srv *Server) error {
					// Every run starts on an empty table: the rows of the runs
					// before would make the stalled clients' snapshot pass
					// their budget.
					if err := execSQL(ctx, srv.URL, "DELETE FROM "+tableLive); err != nil {
						return err
					}
					delta := counterDeltaOf(ctx, srv.MetricsURL, SlowCounterNames)
					r, err := runLive(ctx, cfg, srv, liveRun{clients: cfg.SlowClients, stalled: stalled, rate: cfg.SlowRate,
						payloadBytes: cfg.SlowPayloadBytes, duration: cfg.LiveDuration},
						label(fmt.Sprintf("(d) %d subscribers, %d stalled%s", cfg.SlowClients, stalled, runLabel(run, cfg.Runs))))
					if err != nil {
						return err
					}
					r.Counters = delta()
					if a := r.Storm.Aborted; a != "" {
						pr.problem("%s: %s", name, a)
					}
					if stalled == 0 {
						pr.SlowBaselineRuns = append(pr.SlowBaselineRuns, r)
					} else {
						pr.SlowRuns = append(pr.SlowRuns, r)
					}
					st.Logf("%s %s: p50 %.1f ms, p99 %.1f ms", pr.Path, name, r.Storm.Latency.P50, r.Storm.Latency.P99)
					return nil
				})
				if err != nil {
					return err
				}
			}
		}
		pr.SlowBaseline, pr.Slow = medianRun(pr.SlowBaselineRuns, liveP99), medianRun(pr.SlowRuns, liveP99)
	}
	if cfg.runs(ScenarioMemory) {
		for run := range cfg.Runs {
			// A fresh server: RSS left by earlier scenarios would hide the
			// subscribers' share.
			ss.close()
			err := step("(e)"+runLabel(run, cfg.Runs), tableIdle, func(srv *Server) error {
				m, err := runMemory(ctx, cfg, srv, label(fmt.Sprintf("(e) %d idle subscribers%s", cfg.IdleClients, runLabel(run, cfg.Runs))))
				if err != nil {
					return err
				}
				pr.MemoryRuns = append(pr.MemoryRuns, m)
				if a := m.Storm.Aborted; a != "" {
					pr.problem("(e)%s: %s", runLabel(run, cfg.Runs), a)
				}
				if m.Idle() {
					st.Logf("%s (e)%s: %d idle subscribers, %.1f KiB each", pr.Path, runLabel(run, cfg.Runs), m.Storm.Completed, m.PerClientKB)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		pr.Memory = medianRun(pr.MemoryRuns, func(m *MemoryResult) float64 { return m.PerClientKB })
	}
	if cfg.runs(ScenarioShapes) {
		// (h)'s storms and each of its routed runs are steps of their
		// own: a server the storms left near the memory guard (the
		// dataflow path's private pipelines) is replaced before the
		// routed runs instead of aborting them at once.
		pr.Shapes = &ShapesResult{}
		err := step("(h) storms", viewSmall, func(srv *Server) error {
			return runShapesStorms(ctx, cfg, srv, pr.Shapes, pr.Path, label)
		})
		if err != nil {
			return err
		}
		for _, r := range pr.Shapes.routedRuns(cfg, pr.Path) {
			err := step(fmt.Sprintf("(h) %d routed subscribers", r.users), tableShaped, func(srv *Server) error {
				return runShapesRouted(ctx, cfg, srv, pr.Path, r, label)
			})
			if err != nil {
				return err
			}
		}
	}
	if cfg.runs(ScenarioFeed) {
		// A fresh server, as for (e): its idle streams' RSS is measured.
		ss.close()
		err := step("(i)", viewSmall, func(srv *Server) error {
			if _, err := ss.ensure(ctx, tableIdle); err != nil {
				return err
			}
			// As (a)'s storms: each dataflow stream has a reader of its
			// own, and at 6,000 of them a new stream waited minutes.
			idle := cfg.capClients(pr.Path, cfg.FeedIdleClients)
			fr, err := runFeed(ctx, cfg, srv, cfg.capClients(pr.Path, cfg.FeedClients), idle, label("(i) the HTTP feed"))
			pr.Feed = fr
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// runLabel names run i of n in labels and problems ("" for a single run).
func runLabel(i, n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(", run %d of %d", i+1, n)
}

// liveP99 is a live run's write-to-client p99, its median key.
func liveP99(l *LiveResult) float64 { return l.Storm.Latency.P99 }

// stormLine summarises a storm for the log.
func stormLine(r *StormResult) string {
	return fmt.Sprintf("storm %s, p50 %s, p95 %s, server CPU %.2fs, %d errors",
		secs(r.StormSeconds), secs(r.Snapshot.P50), secs(r.Snapshot.P95), r.ServerCPU, r.Errors)
}

// counterDelta scrapes StormCounterNames from a server's /metrics now, and
// returns a function to call after the storm, which waits for the
// statement log to append the storm's records (statementLogSettler), then
// scrapes them again and returns their increase (nil when either scrape
// failed).
func counterDelta(ctx context.Context, metricsURL string) func() map[string]float64 {
	settle := statementLogSettler(ctx, metricsURL)
	delta := counterDeltaOf(ctx, metricsURL, StormCounterNames)
	return func() map[string]float64 {
		settle()
		return delta()
	}
}

// ConnGaugeNames are the server's gauges that (a) reads before each storm
// and again while every client holds its subscribe: what a connection
// costs the process in descriptors, goroutines and bytes.
var ConnGaugeNames = []string{
	"process_open_fds",
	"go_goroutines",
	"process_resident_memory_bytes",
	"go_memstats_heap_inuse_bytes",
	"go_memstats_stack_inuse_bytes",
}

// gaugeDelta is counterDeltaOf for ConnGaugeNames, each scrape after a
// garbage collection (the server's /debug/pprof/heap?gc=1), so that the
// heap counts what is live, not what the storm left to collect.
func gaugeDelta(ctx context.Context, srv *Server) func() map[string]float64 {
	gc := func() {
		heap := strings.TrimSuffix(srv.MetricsURL, "/metrics") + "/debug/pprof/heap?gc=1"
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if req, err := http.NewRequestWithContext(ctx, http.MethodGet, heap, nil); err == nil {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
	gc()
	delta := counterDeltaOf(ctx, srv.MetricsURL, ConnGaugeNames)
	return func() map[string]float64 {
		gc()
		return delta()
	}
}

// idleWindow is how long (a) holds its clients idle after their
// snapshots, to measure what idle subscribers cost the server.
const idleWindow = 2 * time.Second

// idleProbe is (a)'s pause once every snapshot is complete: the gauges'
// reading, then idleWindow of idle subscribers, whose server CPU and write
// syscalls it measures. Its own CPU (the server's and this process's) is
// the bench's pause, not the storm's, and is taken out of the storm's.
type idleProbe struct {
	server, client float64 // CPU seconds over the whole pause
	idleCPU        float64 // the server's over idleWindow (-1: unknown)
	idleWrites     int64   // the server's write syscalls over idleWindow (-1: unknown)
	seconds        float64 // idleWindow as measured
}

func (p *idleProbe) run(ctx context.Context, srv *Server, gauges func()) {
	whole := cpuSince(ctx, srv.CPU())
	self0 := SelfCPU()
	gauges()
	window := cpuSince(ctx, srv.CPU())
	w0, werr := ProcWriteSyscalls(srv.PID)
	t0 := time.Now()
	sleepCtx(ctx, idleWindow)
	p.seconds = time.Since(t0).Seconds()
	p.idleCPU, p.idleWrites = window()[0], -1
	if w1, err := ProcWriteSyscalls(srv.PID); err == nil && werr == nil {
		p.idleWrites = w1 - w0
	}
	p.server, p.client = max(0, whole()[0]), SelfCPU()-self0
}

// apply takes the pause out of r's CPU and records the idle cost per
// subscriber.
func (p *idleProbe) apply(r *StormResult) {
	if r.ServerCPU > p.server {
		r.ServerCPU -= p.server
	}
	if r.ClientCPU > p.client {
		r.ClientCPU -= p.client
	}
	if r.Completed == 0 || p.seconds <= 0 {
		return
	}
	if r.PerConnection == nil {
		r.PerConnection = map[string]float64{}
	}
	if p.idleCPU >= 0 {
		r.PerConnection[IdleCPUPerSecond] = p.idleCPU / p.seconds / float64(r.Completed)
	}
	if p.idleWrites >= 0 {
		r.PerConnection[IdleWritesPerSecond] = float64(p.idleWrites) / p.seconds / float64(r.Completed)
	}
}

// Keys of StormResult.PerConnection besides the gauges: an idle
// subscriber's server CPU seconds and write syscalls per second (the
// progress row of each tick).
const (
	IdleCPUPerSecond    = "idle_cpu_seconds_per_second"
	IdleWritesPerSecond = "idle_write_syscalls_per_second"
)

// perConnection divides each gauge's increase by the n connections that
// caused it (nil for none).
func perConnection(delta map[string]float64, n int) map[string]float64 {
	if len(delta) == 0 || n == 0 {
		return nil
	}
	out := make(map[string]float64, len(delta))
	for k, v := range delta {
		out[k] = v / float64(n)
	}
	return out
}

// counterDeltaOf is counterDelta of the named counters.
func counterDeltaOf(ctx context.Context, metricsURL string, names []string) func() map[string]float64 {
	before, err := ScrapeCounters(ctx, metricsURL, names)
	return func() map[string]float64 {
		if err != nil {
			return nil
		}
		after, err := ScrapeCounters(ctx, metricsURL, names)
		if err != nil {
			return nil
		}
		d := map[string]float64{}
		for k, v := range after {
			d[k] = v - before[k]
		}
		return d
	}
}

// Quiescing: before each measurement the server must be idle, so that one
// scenario's teardown (a dataflow path retiring thousands of pipelines) is
// not billed to the next.
const (
	quiesceWindow  = time.Second
	quiesceIdleCPU = 0.15 // CPU seconds per window: 15% of one core
	quiesceMax     = 90 * time.Second
)

// quiesce waits until the server uses less than quiesceIdleCPU per
// quiesceWindow, or quiesceMax passes.
func quiesce(ctx context.Context, cpu CPUProbe, st *Status, label string) {
	st.Set(label, nil)
	deadline := time.Now().Add(quiesceMax)
	prev, err := cpu.Read(ctx)
	for err == nil && time.Now().Before(deadline) && ctx.Err() == nil {
		sleepCtx(ctx, quiesceWindow)
		var now float64
		if now, err = cpu.Read(ctx); err == nil {
			if now-prev < quiesceIdleCPU {
				return
			}
			prev = now
		}
	}
}

// runBig measures (b) Repeat times and keeps the medians. Errors are
// collected, not returned: a failed read leaves its numbers at -1.
func runBig(ctx context.Context, cfg *SuiteConfig, url, rel string, cpu CPUProbe, postgres bool, label string) *BigResult {
	br := &BigResult{Rows: cfg.BigRows}
	var fetch, first, last, complete, cpus []float64
	for i := range cfg.Repeat {
		cfg.Status.Set(fmt.Sprintf("%s, run %d of %d: FETCH 10", label, i+1, cfg.Repeat), nil)
		d, n, err := fetch10(ctx, url, rel, postgres, cfg.Timeout)
		if err != nil {
			br.Errors = append(br.Errors, "FETCH 10: "+err.Error())
		} else {
			fetch = append(fetch, d)
			br.Fetch10Rows = n
		}
		mode := ModeCopy
		if postgres {
			mode = ModeCopyTable
		}
		r, err := Storm(ctx, StormConfig{URL: url, Clients: 1, Mode: mode, Relation: rel, Timeout: cfg.Timeout,
			ExpectRows: cfg.BigRows, Server: cpu, Status: cfg.Status, Label: fmt.Sprintf("%s, run %d of %d: COPY", label, i+1, cfg.Repeat)})
		switch {
		case err != nil:
			br.Errors = append(br.Errors, "COPY: "+err.Error())
		case r.Completed != 1:
			br.Errors = append(br.Errors, "COPY: "+strings.Join(SortedErrors(r.ErrorSamples), "; "))
		default:
			first = append(first, r.FirstRow.Max)
			last = append(last, r.LastRow.Max)
			complete = append(complete, r.Snapshot.Max)
			cpus = append(cpus, r.ServerCPU)
		}
	}
	br.Fetch10, br.CopyFirstRow, br.CopyLastRow = median(fetch), median(first), median(last)
	br.CopyComplete, br.ServerCPU = median(complete), median(cpus)
	br.Spread = map[string][2]float64{}
	for k, xs := range map[string][]float64{"fetch10_seconds": fetch, "copy_first_row_seconds": first, "copy_last_row_seconds": last,
		"copy_complete_seconds": complete, "server_cpu_seconds": cpus} {
		if len(xs) > 0 {
			br.Spread[k] = [2]float64{slices.Min(xs), slices.Max(xs)}
		}
	}
	return br
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	return NewDist(xs).P50
}

// fetch10 times BEGIN; DECLARE c CURSOR FOR <query>; FETCH 10 c on a new
// connection (connecting not timed) until ten rows are in. It returns the
// time and how many rows the first FETCH returned.
func fetch10(ctx context.Context, url, rel string, postgres bool, timeout time.Duration) (float64, int, error) {
	c, err := connect(ctx, url)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close(context.Background())
	h, err := c.Hijack()
	if err != nil {
		return 0, 0, err
	}
	defer h.Conn.Close()
	query := "SUBSCRIBE " + rel
	if postgres {
		query = "SELECT * FROM " + rel
	}
	fe := h.Frontend
	start := time.Now()
	h.Conn.SetDeadline(start.Add(timeout))
	fe.Send(&pgproto3.Query{String: "BEGIN"})
	fe.Send(&pgproto3.Query{String: "DECLARE c CURSOR FOR " + query})
	fe.Send(&pgproto3.Query{String: "FETCH 10 c"})
	if err := fe.Flush(); err != nil {
		return 0, 0, err
	}
	rows, ready, firstFetch := 0, 0, -1
	for {
		msg, err := fe.Receive()
		if err != nil {
			return 0, 0, err
		}
		switch m := msg.(type) {
		case *pgproto3.DataRow:
			rows++
		case *pgproto3.ErrorResponse:
			return 0, 0, fmt.Errorf("server error %s: %s", m.Code, m.Message)
		case *pgproto3.ReadyForQuery:
			ready++
			if ready < 3 {
				continue
			}
			if firstFetch < 0 {
				firstFetch = rows
			}
			if rows >= 10 {
				return time.Since(start).Seconds(), firstFetch, nil
			}
			fe.Send(&pgproto3.Query{String: fmt.Sprintf("FETCH %d c", 10-rows)})
			if err := fe.Flush(); err != nil {
				return 0, 0, err
			}
		}
	}
}

// writeLive is the live writer: for duration, every writerTick, one
// INSERT into table of the rows due at lr.Rate rows/s, numbered from 0;
// each row is what prefix appends for its id, then a payload of
// lr.PayloadBytes starting with the write's wall clock (Unix ns). It counts
// the rows written and each INSERT's latency (ms) into lr and lats, then
// lets the subscribers drain for liveDrain.
func writeLive(ctx context.Context, url, table string, duration time.Duration, lr *LiveResult, lats *[]float64, prefix func(sql []byte, id int64) []byte) error {
	c, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	start := time.Now()
	t := time.NewTicker(writerTick)
	defer t.Stop()
	var id int64
	var sql []byte
	pad := payload(nil, 0, lr.PayloadBytes)
	for time.Since(start) < duration && ctx.Err() == nil {
		<-t.C
		due := int64(time.Since(start).Seconds() * float64(lr.Rate))
		if due <= id {
			continue
		}
		now := time.Now()
		ns := now.UnixNano()
		sql = append(sql[:0], "INSERT INTO "+table+" VALUES "...)
		for ; id < due; id++ {
			if sql[len(sql)-1] == ')' {
				sql = append(sql, ',')
			}
			sql = append(sql, '(')
			sql = prefix(sql, id)
			sql = fmt.Appendf(sql, "'%d-", ns)
			sql = append(sql, pad[:max(0, lr.PayloadBytes-21)]...)
			sql = append(sql, "')"...)
		}
		if _, err := c.Exec(ctx, string(sql)).ReadAll(); err != nil {
			lr.WriteErrors++
			if lr.WriterError == "" {
				lr.WriterError = err.Error()
			}
			if c.IsClosed() {
				return err
			}
			continue
		}
		*lats = append(*lats, float64(time.Since(now).Microseconds())/1000)
		lr.Written = id
	}
	lr.WriteSeconds = time.Since(start).Seconds()
	sleepCtx(ctx, liveDrain)
	return nil
}

// writerTick is how often the live writer sends an INSERT of the rows due.
const writerTick = 10 * time.Millisecond

// liveDrain is how long subscribers keep reading after the last write.
const liveDrain = 2 * time.Second

// liveRun is one run of (c) or (d): clients subscribers on the live
// table (stalled of them stop reading after their snapshot) while a writer
// inserts rate rows/s of payloadBytes for duration. With everyRow, each
// reading subscriber must receive every row written (LiveMissing).
type liveRun struct {
	clients, stalled, rate, payloadBytes int
	duration                             time.Duration
	everyRow                             bool
}

// runLive runs lr, each row's payload starting with its write's wall
// clock; it measures the server's CPU and write syscalls, and this
// process's CPU, while the writer runs.
func runLive(ctx context.Context, cfg *SuiteConfig, srv *Server, run liveRun, label string) (*LiveResult, error) {
	lr := &LiveResult{Rate: run.rate, PayloadBytes: run.payloadBytes, WriteServerCPU: -1, WriteSyscalls: -1}
	var lats []float64
	writer := func(ctx context.Context) error {
		cpu := cpuSince(ctx, srv.CPU())
		self0 := SelfCPU()
		sys0, sysErr := ProcWriteSyscalls(srv.PID)
		err := writeLive(ctx, srv.URL, tableLive, run.duration, lr, &lats, func(sql []byte, id int64) []byte {
			return fmt.Appendf(sql, "%d,", id)
		})
		lr.WriteServerCPU, lr.WriteClientCPU = cpu()[0], SelfCPU()-self0
		if sys1, err := ProcWriteSyscalls(srv.PID); err == nil && sysErr == nil {
			lr.WriteSyscalls = sys1 - sys0
		}
		return err
	}
	sc := StormConfig{
		URL: srv.URL, Clients: run.clients, Mode: ModeCopy, Relation: tableLive, Timeout: cfg.Timeout,
		LatencyColumn: 4, Stalled: run.stalled, Live: writer, Server: srv.CPU(), MaxServerRSS: cfg.MaxServerRSS,
		Status: cfg.Status, Label: label,
	}
	if run.everyRow {
		sc.LiveWant = func() int64 { return lr.Written }
	}
	if run.stalled > 0 {
		// Output columns: mz_timestamp, mz_progressed, mz_diff, id, payload.
		sc.IDColumn, sc.ResumeStalled = 3, func() int64 { return lr.Written }
		if cfg.SlowBudgetBytes > 0 {
			sc.StalledSQL = []string{fmt.Sprintf("SET subscribe_max_buffered_bytes = %d", cfg.SlowBudgetBytes)}
		}
	}
	r, err := Storm(ctx, sc)
	if r == nil {
		return nil, err
	}
	if err != nil && lr.WriterError == "" {
		lr.WriterError = err.Error()
	}
	lr.Storm, lr.WriteLatency = r, NewDist(lats)
	if readers := r.Completed - run.stalled; readers > 0 && lr.Written > 0 {
		lr.Delivered = float64(r.LiveRows) / float64(int64(readers)*lr.Written)
	}
	return lr, nil
}

// (e) reads the server's RSS memorySettle after the storm, and then every
// memorySettle until it has settled, for at most memorySettleMax: RSS is
// what a user sees, and right after a storm it still holds what the
// storm's garbage took. The Go runtime gives that back only once a
// collection after the storm has set a heap goal from the idle heap (the
// scavenger keeps about 1.1 times the goal); until then RSS is flat, so
// two readings that agree are not enough. Settled is: a collection has
// completed since the storm, and two readings in a row agree within
// memorySettleSlack or 1%, whichever is more. The runtime collects at
// least every 2 minutes, so the bound of 3 is reached only by a server
// that keeps moving.
const (
	memorySettle      = 3 * time.Second
	memorySettleMax   = 3 * time.Minute
	memorySettleSlack = 1 << 20
)

// settleRSS reads RSS (read) and the server's count of completed
// collections (gcs) after each wait of step, until a collection has
// completed since the first call and two readings in a row agree, or
// maxReadings were taken; it returns the first reading, the last (the
// settled RSS, or the last one at the bound), and how many readings it
// took.
func settleRSS(ctx context.Context, read, gcs func() (int64, error), step time.Duration, maxReadings int) (first, last int64, readings int, err error) {
	gc0, err := gcs()
	if err != nil {
		return 0, 0, 0, err
	}
	for readings < maxReadings {
		sleepCtx(ctx, step)
		if err := ctx.Err(); err != nil {
			return first, last, readings, err
		}
		rss, err := read()
		if err != nil {
			return first, last, readings, err
		}
		gc, err := gcs()
		if err != nil {
			return first, last, readings, err
		}
		readings++
		if readings == 1 {
			first = rss
		} else if d := rss - last; gc > gc0 && max(d, -d) <= max(memorySettleSlack, last/100) {
			return first, rss, readings, nil
		}
		last = rss
	}
	return first, last, readings, nil
}

// gcCount reads the server's count of completed collections.
func gcCount(ctx context.Context, srv *Server) (int64, error) {
	const name = "go_gc_duration_seconds_count"
	m, err := ScrapeCounters(ctx, srv.MetricsURL, []string{name})
	if err != nil {
		return 0, err
	}
	v, ok := m[name]
	if !ok {
		return 0, fmt.Errorf("scrape %s: no %s", srv.MetricsURL, name)
	}
	return int64(v), nil
}

// runMemory reads the server's RSS, opens IdleClients subscriptions to a
// 10-row table, lets them idle until the server's RSS settles, and reads
// it again.
func runMemory(ctx context.Context, cfg *SuiteConfig, srv *Server, label string) (*MemoryResult, error) {
	connURL, err := withStartupParams(srv.URL, psqlStartupParams)
	if err != nil {
		return nil, err
	}
	// One subscribe first, so that one-time costs (the shared tail, code
	// paths touched) are in the baseline.
	if _, err := Storm(ctx, StormConfig{URL: connURL, Clients: 1, Relation: tableIdle, Timeout: cfg.Timeout, Settle: -1}); err != nil {
		return nil, err
	}
	sleepCtx(ctx, time.Second)
	mr := &MemoryResult{}
	if mr.RSSBefore, err = srv.RSS(); err != nil {
		return nil, err
	}
	var rssErr error
	r, err := Storm(ctx, StormConfig{
		URL: connURL, Clients: cfg.IdleClients, Mode: ModeCopy, Relation: tableIdle, Timeout: cfg.Timeout,
		ExpectRows: 10, Server: srv.CPU(), MaxServerRSS: cfg.MaxServerRSS, Status: cfg.Status, Label: label,
		Live: func(ctx context.Context) error {
			t0 := time.Now()
			gcs := func() (int64, error) { return gcCount(ctx, srv) }
			mr.RSSFirst, mr.RSSIdle, _, rssErr = settleRSS(ctx, srv.RSS, gcs, memorySettle, int(memorySettleMax/memorySettle))
			mr.SettleSeconds = time.Since(t0).Seconds()
			return rssErr
		},
	})
	if r == nil {
		return nil, err
	}
	mr.Storm = r
	mr.PerClientKB = -1
	if r.Aborted != "" {
		// Cut short by the memory guard while subscribing: the peak is of
		// the storm, not of idle subscribers, and divides by nothing.
		mr.RSSIdle, mr.PeakRSS = 0, r.ServerPeakRSS
		return mr, nil
	}
	if r.Completed > 0 && rssErr == nil && mr.RSSIdle > 0 {
		mr.PerClientKB = float64(mr.RSSIdle-mr.RSSBefore) / 1024 / float64(r.Completed)
	}
	return mr, nil
}

// psqlStartupParams are the run-time parameters psql puts in its startup
// message (node-postgres sends client_encoding too): (e)'s subscribers
// send them, since a session that holds them may cost more than a bare
// one.
var psqlStartupParams = map[string]string{"application_name": "psql", "client_encoding": "UTF8"}

// withStartupParams adds params to a connection URL's query, where pgconn
// takes them as run-time parameters of the startup message.
func withStartupParams(rawURL string, params map[string]string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("%w: URL: %v", ErrConfig, err)
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// runPostgres loads the same rows into a throwaway PostgreSQL and runs the
// storms as SELECT * and the large read as COPY ... TO STDOUT.
func runPostgres(ctx context.Context, cfg *SuiteConfig, pr *PathResults) error {
	cfg.Status.Set("postgres: initdb and start", nil)
	most := 1
	for _, n := range cfg.Clients {
		if cfg.onPath(PathPostgres, n) {
			most = max(most, n)
		}
	}
	pg, err := StartPostgres(ctx, most+20)
	if err != nil {
		return err
	}
	defer func() {
		if err := pg.Stop(); err != nil {
			pr.problem("stop postgres: %v", err)
		}
	}()
	pr.Version = pg.Version
	load := func(table string, rows int) error {
		cfg.Status.Set("postgres: loading "+table, nil)
		t0 := time.Now()
		if err := execSQL(ctx, pg.URL, "CREATE TABLE "+table+" (id bigint, payload text)"); err != nil {
			return err
		}
		if err := copyRows(ctx, pg.URL, table, 1, int64(rows), cfg.PayloadBytes); err != nil {
			return err
		}
		// Set hint bits and statistics, as a table that has been read
		// before (shardtail's views were read while waiting for them).
		if err := execSQL(ctx, pg.URL, "VACUUM ANALYZE "+table); err != nil {
			return err
		}
		pr.Load["copy "+table] = time.Since(t0).Seconds()
		return nil
	}
	if cfg.runs(ScenarioStorm) {
		if err := load(tableSmall, cfg.SmallRows); err != nil {
			return err
		}
		pr.StormRuns = map[int][]*StormResult{}
		for _, n := range cfg.Clients {
			if !cfg.onPath(PathPostgres, n) {
				continue
			}
			for run := range cfg.Runs {
				quiesce(ctx, pg.CPU(), cfg.Status, "postgres: waiting for the server to idle")
				r, err := Storm(ctx, StormConfig{
					URL: pg.URL, Clients: n, Mode: ModeSelect, Relation: tableSmall, Timeout: cfg.Timeout,
					ExpectRows: cfg.SmallRows, Server: pg.CPU(), Settle: time.Second,
					ConnectConcurrency: 32, Status: cfg.Status, Label: fmt.Sprintf("postgres: (a) storm N=%d%s", n, runLabel(run, cfg.Runs)),
				})
				if err != nil {
					return err
				}
				r.ServerPeakRSS = 0 // the postmaster's alone: not PostgreSQL's memory
				pr.StormRuns[n] = append(pr.StormRuns[n], r)
				cfg.Status.Logf("postgres (a) N=%d%s: %s", n, runLabel(run, cfg.Runs), stormLine(r))
			}
			pr.Storms = append(pr.Storms, medianRun(pr.StormRuns[n], func(r *StormResult) float64 { return r.StormSeconds }))
		}
	}
	if cfg.runs(ScenarioBig) {
		if err := load(tableBig, cfg.BigRows); err != nil {
			return err
		}
		pr.Big = runBig(ctx, cfg, pg.URL, tableBig, pg.CPU(), true, "postgres: (b) 1 client on "+tableBig)
		cfg.Status.Logf("postgres (b): FETCH 10 %s, COPY first row %s, last row %s",
			secs(pr.Big.Fetch10), secs(pr.Big.CopyFirstRow), secs(pr.Big.CopyLastRow))
		for _, e := range pr.Big.Errors {
			pr.problem("(b): %s", e)
		}
	}
	return nil
}
