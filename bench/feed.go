package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/klauspost/compress/gzip"
)

// FeedResult is (i): the HTTP change feed's storms next to pgwire's on the
// same server and view, and its idle subscribers' memory.
type FeedResult struct {
	// Clients is each storm's size; Rows the view's; Changes the rows
	// the writer updated between the resume point and the end.
	Clients int `json:"clients"`
	Rows    int `json:"rows"`
	Changes int `json:"changes"`
	// ResumeRows is what one resuming client receives: the changes' rows
	// (a retraction and an insertion each).
	ResumeRows int `json:"resume_rows"`
	// Storms are the four storms by FeedStorms' names: each one's run of
	// median server CPU per client.
	Storms map[string]*FeedStorm `json:"storms"`
	// StormRuns are every run of each storm (SuiteConfig.Runs), by name.
	// The runs take turns, run i of each storm after run i of the one
	// before it, so that a pgwire storm is measured next to the SSE storm
	// it is compared with: the ratio of a run is of two storms seconds
	// apart. Reports from before runs have Storms only.
	StormRuns map[string][]*FeedStorm `json:"storm_runs,omitempty"`
	// Idle subscribers over SSE: server RSS before (after one warm-up
	// stream) and with IdleClients streams idle, and per subscriber.
	IdleClients int     `json:"idle_clients"`
	IdleOpen    int     `json:"idle_open"`
	IdleErrors  int     `json:"idle_errors"`
	RSSBefore   int64   `json:"rss_before_bytes"`
	RSSIdle     int64   `json:"rss_idle_bytes"`
	PerClientKB float64 `json:"per_subscriber_kib"`
}

// FeedStorms are (i)'s storms, in report order: a resume from the
// frontier before the changes (SSE Last-Event-ID; pgwire AS OF F-1 WITH
// (SNAPSHOT = false)) and a fresh snapshot, each over SSE and over pgwire
// (COPY (SUBSCRIBE ...) TO STDOUT), all ending at UP TO the frontier
// after the changes. An SSE client asks for gzip (Accept-Encoding: gzip),
// as browsers' EventSource does, and decodes it; an sse-identity client
// does not (curl without --compressed).
var FeedStorms = []string{"resume/sse", "resume/pgwire", "resume/sse-identity", "snapshot/sse", "snapshot/pgwire", "snapshot/sse-identity"}

// sseIdentity is the suffix of the storms whose SSE clients do not ask
// for compression.
const sseIdentity = "/sse-identity"

// FeedStorm is one storm of (i). Times are seconds from the start barrier:
// every client is connected first (an SSE client by a GET / on its own
// Transport, whose connection the stream then reuses), as pgwire's are.
type FeedStorm struct {
	Clients      int            `json:"clients"`
	Completed    int            `json:"completed"`
	Errors       int            `json:"errors"`
	ErrorSamples map[string]int `json:"error_samples,omitempty"`
	// Latency is request to the stream's end (SSE event: end; pgwire the
	// COPY's CommandComplete) per client.
	Latency Dist `json:"latency"`
	// StormSeconds is the barrier to the last client's end.
	StormSeconds float64 `json:"storm_seconds"`
	// ServerCPU is the server's CPU seconds from the barrier to the last
	// end (connects excluded).
	ServerCPU float64 `json:"server_cpu_seconds"`
	// BaselineCPU is what of ServerCPU the server would have spent
	// without the storm: its CPU rate over feedBaseline just before the
	// barrier (connected clients idle), times the storm's length. The
	// server's own background work (the view's maintenance, persist) may
	// take up to 15% of a core after quiesce, as much as a few hundred
	// clients cost, and a storm that runs longer on the clients' side
	// would be charged more of it.
	BaselineCPU float64 `json:"baseline_cpu_seconds,omitempty"`
	// BytesPerClient is what a client that completed read from its
	// connection (HTTP head and body as sent, compressed or not; pgwire's
	// messages) over the storm, on average; 0 in reports from before it.
	BytesPerClient float64 `json:"bytes_per_client,omitempty"`
	// ClientCPU is the load generator's CPU seconds over the same span as
	// ServerCPU (every client of the storm: reading, and for an sse
	// client inflating gzip); 0 in reports from before it.
	ClientCPU float64 `json:"client_cpu_seconds,omitempty"`
}

// runs returns every run of storm name (the one in Storms for a report
// from before StormRuns).
func (f *FeedResult) runs(name string) []*FeedStorm {
	return orRuns(f.StormRuns[name], f.Storms[name])
}

// CPURatios returns the SSE storm's server CPU per client over the pgwire
// storm's, run by run, for kind "resume" or "snapshot". A run either storm
// of which had errors or no CPU figure has no ratio.
func (f *FeedResult) CPURatios(kind string) []float64 {
	return f.cpuRatios(kind+"/sse", kind+"/pgwire")
}

// cpuRatios is CPURatios of the SSE storm named sseName over pgName.
func (f *FeedResult) cpuRatios(sseName, pgName string) []float64 {
	sse, pg := f.runs(sseName), f.runs(pgName)
	var out []float64
	for i := range min(len(sse), len(pg)) {
		s, p := sse[i], pg[i]
		if s.Errors == 0 && p.Errors == 0 && s.CPUPerClientMS() >= 0 && p.CPUPerClientMS() > 0 {
			out = append(out, s.CPUPerClientMS()/p.CPUPerClientMS())
		}
	}
	return out
}

// ratioSpread is the runs' SSE ÷ pgwire server CPU per client of the SSE
// storm sseName ("resume/sse", "snapshot/sse-identity", ...), against the
// pgwire storm of its kind.
func (f *FeedResult) ratioSpread(sseName string) spread {
	kind, _, _ := strings.Cut(sseName, "/")
	return spreadValues(f.cpuRatios(sseName, kind+"/pgwire"))
}

// CPUPerClientMS is the server CPU per client in ms, the baseline taken
// out (-1: not measured).
func (s *FeedStorm) CPUPerClientMS() float64 {
	if s == nil || s.ServerCPU < 0 || s.Clients == 0 {
		return -1
	}
	return max(s.ServerCPU-s.BaselineCPU, 0) * 1000 / float64(s.Clients)
}

// ClientCPUPerClientMS is the load generator's CPU per client in ms (-1:
// not measured).
func (s *FeedStorm) ClientCPUPerClientMS() float64 {
	if s == nil || s.ClientCPU <= 0 || s.Clients == 0 {
		return -1
	}
	return s.ClientCPU * 1000 / float64(s.Clients)
}

// feedBaseline is how long (i) measures the server's CPU rate before a
// storm's barrier (FeedStorm.BaselineCPU).
const feedBaseline = time.Second

// feedWriteBatch is how many rows each UPDATE of (i)'s writer changes.
const feedWriteBatch = 100

// feedCatchUp bounds waiting for the view to show every change.
const feedCatchUp = 2 * time.Minute

// runFeed measures (i) on srv (started with ServerOptions.Feed), whose
// viewSmall holds cfg.SmallRows rows: it opens the idle subscribers, then
// updates cfg.FeedChanges rows of tableSmall and runs the storms of
// clients clients each.
func runFeed(ctx context.Context, cfg *SuiteConfig, srv *Server, clients, idle int, label string) (*FeedResult, error) {
	if srv.FeedAddr == "" {
		return nil, fmt.Errorf("%w: the server has no feed", ErrConfig)
	}
	fr := &FeedResult{Clients: clients, Rows: cfg.SmallRows, Changes: cfg.FeedChanges, IdleClients: idle, Storms: map[string]*FeedStorm{}}
	base := "http://" + srv.FeedAddr
	// The idle streams first, on the fresh server: after the storms, the
	// heap they grew is returned to the system while the idle streams
	// open, and RSS with them came out below RSS before them.
	if err := feedIdle(ctx, cfg, srv, base, fr, label); err != nil {
		return fr, err
	}
	quiesce(ctx, srv.CPU(), cfg.Status, label+": waiting for the server to idle")
	// The storms read from before the changes, minutes later.
	if err := execSQL(ctx, srv.URL, "ALTER MATERIALIZED VIEW "+viewSmall+" SET (RETAIN HISTORY FOR '1 hour')"); err != nil {
		return nil, err
	}
	before, err := feedFrontier(ctx, base, viewSmall)
	if err != nil {
		return nil, err
	}
	cfg.Status.Set(label+": writing the changes", nil)
	for lo := 1; lo <= cfg.FeedChanges; lo += feedWriteBatch {
		hi := min(lo+feedWriteBatch-1, cfg.FeedChanges)
		stmt := fmt.Sprintf("UPDATE %s SET payload = 'changed-%d' || payload WHERE id BETWEEN %d AND %d", tableSmall, before, lo, hi)
		if err := execSQL(ctx, srv.URL, stmt); err != nil {
			return nil, err
		}
	}
	// The view catches up with the table asynchronously: wait until a
	// resume from before up to the view's frontier holds every change.
	cfg.Status.Set(label+": waiting for the view to show the changes", nil)
	var end uint64
	deadline := time.Now().Add(feedCatchUp)
	for {
		if end, err = feedFrontier(ctx, base, viewSmall); err != nil {
			return nil, err
		}
		rows, err := sseRows(ctx, http.DefaultClient, resumeRequest(ctx, base, before, end))
		if err != nil {
			return nil, err
		}
		fr.ResumeRows = rows
		if rows >= 2*cfg.FeedChanges {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the view shows %d of %d changed rows after %v", rows, 2*cfg.FeedChanges, feedCatchUp)
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	resume := func(ctx context.Context) *http.Request { return resumeRequest(ctx, base, before, end) }
	snapshot := func(ctx context.Context) *http.Request {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/subscribe/%s?as_of=%d&up_to=%d", base, viewSmall, end-1, end), nil)
		return req
	}
	storms := map[string]func(context.Context) *feedStormRun{
		"resume/sse": func(ctx context.Context) *feedStormRun {
			return sseStorm(ctx, srv.CPU(), clients, resume, true)
		},
		"resume/sse-identity": func(ctx context.Context) *feedStormRun {
			return sseStorm(ctx, srv.CPU(), clients, resume, false)
		},
		"resume/pgwire": func(ctx context.Context) *feedStormRun {
			return pgwireStorm(ctx, srv.CPU(), srv.URL, clients, fmt.Sprintf("COPY (SUBSCRIBE %s WITH (SNAPSHOT = false, PROGRESS) AS OF %d UP TO %d) TO STDOUT", viewSmall, before-1, end))
		},
		"snapshot/sse": func(ctx context.Context) *feedStormRun {
			return sseStorm(ctx, srv.CPU(), clients, snapshot, true)
		},
		"snapshot/sse-identity": func(ctx context.Context) *feedStormRun {
			return sseStorm(ctx, srv.CPU(), clients, snapshot, false)
		},
		"snapshot/pgwire": func(ctx context.Context) *feedStormRun {
			return pgwireStorm(ctx, srv.CPU(), srv.URL, clients, fmt.Sprintf("COPY (SUBSCRIBE %s WITH (PROGRESS) AS OF %d UP TO %d) TO STDOUT", viewSmall, end-1, end))
		},
	}
	fr.StormRuns = map[string][]*FeedStorm{}
	for run := range cfg.Runs {
		for _, name := range FeedStorms {
			quiesce(ctx, srv.CPU(), cfg.Status, label+": waiting for the server to idle")
			cfg.Status.Set(fmt.Sprintf("%s: %s storm, %d clients%s", label, name, clients, runLabel(run, cfg.Runs)), nil)
			sctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			r := storms[name](sctx).result()
			cancel()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			fr.StormRuns[name] = append(fr.StormRuns[name], r)
			cfg.Status.Logf("%s%s: %s", label, runLabel(run, cfg.Runs), feedStormLine(name, r))
		}
	}
	for _, name := range FeedStorms {
		fr.Storms[name] = medianRun(fr.StormRuns[name], (*FeedStorm).CPUPerClientMS)
	}
	return fr, nil
}

// feedFrontier is the frontier of a live=false snapshot of rel: the
// latest closed time the feed would start a stream at.
func feedFrontier(ctx context.Context, base, rel string) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/subscribe/"+rel+"?live=false", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("feed snapshot of %s: %s", rel, resp.Status)
	}
	return strconv.ParseUint(resp.Header.Get("Shardtail-Frontier"), 10, 64)
}

// resumeRequest is an EventSource's reconnect after before, up to end.
func resumeRequest(ctx context.Context, base string, before, end uint64) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/subscribe/%s?up_to=%d", base, viewSmall, end), nil)
	req.Header.Set("Last-Event-ID", strconv.FormatUint(before, 10))
	return req
}

// Lines of an SSE stream that the bench's clients look for.
var (
	sseEnd      = []byte("event: end")
	sseProgress = []byte("event: progress")
	sseRowsEv   = []byte("event: rows")
	sseDiff     = []byte(`"mz_diff"`)
)

// readSSE reads an SSE stream until the event named by stop begins,
// without keeping lines (the clients share the server's cores), and
// returns how many row objects it saw when count (their mz_diff fields).
func readSSE(r *bufio.Reader, stop []byte, count bool) (int, error) {
	rows, start, inRows := 0, true, false
	for {
		line, err := r.ReadSlice('\n')
		if start {
			switch {
			case bytes.HasPrefix(line, stop):
				return rows, nil
			case bytes.HasPrefix(line, []byte("event: reset")), bytes.HasPrefix(line, []byte("event: error")):
				ev := string(bytes.TrimSpace(line)) // before the next read reuses the buffer
				rest, _ := r.ReadSlice('\n')
				return rows, fmt.Errorf("%s %s", ev, bytes.TrimSpace(rest))
			case bytes.HasPrefix(line, []byte("event: ")):
				inRows = bytes.HasPrefix(line, sseRowsEv)
			}
		}
		if count && inRows {
			rows += bytes.Count(line, sseDiff) // a field split across reads is missed: count only in a probe
		}
		switch {
		case err == bufio.ErrBufferFull:
			start = false
		case err != nil:
			return rows, fmt.Errorf("before %s: %w", stop, err)
		default:
			start = true
		}
	}
}

// sseRows runs req to its end event and returns the rows it carried.
func sseRows(ctx context.Context, c *http.Client, req *http.Request) (int, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("feed: %s", resp.Status)
	}
	// Lines whole (1 MiB): a rows event of a snapshot piece is one line.
	return readSSE(bufio.NewReaderSize(resp.Body, 1<<20), sseEnd, true)
}

// feedStormRun is what a storm's clients measured, before the summary.
type feedStormRun struct {
	clients  int
	lats     []float64
	errs     *errorCounter
	storm    float64
	cpu      float64
	cpuKnown bool
	baseline float64 // CPU seconds the server spends per second without the storm
	bytes    int64   // read by the clients that completed, over their runs
	self     float64 // the load generator's CPU seconds over the runs
}

func (r *feedStormRun) result() *FeedStorm {
	s := &FeedStorm{Clients: r.clients, Completed: len(r.lats), Errors: r.errs.total(), ErrorSamples: r.errs.samples(),
		Latency: NewDist(r.lats), StormSeconds: r.storm, ServerCPU: -1, ClientCPU: r.self}
	if len(r.lats) > 0 {
		s.BytesPerClient = float64(r.bytes) / float64(len(r.lats))
	}
	if r.cpuKnown {
		s.ServerCPU = r.cpu
		s.BaselineCPU = r.baseline * r.storm
	}
	return s
}

// countingConn counts the bytes a client reads from its connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// countingDial dials as a net.Dialer does, the connection counting what
// is read from it in n.
func countingDial(n *atomic.Int64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, n}, nil
	}
}

// barrierStorm connects n clients (connect), then starts them at once
// (run) and times each to its end, with the server's CPU over the runs
// and the bytes each client read over its run (read[i], which client i's
// connection counts).
func barrierStorm(ctx context.Context, cpu CPUProbe, n int, read []atomic.Int64, connect func(i int) error, run func(i int) error) *feedStormRun {
	res := &feedStormRun{clients: n, errs: newErrorCounter()}
	var readTotal atomic.Int64
	ok := make([]bool, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32) // connect 32 at a time, as a pool would
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := connect(i); err != nil {
				res.errs.add("connect: " + err.Error())
				return
			}
			ok[i] = true
		})
	}
	wg.Wait()
	var mu sync.Mutex
	barrier := make(chan struct{})
	var last atomic.Int64
	// The server's rate without the storm, its clients connected.
	if b0, err := cpu.Read(ctx); err == nil {
		sleepCtx(ctx, feedBaseline)
		if b1, err := cpu.Read(ctx); err == nil {
			res.baseline = max(b1-b0, 0) / feedBaseline.Seconds()
		}
	}
	cpu0, cpuErr := cpu.Read(ctx)
	self0 := SelfCPU()
	start := time.Now()
	for i := range n {
		if !ok[i] {
			continue
		}
		wg.Go(func() {
			<-barrier
			read0 := read[i].Load()
			err := run(i)
			d := time.Since(start)
			if err != nil {
				res.errs.add(err.Error())
				return
			}
			readTotal.Add(read[i].Load() - read0)
			for {
				l := last.Load()
				if int64(d) <= l || last.CompareAndSwap(l, int64(d)) {
					break
				}
			}
			mu.Lock()
			res.lats = append(res.lats, d.Seconds())
			mu.Unlock()
		})
	}
	close(barrier)
	wg.Wait()
	res.self = SelfCPU() - self0
	if cpu1, err := cpu.Read(ctx); err == nil && cpuErr == nil {
		res.cpu, res.cpuKnown = cpu1-cpu0, true
	}
	res.storm = time.Duration(last.Load()).Seconds()
	res.bytes = readTotal.Load()
	return res
}

// sseStorm runs n SSE clients, each on its own http.Transport (its own
// connection, as n browsers), reading newReq's stream to event: end. With
// compressed, a client asks for gzip, as a browser does, and decodes the
// stream as it reads it (a stream that is not compressed then fails).
func sseStorm(ctx context.Context, cpu CPUProbe, n int, newReq func(context.Context) *http.Request, compressed bool) *feedStormRun {
	clients := make([]*http.Client, n)
	read := make([]atomic.Int64, n)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.CloseIdleConnections()
			}
		}
	}()
	base := newReq(ctx).URL
	root := base.Scheme + "://" + base.Host + "/"
	return barrierStorm(ctx, cpu, n, read, func(i int) error {
		// DisableCompression: the client's own Accept-Encoding, and its
		// own decoding.
		clients[i] = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true, DialContext: countingDial(&read[i])}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, root, nil)
		resp, err := clients[i].Do(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return err
	}, func(i int) error {
		req := newReq(ctx)
		if compressed {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		resp, err := clients[i].Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("feed: %s", resp.Status)
		}
		var body io.Reader = resp.Body
		if enc := resp.Header.Get("Content-Encoding"); compressed != (enc == "gzip") {
			return fmt.Errorf("feed: Content-Encoding %q (gzip asked: %v)", enc, compressed)
		}
		if compressed {
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				return err
			}
			defer zr.Close()
			body = zr
		}
		_, err = readSSE(bufio.NewReaderSize(body, 64<<10), sseEnd, false)
		return err
	})
}

// pgwireStorm runs n pgwire clients, each COPY sql TO io.Discard.
func pgwireStorm(ctx context.Context, cpu CPUProbe, url string, n int, sql string) *feedStormRun {
	conns := make([]*pgconn.PgConn, n)
	read := make([]atomic.Int64, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close(context.Background())
			}
		}
	}()
	return barrierStorm(ctx, cpu, n, read, func(i int) error {
		pc, err := pgconn.ParseConfig(url)
		if err != nil {
			return err
		}
		pc.DialFunc = countingDial(&read[i])
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conns[i], err = pgconn.ConnectConfig(cctx, pc)
		return err
	}, func(i int) error {
		_, err := conns[i].CopyTo(ctx, io.Discard, sql)
		return err
	})
}

// feedIdle opens fr.IdleClients SSE streams on tableIdle, each on its
// own Transport, waits for each one's first progress event (snapshot
// complete), lets them idle and reads the server's RSS.
func feedIdle(ctx context.Context, cfg *SuiteConfig, srv *Server, base string, fr *FeedResult, label string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before the Wait: the streams end with ctx
	open := func() (*http.Response, error) {
		c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/subscribe/"+tableIdle, nil)
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("feed: %s", resp.Status)
		}
		r := bufio.NewReaderSize(resp.Body, 4<<10)
		if _, err := readSSE(r, sseProgress, false); err != nil {
			resp.Body.Close()
			return nil, err
		}
		// Idle: read on (heartbeats) until ctx ends the stream.
		wg.Go(func() {
			defer resp.Body.Close()
			io.Copy(io.Discard, r)
		})
		return resp, nil
	}
	// One stream first, so that one-time costs are in the baseline.
	if _, err := open(); err != nil {
		return fmt.Errorf("idle warm-up stream: %w", err)
	}
	sleepCtx(ctx, time.Second)
	var err error
	if fr.RSSBefore, err = srv.RSS(); err != nil {
		return err
	}
	var opened, failed atomic.Int64
	cfg.Status.Set(label+": idle SSE subscribers", func() string {
		return fmt.Sprintf("%d/%d open, %d failed", opened.Load(), fr.IdleClients, failed.Load())
	})
	sem := make(chan struct{}, 64)
	var ow sync.WaitGroup
	for range fr.IdleClients {
		ow.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := open(); err != nil {
				if ctx.Err() == nil {
					failed.Add(1)
				}
				return
			}
			opened.Add(1)
		})
	}
	ow.Wait()
	fr.IdleOpen, fr.IdleErrors = int(opened.Load()), int(failed.Load())
	sleepCtx(ctx, memorySettle)
	if fr.RSSIdle, err = srv.RSS(); err != nil {
		return err
	}
	fr.PerClientKB = -1
	if fr.IdleOpen > 0 {
		fr.PerClientKB = float64(fr.RSSIdle-fr.RSSBefore) / 1024 / float64(fr.IdleOpen)
	}
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	return nil
}

// feedStormLine summarises a storm of (i) for the log.
func feedStormLine(name string, s *FeedStorm) string {
	return fmt.Sprintf("%s: %d/%d ended, p50 %s, p95 %s, storm %s, server CPU %s/client (%.3f s, baseline %.3f s taken out), client CPU %s/client, %s read per client",
		name, s.Completed, s.Clients, secs(s.Latency.P50), secs(s.Latency.P95), secs(s.StormSeconds), strings.TrimSpace(msRaw(s.CPUPerClientMS())),
		s.ServerCPU, s.BaselineCPU, strings.TrimSpace(msRaw(s.ClientCPUPerClientMS())), bytesText(s.BytesPerClient))
}

// writeFeedSection writes (i), the HTTP change feed next to pgwire, when
// it ran.
func writeFeedSection(w io.Writer, v *reportView) {
	cfg := v.r.Config
	var prs []*PathResults
	for _, pr := range []*PathResults{v.fast, v.flow} {
		if pr != nil && pr.Feed != nil {
			prs = append(prs, pr)
		}
	}
	if len(prs) == 0 {
		return
	}
	fmt.Fprintf(w, "## (i) The HTTP change feed (SSE) next to pgwire\n\n")
	if cfg.FeedClients < DefaultSuite(false).FeedClients || cfg.FeedIdleClients < DefaultSuite(false).FeedIdleClients {
		fmt.Fprintf(w, "**Scaled down**: %s clients per storm and %s idle streams (the issue's run is %s and %s).\n\n",
			commas(cfg.FeedClients), commas(cfg.FeedIdleClients), commas(DefaultSuite(false).FeedClients), commas(DefaultSuite(false).FeedIdleClients))
	}
	// Reports from before compression have no identity storms: their
	// SSE clients did not ask for it.
	encoding := "it asks for no compression; "
	for _, pr := range prs {
		if len(pr.Feed.runs(FeedStorms[2])) > 0 {
			encoding = "an *sse* client asks for gzip (`Accept-Encoding: gzip`, as browsers' EventSource does) and decodes the stream as it reads it, " +
				"an *sse-identity* client does not ask (curl without `--compressed`); "
		}
	}
	fmt.Fprintf(w, "On a fresh server, %s rows of `%s` are updated (UPDATE of %d rows at a time; the view retains an hour of history) after the resume point F0, and once `%s` shows them "+
		"(at F1), each storm starts its clients at once, all connected first: an SSE client is a net/http client on its own Transport "+
		"(one connection, as one browser) whose stream reuses the connection of a `GET /`; "+encoding+
		"a pgwire client is a pgconn connection that "+
		"runs `COPY (...) TO STDOUT`. *resume* reconnects after F0 (`Last-Event-ID: F0`; pgwire `SUBSCRIBE %s WITH (SNAPSHOT = false, PROGRESS) "+
		"AS OF F0-1 UP TO F1`), *snapshot* takes the whole view (`as_of=F1-1&up_to=F1`; pgwire `AS OF F1-1 UP TO F1`); each reads to the "+
		"stream's end (`event: end`; the COPY's end). Times are from the start to a client's end; server CPU is over the storm, connects "+
		"excluded; client CPU is the load generator's (all its clients: reading, and inflating gzip) over the same span; bytes per client are what a client read from its connection over the storm (the HTTP head and the body as sent; pgwire's messages).\n\n", commas(cfg.FeedChanges), tableSmall, feedWriteBatch, viewSmall, viewSmall)
	for _, pr := range prs {
		f := pr.Feed
		fmt.Fprintf(w, "**%s path**: %s clients per storm on %s rows; a resuming client receives %s rows.\n\n",
			pr.Path, commas(f.Clients), commas(f.Rows), commas(f.ResumeRows))
		if n := len(f.runs(FeedStorms[0])); n > 1 {
			fmt.Fprintf(w, "Each storm ran %d times, taking turns (run i of each storm after run i of the one before); each figure is the median with min–max, "+
				"and the ratio the median of the runs' ratios (an SSE storm over the pgwire storm that followed it).\n\n", n)
		}
		fmt.Fprintf(w, "| storm | ended | errors | p50 | p95 | storm | server CPU per client | client CPU per client | bytes per client | SSE ÷ pgwire CPU per client |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, name := range FeedStorms {
			runs := f.runs(name)
			if len(runs) == 0 {
				continue
			}
			col := func(v func(*FeedStorm) float64, format func(float64) string) string {
				return spreadOf(runs, v).text(format)
			}
			ratio := ""
			if kind, ok := strings.CutSuffix(name, "/pgwire"); ok {
				ratio = f.ratioSpread(kind + "/sse").text(timesText)
			}
			if _, ok := strings.CutSuffix(name, sseIdentity); ok {
				ratio = f.ratioSpread(name).text(timesText) + " (identity)"
			}
			bytesCol := col(func(s *FeedStorm) float64 { return s.BytesPerClient }, bytesText)
			if runs[0].BytesPerClient == 0 {
				bytesCol = "–"
			}
			clientCol := col((*FeedStorm).ClientCPUPerClientMS, ms)
			if runs[0].ClientCPU == 0 {
				clientCol = "–"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name,
				col(func(s *FeedStorm) float64 { return float64(s.Completed) }, count), col(func(s *FeedStorm) float64 { return float64(s.Errors) }, count),
				col(func(s *FeedStorm) float64 { return s.Latency.P50 }, secs), col(func(s *FeedStorm) float64 { return s.Latency.P95 }, secs),
				col(func(s *FeedStorm) float64 { return s.StormSeconds }, secs), col((*FeedStorm).CPUPerClientMS, ms), clientCol, bytesCol, ratio)
		}
		fmt.Fprintln(w)
		var errs []string
		for _, name := range FeedStorms {
			runs := f.runs(name)
			for i, s := range runs {
				for _, e := range SortedErrors(s.ErrorSamples) {
					errs = append(errs, fmt.Sprintf("- %s%s: %s", name, runLabel(i, len(runs)), e))
				}
			}
		}
		if len(errs) > 0 {
			fmt.Fprintf(w, "Errors:\n\n%s\n\n", strings.Join(errs, "\n"))
		}
		if f.IdleClients > 0 {
			fmt.Fprintf(w, "Idle SSE streams on the 10-row `%s` (after one warm-up stream; RSS read after %v idle): %s of %s open (%d failed), "+
				"server RSS %s before, %s with them: **%s per idle SSE subscriber**.\n\n", tableIdle, memorySettle,
				commas(f.IdleOpen), commas(f.IdleClients), f.IdleErrors, mib(float64(f.RSSBefore)), mib(float64(f.RSSIdle)), fmtOr(kib, f.PerClientKB))
			if f.IdleClients < cfg.FeedIdleClients {
				fmt.Fprintf(w, "The %s path opened %s idle streams, not %s: each has a reader of its own, so it stops where (a)'s storms do (`--dataflow-max-clients`).\n\n",
					pr.Path, commas(f.IdleClients), commas(cfg.FeedIdleClients))
			}
		}
	}
}

// feedGoals are (i)'s targets, on the fast path: SSE within 1.2× of
// pgwire's server CPU per client, resuming and snapshotting (the median of
// the runs' ratios).
func feedGoals(r *Report, add func(what, target string, measured float64, format func(float64) string, ok func(float64) bool)) {
	fast := r.Results.Paths[PathFast]
	if fast == nil || fast.Feed == nil {
		return
	}
	f := fast.Feed
	for _, kind := range []string{"resume", "snapshot"} {
		sp := f.ratioSpread(kind + "/sse")
		add(fmt.Sprintf("fast path, SSE %s server CPU per client ÷ pgwire's (N=%s)", kind, commas(f.Clients)), "≤ 1.2×",
			sp.med, func(float64) string { return sp.text(timesText) }, func(x float64) bool { return x <= 1.2 })
	}
}

// bytesText formats a byte count: KiB from 10 KiB up.
func bytesText(x float64) string {
	if x >= 10<<10 {
		return fmt.Sprintf("%s KiB", commas(int(math.Round(x/1024))))
	}
	return fmt.Sprintf("%s B", commas(int(math.Round(x))))
}

// timesText formats a ratio.
func timesText(x float64) string { return fmt.Sprintf("%.2f×", x) }
