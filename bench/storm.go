package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/shardtail/shardtail/internal/sockopt"
)

// Mode is how a storm client subscribes.
type Mode string

const (
	// ModeCopy runs COPY (SUBSCRIBE x WITH (PROGRESS)) TO STDOUT.
	ModeCopy Mode = "copy"
	// ModeFetch runs BEGIN; DECLARE c CURSOR FOR SUBSCRIBE x WITH
	// (PROGRESS); FETCH ALL c, and FETCH ALL c again after each result.
	ModeFetch Mode = "fetch"
	// ModeBare runs SUBSCRIBE x WITH (PROGRESS), streamed as DataRows.
	ModeBare Mode = "bare"
	// ModeSelect runs SELECT * FROM x: the snapshot is the whole result.
	// It is the peer's (PostgreSQL's) side of the storm.
	ModeSelect Mode = "select"
	// ModeCopyTable runs COPY x TO STDOUT: the peer's whole-table read.
	ModeCopyTable Mode = "copy-table"
)

// ParseMode parses a --mode value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(s)); m {
	case ModeCopy, ModeFetch, ModeBare, ModeSelect, ModeCopyTable:
		return m, nil
	}
	return "", fmt.Errorf("%w: mode %q (want copy, fetch, bare, select or copy-table)", ErrConfig, s)
}

// Defaults of StormConfig.
const (
	DefaultStormTimeout       = 2 * time.Minute
	DefaultConnectConcurrency = 128
	DefaultSettle             = 300 * time.Millisecond
)

// StormConfig configures one storm: Clients connections opened first, then
// (a start barrier) every client sends its statement at once and reads
// until its snapshot is complete.
type StormConfig struct {
	// URL is the server's connection URL.
	URL string
	// Clients is the number of connections.
	Clients int
	// Mode is how each client subscribes.
	Mode Mode
	// Relation is the collection to subscribe to (or select from).
	Relation string
	// Relations, when set instead, spreads the clients over several
	// collections: client i subscribes to Relations[i%len(Relations)].
	Relations []string
	// RelationFor, when set, is what client i subscribes to instead of
	// Relation (a query per client: (h)'s shapes); Relation then only
	// names the storm.
	RelationFor func(i int) string
	// FastPath, when "on" or "off", is sent on each connection before the
	// barrier as SET enable_subscribe_persist_fast_path; "" or "default"
	// leaves the server's setting.
	FastPath string
	// Spread staggers the statements evenly over this duration instead of
	// sending them all at once.
	Spread time.Duration
	// Timeout bounds each client's connect, and its statement-to-snapshot
	// time; a client over it counts as an error and the storm goes on.
	Timeout time.Duration
	// ConnectConcurrency bounds the dials in flight before the barrier, so
	// that the listen backlog does not overflow (connecting is not timed).
	ConnectConcurrency int
	// ExpectRows, when positive, is the number of snapshot rows each
	// client must receive; a different count is an error.
	ExpectRows int
	// Stay keeps every client reading live updates this long after all
	// snapshots are complete. Ignored when Live is set.
	Stay time.Duration
	// Live, when set, runs once every snapshot is complete (a writer, a
	// memory probe); clients keep reading until it returns.
	Live func(ctx context.Context) error
	// LiveWant, when set, is called once Live returns: every reading
	// client must then receive that many live rows, within Timeout; the
	// rows a client is short of are counted in LiveMissing, and the client
	// as an error.
	LiveWant func() int64
	// LatencyColumn, when at least 2, is the 0-based output column whose
	// text starts with the wall-clock Unix nanoseconds at which the row was
	// written; live rows then yield write-to-client latencies.
	LatencyColumn int
	// Stalled clients, spread evenly over the storm, stop reading as soon
	// as their snapshot is complete (slow-client isolation); their live
	// rows and latencies are not counted.
	Stalled int
	// ResumeStalled, when set, has the stalled clients read again once
	// Live returns, each until it has received every live row: as many
	// distinct values of the IDColumn column as ResumeStalled returns,
	// within Timeout. A stalled client may cost others nothing, and must
	// lose nothing itself. The reading clients are waited for too (within
	// Timeout), until each has as many live rows or has failed.
	ResumeStalled func() int64
	// IDColumn is the 0-based output column of a live row's unique id,
	// for ResumeStalled.
	IDColumn int
	// StalledSQL runs on each stalled client's connection before the
	// storm (SET subscribe_max_buffered_bytes ...).
	StalledSQL []string
	// StalledRecvBuffer, when positive, is the SO_RCVBUF of each stalled
	// client's socket, set before it connects: a small receive window
	// keeps the kernel from absorbing what the client does not read, so
	// the server holds the backlog. Reading again, the client raises it
	// (readAgainRecvBuffer), as the kernel grows a reading client's.
	StalledRecvBuffer int
	// Server reads the server's CPU seconds before and after; zero: none.
	Server CPUProbe
	// MaxServerRSS, when positive (and Server.PID known), aborts the storm
	// when the server's RSS passes it, so that a runaway server cannot
	// exhaust a shared machine's memory. The result says so in Aborted.
	MaxServerRSS int64
	// GuardPIDs are more processes that MaxServerRSS applies to: the
	// upstream that does a tail process's dataflow work. Their RSS is not
	// reported.
	GuardPIDs []int
	// Settle is how long to wait after closing the connections before the
	// last CPU reading, so that the server's teardown is counted.
	Settle time.Duration
	// Status, when not nil, shows progress.
	Status *Status
	// Label names the storm on the status line.
	Label string
}

// Validate reports the first invalid field.
func (c *StormConfig) Validate() error {
	switch {
	case c.URL == "":
		return fmt.Errorf("%w: URL is empty", ErrConfig)
	case c.Clients < 1:
		return fmt.Errorf("%w: Clients must be at least 1, not %d", ErrConfig, c.Clients)
	case c.Relation == "" && len(c.Relations) == 0:
		return fmt.Errorf("%w: Relation is empty", ErrConfig)
	case c.Stalled < 0 || c.Stalled > c.Clients:
		return fmt.Errorf("%w: Stalled must be in [0, Clients], not %d", ErrConfig, c.Stalled)
	case c.Spread < 0 || c.Stay < 0 || c.Timeout < 0:
		return fmt.Errorf("%w: Spread, Stay and Timeout must not be negative", ErrConfig)
	}
	switch c.FastPath {
	case "", "default", "on", "off":
	default:
		return fmt.Errorf("%w: FastPath must be on, off or default, not %q", ErrConfig, c.FastPath)
	}
	if _, err := ParseMode(string(c.Mode)); err != nil {
		return err
	}
	return nil
}

func (c *StormConfig) setDefaults() {
	if c.Mode == "" {
		c.Mode = ModeCopy
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultStormTimeout
	}
	if c.ConnectConcurrency <= 0 {
		c.ConnectConcurrency = DefaultConnectConcurrency
	}
	if c.Settle == 0 {
		c.Settle = DefaultSettle
	}
	if c.Label == "" {
		c.Label = fmt.Sprintf("storm %s N=%d", c.Mode, c.Clients)
	}
}

// StormResult is what one storm measured. Times are in seconds, write
// latencies in milliseconds.
type StormResult struct {
	Clients  int    `json:"clients"`
	Mode     Mode   `json:"mode"`
	Relation string `json:"relation"`
	FastPath string `json:"fast_path"`

	Connected      int     `json:"connected"`
	ConnectSeconds float64 `json:"connect_seconds"`
	// Completed counts clients whose snapshot was complete.
	Completed int `json:"completed"`
	// Errors counts failed clients (connect, snapshot or live phase);
	// ErrorSamples shows the distinct messages with their counts.
	Errors       int            `json:"errors"`
	ErrorSamples map[string]int `json:"error_samples,omitempty"`
	SnapshotRows int64          `json:"snapshot_rows"`

	// Snapshot is statement to snapshot complete (the first progress row
	// after the client's as_of; for a SELECT, ReadyForQuery).
	Snapshot Dist `json:"snapshot"`
	// FirstRow is statement to the first snapshot row; LastRow to the
	// last.
	FirstRow Dist `json:"first_row"`
	LastRow  Dist `json:"last_row"`
	// StormSeconds is the first statement sent to the last snapshot
	// complete.
	StormSeconds float64 `json:"storm_seconds"`

	// ServerCPU is the server's CPU seconds from before the first connect
	// to after the last close (-1: not measured). ClientCPU is this
	// process's over the same window.
	ServerCPU float64 `json:"server_cpu_seconds"`
	ClientCPU float64 `json:"client_cpu_seconds"`
	// ServerPeakRSS is the server's largest RSS sampled (every 100 ms)
	// over the same window, when its pid is known; else 0.
	ServerPeakRSS int64 `json:"server_peak_rss_bytes,omitempty"`
	// ServerSysCPU is what of ServerCPU the server spent in the kernel,
	// when its pid is known (0: not measured). HostTCPPeak is the most
	// the host's TCP sockets held in the kernel (HostTCPMemory), sampled
	// with the RSS: the server's and the clients' on one machine.
	ServerSysCPU float64 `json:"server_sys_cpu_seconds,omitempty"`
	HostTCPPeak  int64   `json:"host_tcp_peak_bytes,omitempty"`

	// Live phase: rows received after the snapshots by the clients that
	// kept reading, and their write-to-client latencies (ms).
	LiveSeconds float64 `json:"live_seconds,omitempty"`
	LiveRows    int64   `json:"live_rows,omitempty"`
	// LiveMissing is the live rows that reading clients did not receive
	// (LiveWant); LiveWanted the rows each was to receive.
	LiveMissing int64 `json:"live_missing,omitempty"`
	LiveWanted  int64 `json:"live_wanted,omitempty"`
	Latency     Dist  `json:"latency_ms"`
	Stalled     int   `json:"stalled,omitempty"`
	// StalledComplete is how many stalled clients, reading again, received
	// every live row (ResumeStalled); StalledFailures why the others did
	// not, by count.
	StalledComplete int            `json:"stalled_complete,omitempty"`
	StalledFailures map[string]int `json:"stalled_failures,omitempty"`
	// PerConnection is what one connection holding its subscribe cost
	// the server, by ConnGaugeNames: each gauge's increase from before
	// the storm to when every snapshot was complete, ÷ the complete
	// snapshots ((a) only; nil when not scraped).
	PerConnection map[string]float64 `json:"per_connection,omitempty"`
	// Aborted says why the storm was cut short (MaxServerRSS), if it was.
	Aborted string `json:"aborted,omitempty"`
}

// stalledFailed counts a stalled client that did not get every row.
func (r *StormResult) stalledFailed(why string) {
	if r.StalledFailures == nil {
		r.StalledFailures = map[string]int{}
	}
	r.StalledFailures[normalizeError(why)]++
}

// ServerCPUPerClientMS is the server CPU per connected client in ms.
func (r *StormResult) ServerCPUPerClientMS() float64 {
	if r.ServerCPU < 0 || r.Connected == 0 {
		return -1
	}
	return r.ServerCPU * 1000 / float64(r.Connected)
}

// Storm runs one storm. It returns an error only when the storm could not
// run at all (bad config, cancelled); failed clients are counted in the
// result.
func Storm(parent context.Context, cfg StormConfig) (*StormResult, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pcfg, err := pgconn.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: URL: %v", ErrConfig, err)
	}
	pcfg.ConnectTimeout = cfg.Timeout
	res := &StormResult{Clients: cfg.Clients, Mode: cfg.Mode, Relation: cfg.Relation, FastPath: cfg.FastPath, ServerCPU: -1, Stalled: cfg.Stalled}
	if res.FastPath == "" {
		res.FastPath = "default"
	}
	// ctx is the storm's own: cancelled by the parent, or by the memory
	// guard (cause errRSS).
	ctx, abort := context.WithCancelCause(parent)
	defer abort(nil)
	probes := startProbes(ctx, &cfg, res, abort)
	// Stopped in finish, before the summary; also on a cancelled return.
	defer probes.stopRSS()

	s := &storm{cfg: &cfg, errs: newErrorCounter()}
	cfg.Status.Set(cfg.Label, func() string {
		return fmt.Sprintf("%d/%d connected, %d snapshots complete, %d failed",
			s.connected.Load(), cfg.Clients, s.completed.Load(), s.failed.Load())
	})
	connStart := time.Now()
	s.connectAll(ctx, pcfg)
	res.ConnectSeconds = time.Since(connStart).Seconds()
	stopClosing := context.AfterFunc(ctx, s.closeAll)
	defer stopClosing()

	snapWG, allWG, ph := s.start()
	s.waitSnapshots(snapWG)
	liveErr := s.livePhase(ctx, res, ph)
	allWG.Wait()
	s.closeAll()
	if parent.Err() != nil {
		return nil, parent.Err()
	}
	if ctx.Err() != nil {
		res.Aborted = context.Cause(ctx).Error()
	}
	probes.finish(parent, res)
	s.summarize(res)
	if liveErr != nil {
		return res, fmt.Errorf("live phase: %w", liveErr)
	}
	return res, nil
}

// stormProbes are a storm's measurements of the processes around it: the
// server's CPU (and this process's) from before the first connect to after
// the last close, and the RSS guard with its peak.
type stormProbes struct {
	cfg     *StormConfig
	cpu0    float64
	cpuErr  error
	sys0    float64
	sysErr  error
	self0   float64
	stopRSS func() // idempotent
}

// startProbes takes the first CPU readings and starts sampling the RSS of
// the server (and of cfg.GuardPIDs), calling abort when one passes
// cfg.MaxServerRSS.
func startProbes(ctx context.Context, cfg *StormConfig, res *StormResult, abort context.CancelCauseFunc) *stormProbes {
	p := &stormProbes{cfg: cfg, cpuErr: errors.New("no probe"), sysErr: errors.New("no pid")}
	if cfg.Server.Enabled() {
		p.cpu0, p.cpuErr = cfg.Server.Read(ctx)
	}
	if cfg.Server.PID > 0 && !cfg.Server.Tree {
		p.sys0, p.sysErr = ProcSysCPU(cfg.Server.PID)
	}
	p.self0 = SelfCPU()
	stopRSS := sampleRSS(cfg.Server.PID, &res.ServerPeakRSS, cfg.MaxServerRSS, func() {
		abort(fmt.Errorf("%w: over %s", errRSS, mib(float64(cfg.MaxServerRSS))))
	})
	stopServerRSS := stopRSS
	stopTCP := samplePeak(HostTCPMemory, &res.HostTCPPeak, 0, nil)
	stopRSS = func() { stopServerRSS(); stopTCP() }
	for _, pid := range cfg.GuardPIDs {
		var peak int64
		stopGuard := sampleRSS(pid, &peak, cfg.MaxServerRSS, func() {
			abort(fmt.Errorf("%w (pid %d): over %s", errRSS, pid, mib(float64(cfg.MaxServerRSS))))
		})
		stopServer := stopRSS
		stopRSS = func() { stopServer(); stopGuard() }
	}
	p.stopRSS = sync.OnceFunc(stopRSS)
	return p
}

// finish waits for the server's teardown (cfg.Settle), takes the last CPU
// readings into res and stops the RSS sampling.
func (p *stormProbes) finish(parent context.Context, res *StormResult) {
	sleepCtx(parent, p.cfg.Settle)
	if p.cpuErr == nil {
		if cpu1, err := p.cfg.Server.Read(parent); err == nil {
			res.ServerCPU = cpu1 - p.cpu0
		}
	}
	if p.sysErr == nil {
		if sys1, err := ProcSysCPU(p.cfg.Server.PID); err == nil {
			res.ServerSysCPU = sys1 - p.sys0
		}
	}
	res.ClientCPU = SelfCPU() - p.self0
	p.stopRSS()
}

// storm is one run of Storm: its clients, and the counts that its status
// line shows.
type storm struct {
	cfg     *StormConfig
	clients []*stormClient
	errs    *errorCounter

	connected, completed, failed atomic.Int64

	closeMu sync.Mutex // serializes closeAll
}

// connectAll is the connect phase: every client connects (and sets the
// path) before any statement is sent, at most cfg.ConnectConcurrency at a
// time. A client that fails keeps its error in err.
func (s *storm) connectAll(ctx context.Context, pcfg *pgconn.Config) {
	cfg := s.cfg
	s.clients = make([]*stormClient, cfg.Clients)
	var wg sync.WaitGroup
	sem := make(chan struct{}, cfg.ConnectConcurrency)
	for i := range s.clients {
		c := &stormClient{i: i, stalled: isStalled(i, cfg.Clients, cfg.Stalled)}
		s.clients[i] = c
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				c.err = ctx.Err()
				return
			}
			defer func() { <-sem }()
			if c.err = c.connect(ctx, pcfg, cfg); c.err == nil {
				s.connected.Add(1)
			} else {
				s.failed.Add(1)
			}
		})
	}
	wg.Wait()
}

// closeAll closes every connected client's connection; it runs when the
// storm's context ends (the memory guard) and at the end of the storm.
func (s *storm) closeAll() {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	for _, c := range s.clients {
		if c.conn != nil {
			c.conn.Close()
		}
	}
}

// start starts a goroutine per connected client, all waiting at one
// barrier, then opens it so that they go together. snapWG is done when
// every snapshot is complete or failed, allWG when every client has
// finished.
func (s *storm) start() (snapWG, allWG *sync.WaitGroup, ph *phases) {
	barrier := make(chan struct{})
	ph = &phases{liveDone: make(chan struct{}), resume: make(chan struct{})}
	snapWG, allWG = new(sync.WaitGroup), new(sync.WaitGroup)
	for _, c := range s.clients {
		if c.err != nil {
			s.errs.add("connect: " + c.err.Error())
			continue
		}
		snapWG.Add(1)
		if c.stalled {
			ph.stalled.Add(1)
		}
		allWG.Go(func() { c.run(s.cfg, barrier, snapWG, ph) })
	}
	close(barrier)
	return snapWG, allWG, ph
}

// waitSnapshots waits for every snapshot to be complete or failed,
// counting the outcomes for the status line meanwhile.
func (s *storm) waitSnapshots(snapWG *sync.WaitGroup) {
	waitDone := make(chan struct{})
	go func() { snapWG.Wait(); close(waitDone) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-waitDone:
			s.countOutcomes()
			return
		case <-tick.C:
			s.countOutcomes()
		}
	}
}

// countOutcomes counts the complete and the failed snapshots (a client
// that did not connect is failed) for the status line.
func (s *storm) countOutcomes() {
	var ok, bad int64
	for _, c := range s.clients {
		switch c.outcome.Load() {
		case outcomeComplete:
			ok++
		case outcomeFailed:
			bad++
		}
	}
	s.completed.Store(ok)
	s.failed.Store(bad + int64(s.cfg.Clients) - s.connected.Load())
}

// livePhase runs once every snapshot is complete: cfg.Live (or a sleep of
// cfg.Stay) while the clients read live rows, then the stalled clients
// reading again (cfg.ResumeStalled); it ends the clients' reads and
// returns Live's error.
func (s *storm) livePhase(ctx context.Context, res *StormResult, ph *phases) error {
	cfg := s.cfg
	var liveErr error
	liveStart := time.Now()
	if cfg.Live != nil || cfg.Stay > 0 {
		cfg.Status.Set(cfg.Label+": live phase", func() string {
			return fmt.Sprintf("%d snapshots complete, %d failed", s.completed.Load(), s.failed.Load())
		})
	}
	if ctx.Err() == nil {
		if cfg.Live != nil {
			liveErr = cfg.Live(ctx)
		} else if cfg.Stay > 0 {
			sleepCtx(ctx, cfg.Stay)
		}
	}
	res.LiveSeconds = time.Since(liveStart).Seconds()
	if cfg.LiveWant != nil && ctx.Err() == nil {
		res.LiveWanted = cfg.LiveWant()
		cfg.Status.Set(cfg.Label+": waiting for every live row", nil)
		s.waitReaders(ctx, res.LiveWanted)
	}
	if cfg.ResumeStalled != nil && ctx.Err() == nil {
		ph.want = cfg.ResumeStalled()
		cfg.Status.Set(cfg.Label+": stalled clients reading again", nil)
		close(ph.resume)
		ph.stalled.Wait()
		s.waitReaders(ctx, ph.want)
	}
	close(ph.liveDone)
	now := time.Now()
	for _, c := range s.clients {
		if c.conn != nil {
			c.conn.SetReadDeadline(now)
		}
	}
	return liveErr
}

// waitReaders waits, within cfg.Timeout, until every reading client has
// received want live rows or stopped reading.
func (s *storm) waitReaders(ctx context.Context, want int64) {
	deadline := time.Now().Add(s.cfg.Timeout)
	for _, c := range s.clients {
		for !c.stalled && c.reading.Load() && c.liveSeen.Load() < want && time.Now().Before(deadline) && ctx.Err() == nil {
			sleepCtx(ctx, 10*time.Millisecond)
		}
	}
}

// summarize fills res from the clients once all have finished.
func (s *storm) summarize(res *StormResult) {
	cfg, errs := s.cfg, s.errs
	var snaps, firsts, lasts, lats []float64
	var first, last time.Time
	for _, c := range s.clients {
		if c.err != nil {
			continue
		}
		res.Connected++
		if c.snapErr != nil {
			if c.stalled && cfg.ResumeStalled != nil && res.Aborted == "" {
				res.stalledFailed("snapshot: " + c.snapErr.Error())
			}
			if res.Aborted != "" {
				errs.add("aborted before the snapshot was complete")
			} else {
				errs.add(c.snapErr.Error())
			}
			continue
		}
		res.Completed++
		res.SnapshotRows += c.rows
		snaps = append(snaps, c.done.Sub(c.sent).Seconds())
		if c.rows > 0 {
			firsts = append(firsts, c.firstRow.Sub(c.sent).Seconds())
			lasts = append(lasts, c.lastRow.Sub(c.sent).Seconds())
		}
		if first.IsZero() || c.sent.Before(first) {
			first = c.sent
		}
		if c.done.After(last) {
			last = c.done
		}
		if c.liveErr != nil && res.Aborted == "" {
			// After an abort, every open connection was closed: not
			// the client's failure.
			errs.add("live: " + c.liveErr.Error())
		}
		if !c.stalled {
			res.LiveRows += c.liveRows
			lats = append(lats, c.lat...)
			if short := res.LiveWanted - c.liveRows; cfg.LiveWant != nil && short > 0 && res.Aborted == "" {
				res.LiveMissing += short
				if c.liveErr == nil {
					errs.add("live: rows missing")
				}
			}
		} else if cfg.ResumeStalled != nil && res.Aborted == "" {
			if c.resumeErr == nil {
				res.StalledComplete++
			} else {
				res.stalledFailed(c.resumeErr.Error())
			}
		}
	}
	if !first.IsZero() {
		res.StormSeconds = last.Sub(first).Seconds()
	}
	res.Snapshot, res.FirstRow, res.LastRow = NewDist(snaps), NewDist(firsts), NewDist(lasts)
	res.Latency = NewDist(lats)
	res.Errors, res.ErrorSamples = errs.total(), errs.samples()
}

// rssEvery is how often sampleRSS reads the server's RSS.
const rssEvery = 100 * time.Millisecond

// errRSS is the cause of a storm aborted by its memory guard.
var errRSS = errors.New("aborted: server RSS")

// sampleRSS records the peak RSS of pid into *peak until the returned stop
// is called (which waits for the sampler), calling over once when it passes
// limit (if positive). pid 0 samples nothing.
func sampleRSS(pid int, peak *int64, limit int64, over func()) (stop func()) {
	if pid <= 0 {
		return func() {}
	}
	return samplePeak(func() (int64, error) { return ProcRSS(pid) }, peak, limit, over)
}

// samplePeak keeps the largest value of read in *peak, sampling every
// rssEvery until stop, and calls over once the first time one passes limit
// (0: none).
func samplePeak(read func() (int64, error), peak *int64, limit int64, over func()) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(rssEvery)
		defer t.Stop()
		for {
			if v, err := read(); err == nil && v > *peak {
				*peak = v
				if limit > 0 && v > limit && over != nil {
					over()
					over = nil
				}
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-exited }
}

// isStalled spreads n stalled clients evenly over total.
func isStalled(i, total, n int) bool {
	return n > 0 && (i*n)/total != ((i+1)*n)/total
}

// stormClient is one connection of a storm. Its fields are written by its
// own goroutine and read by Storm after that goroutine has finished.
type stormClient struct {
	i       int
	stalled bool
	conn    net.Conn
	fe      *pgproto3.Frontend
	err     error // connect

	snapErr  error
	liveErr  error
	sent     time.Time
	done     time.Time
	firstRow time.Time
	lastRow  time.Time
	asOf     uint64
	haveAsOf bool
	complete bool
	rows     int64
	ready    int // ReadyForQuery messages seen
	liveRows int64
	lat      []float64
	// progress is the latest progress row's time: no row may come below it.
	progress uint64
	// liveSeen mirrors liveRows, and reading is set while the client reads
	// live rows, for the live phase's wait (waitReaders).
	liveSeen atomic.Int64
	reading  atomic.Bool

	// A stalled client reading again: the live row ids it received
	// (ResumeStalled), and how that ended.
	ids       map[uint64]bool
	dupIDs    int64
	resumeErr error

	outcome atomic.Int32 // outcome* constants, for the status line
}

func (c *stormClient) connect(ctx context.Context, pcfg *pgconn.Config, cfg *StormConfig) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	ccfg := pcfg.Copy()
	if n := cfg.StalledRecvBuffer; c.stalled && n > 0 {
		ccfg.DialFunc = recvBufferDialer(n)
	}
	pc, err := pgconn.ConnectConfig(ctx, ccfg)
	if err != nil {
		return err
	}
	if fp := cfg.FastPath; fp == "on" || fp == "off" {
		if _, err := pc.Exec(ctx, "SET enable_subscribe_persist_fast_path = "+fp).ReadAll(); err != nil {
			pc.Close(context.Background())
			return fmt.Errorf("set fast path: %w", err)
		}
	}
	for _, q := range cfg.StalledSQL {
		if !c.stalled {
			break
		}
		if _, err := pc.Exec(ctx, q).ReadAll(); err != nil {
			pc.Close(context.Background())
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	h, err := pc.Hijack()
	if err != nil {
		pc.Close(context.Background())
		return err
	}
	c.conn, c.fe = h.Conn, h.Frontend
	return nil
}

// recvBufferDialer dials with SO_RCVBUF set to n before connecting (the
// window scale is fixed at the handshake).
func recvBufferDialer(n int) pgconn.DialFunc {
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
		}); err != nil {
			return err
		}
		return serr
	}}
	return d.DialContext
}

// readAgainRecvBuffer is a stalled client's SO_RCVBUF once it reads
// again: with the few KiB it stalled with, every few KiB of its backlog
// would cost the server and the client a wakeup each. Its window stays
// within the 64 KiB the small buffer's handshake allowed (no window
// scale), which on loopback is no limit.
const readAgainRecvBuffer = 1 << 20

// Outcomes of a client's snapshot, as seen by the status line.
const (
	outcomePending int32 = iota
	outcomeComplete
	outcomeFailed
)

// phases are the storm's signals to its clients after the snapshots.
type phases struct {
	// resume is closed when the stalled clients are to read again, each
	// until it has want distinct live rows; stalled counts them down.
	resume  chan struct{}
	want    int64 // set before resume is closed
	stalled sync.WaitGroup
	// liveDone is closed at the end of the live phase.
	liveDone chan struct{}
}

// run is one client's life after connecting: wait at the barrier, send the
// statement, read the snapshot, then read live rows until liveDone (a
// stalled client: read nothing, then read again on resume).
func (c *stormClient) run(cfg *StormConfig, barrier <-chan struct{}, snapWG *sync.WaitGroup, ph *phases) {
	liveDone := ph.liveDone
	if c.stalled {
		defer ph.stalled.Done()
	}
	<-barrier
	if cfg.Spread > 0 {
		time.Sleep(time.Duration(int64(cfg.Spread) * int64(c.i) / int64(cfg.Clients)))
	}
	c.snapErr = c.snapshot(cfg)
	if c.snapErr != nil {
		c.outcome.Store(outcomeFailed)
	} else {
		c.outcome.Store(outcomeComplete)
		// Clear the deadline before signalling, so that Storm's
		// deadline at the end of the live phase is the one in force.
		c.conn.SetReadDeadline(time.Time{})
	}
	snapWG.Done()
	if c.snapErr != nil {
		return
	}
	if c.stalled {
		select {
		case <-ph.resume:
			c.resumeErr = c.readAgain(cfg, ph.want)
		case <-liveDone:
		}
		return
	}
	c.reading.Store(true)
	err := c.live(cfg)
	c.reading.Store(false)
	if err != nil {
		select {
		case <-liveDone:
			// The deadline set at the end of the live phase.
		default:
			c.liveErr = err
		}
	}
}

func (c *stormClient) snapshot(cfg *StormConfig) error {
	c.sent = time.Now()
	c.conn.SetDeadline(c.sent.Add(cfg.Timeout))
	rel := cfg.Relation
	switch {
	case cfg.RelationFor != nil:
		rel = cfg.RelationFor(c.i)
	case len(cfg.Relations) > 0:
		rel = cfg.Relations[c.i%len(cfg.Relations)]
	}
	switch cfg.Mode {
	case ModeCopy:
		c.fe.Send(&pgproto3.Query{String: "COPY (SUBSCRIBE " + rel + " WITH (PROGRESS)) TO STDOUT"})
	case ModeBare:
		c.fe.Send(&pgproto3.Query{String: "SUBSCRIBE " + rel + " WITH (PROGRESS)"})
	case ModeFetch:
		c.fe.Send(&pgproto3.Query{String: "BEGIN"})
		c.fe.Send(&pgproto3.Query{String: "DECLARE c CURSOR FOR SUBSCRIBE " + rel + " WITH (PROGRESS)"})
		c.fe.Send(&pgproto3.Query{String: "FETCH ALL c"})
	case ModeSelect:
		c.fe.Send(&pgproto3.Query{String: "SELECT * FROM " + rel})
	case ModeCopyTable:
		c.fe.Send(&pgproto3.Query{String: "COPY " + rel + " TO STDOUT"})
	}
	if err := c.fe.Flush(); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	for !c.complete {
		msg, err := c.fe.Receive()
		if err != nil {
			if isTimeout(err) {
				return fmt.Errorf("timeout: snapshot not complete after %v", cfg.Timeout)
			}
			return fmt.Errorf("receive: %w", err)
		}
		if err := c.handle(cfg, msg); err != nil {
			return err
		}
	}
	c.conn.SetWriteDeadline(time.Time{})
	if cfg.ExpectRows > 0 && c.rows != int64(cfg.ExpectRows) {
		return fmt.Errorf("snapshot has %d rows, want %d", c.rows, cfg.ExpectRows)
	}
	return nil
}

// readAgain is a stalled client reading again: until it has want distinct
// live row ids, within cfg.Timeout. A duplicate, an error or the timeout
// is its failure.
func (c *stormClient) readAgain(cfg *StormConfig, want int64) error {
	if cfg.StalledRecvBuffer > 0 {
		if err := sockopt.SetRecvBuffer(c.conn, readAgainRecvBuffer); err != nil {
			return fmt.Errorf("raise the receive buffer: %w", err)
		}
	}
	c.conn.SetReadDeadline(time.Now().Add(cfg.Timeout))
	for int64(len(c.ids)) < want {
		msg, err := c.fe.Receive()
		if err != nil {
			if isTimeout(err) {
				return fmt.Errorf("received %d of %d rows in %v", len(c.ids), want, cfg.Timeout)
			}
			return err
		}
		if err := c.handle(cfg, msg); err != nil {
			return err
		}
	}
	if c.dupIDs > 0 {
		return fmt.Errorf("received %d rows twice", c.dupIDs)
	}
	return nil
}

func (c *stormClient) live(cfg *StormConfig) error {
	if cfg.Mode == ModeSelect || cfg.Mode == ModeCopyTable {
		// A plain query has no live phase: hold the connection idle.
		var b [1]byte
		_, err := c.conn.Read(b[:])
		return err
	}
	for {
		msg, err := c.fe.Receive()
		if err != nil {
			return err
		}
		if err := c.handle(cfg, msg); err != nil {
			return err
		}
	}
}

// errEnded means the server ended a subscribe that has no UP TO.
var errEnded = errors.New("the server ended the subscribe")

// handle processes one message; received messages are valid only until the
// next Receive, so nothing here keeps their bytes.
func (c *stormClient) handle(cfg *StormConfig, msg pgproto3.BackendMessage) error {
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		if cfg.Mode == ModeCopyTable {
			c.plainRow()
			return nil
		}
		ts, rest := cutTab(m.Data)
		prog, rest := cutTab(rest)
		var lat, id []byte
		if cfg.LatencyColumn >= 2 {
			lat = nthField(rest, cfg.LatencyColumn-2)
		}
		if c.stalled && cfg.IDColumn >= 2 {
			id = nthField(rest, cfg.IDColumn-2)
		}
		return c.row(ts, prog, lat, id)
	case *pgproto3.DataRow:
		if cfg.Mode == ModeSelect {
			c.plainRow()
			return nil
		}
		if len(m.Values) < 2 {
			return fmt.Errorf("a row of %d columns; want mz_timestamp, mz_progressed, ...", len(m.Values))
		}
		var lat, id []byte
		if k := cfg.LatencyColumn; k >= 2 && k < len(m.Values) {
			lat = m.Values[k]
		}
		if k := cfg.IDColumn; c.stalled && k >= 2 && k < len(m.Values) {
			id = m.Values[k]
		}
		return c.row(m.Values[0], m.Values[1], lat, id)
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("server error %s: %s", m.Code, m.Message)
	case *pgproto3.ReadyForQuery:
		c.ready++
		switch cfg.Mode {
		case ModeSelect, ModeCopyTable:
			c.complete, c.done = true, time.Now()
		case ModeFetch:
			if c.ready >= 3 { // after BEGIN, DECLARE and each FETCH
				c.fe.Send(&pgproto3.Query{String: "FETCH ALL c"})
				return c.fe.Flush()
			}
		default:
			return errEnded
		}
	}
	return nil
}

// nthField is the n-th (0-based) tab-separated field of b.
func nthField(b []byte, n int) []byte {
	for range n {
		_, b = cutTab(b)
	}
	f, _ := cutTab(b)
	return f
}

// row processes one SUBSCRIBE output row given its first two columns and,
// when measuring latency, the payload column; id is a stalled client's
// live row id (nil otherwise).
func (c *stormClient) row(tsText, prog, lat, id []byte) error {
	ts, ok := parseUint(tsText)
	if !ok {
		return fmt.Errorf("mz_timestamp %q is not a number", tsText)
	}
	progressed := len(prog) == 1 && prog[0] == 't'
	switch {
	case !c.haveAsOf:
		if !progressed {
			return errors.New("the first row is not a progress row")
		}
		c.asOf, c.haveAsOf, c.progress = ts, true, ts
	case progressed:
		if ts < c.progress {
			return fmt.Errorf("progress went back from %d to %d", c.progress, ts)
		}
		c.progress = ts
		if !c.complete && ts > c.asOf {
			c.complete, c.done = true, time.Now()
		}
		return nil
	case ts < c.progress:
		return fmt.Errorf("a row at %d after progress to %d: out of order", ts, c.progress)
	case !c.complete:
		if ts != c.asOf {
			return fmt.Errorf("snapshot row at %d, as_of %d", ts, c.asOf)
		}
		c.plainRow()
	default:
		c.liveRows++
		c.liveSeen.Store(c.liveRows)
		if written, ok := parseUintPrefix(lat); ok {
			c.lat = append(c.lat, float64(time.Now().UnixNano()-int64(written))/1e6)
		}
		if v, ok := parseUint(id); ok {
			if c.ids == nil {
				c.ids = map[uint64]bool{}
			}
			if c.ids[v] {
				c.dupIDs++
			}
			c.ids[v] = true
		}
	}
	return nil
}

// plainRow counts one snapshot row.
func (c *stormClient) plainRow() {
	now := time.Now()
	if c.rows == 0 {
		c.firstRow = now
	}
	c.rows++
	c.lastRow = now
}

// cutTab splits a COPY text line at its first tab.
func cutTab(b []byte) (field, rest []byte) {
	for i, x := range b {
		if x == '\t' {
			return b[:i], b[i+1:]
		}
	}
	return b, nil
}

// parseUint parses a whole decimal number without allocating.
func parseUint(b []byte) (uint64, bool) {
	v, ok := parseUintPrefix(b)
	if !ok {
		return 0, false
	}
	for _, x := range b {
		if x < '0' || x > '9' {
			return 0, false
		}
	}
	return v, true
}

// parseUintPrefix parses the leading decimal digits of b.
func parseUintPrefix(b []byte) (uint64, bool) {
	var v uint64
	n := 0
	for _, x := range b {
		if x < '0' || x > '9' {
			break
		}
		v = v*10 + uint64(x-'0')
		n++
	}
	return v, n > 0 && n <= 19
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// errorCounter counts failures by message.
type errorCounter struct {
	mu sync.Mutex
	m  map[string]int // mu must be held.
	n  int            // mu must be held.
}

func newErrorCounter() *errorCounter { return &errorCounter{m: map[string]int{}} }

func (e *errorCounter) add(msg string) {
	msg = normalizeError(msg)
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if _, ok := e.m[msg]; ok || len(e.m) < 8 {
		e.m[msg]++
	}
}

func (e *errorCounter) total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

func (e *errorCounter) samples() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.m) == 0 {
		return nil
	}
	out := make(map[string]int, len(e.m))
	for k, v := range e.m {
		out[k] = v
	}
	return out
}

// tcpAddrs matches the socket addresses in net errors, which would make
// every client's message distinct.
var tcpAddrs = regexp.MustCompile(`tcp [0-9.:\[\]a-f]+->[0-9.:\[\]a-f]*[0-9\]]`)

func normalizeError(msg string) string { return tcpAddrs.ReplaceAllString(msg, "tcp") }

// SortedErrors returns error samples most frequent first.
func SortedErrors(in map[string]int) []string {
	m := map[string]int{}
	for k, v := range in {
		m[normalizeError(k)] += v
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%d× %s", m[k], k)
	}
	return out
}
