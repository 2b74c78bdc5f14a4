package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/feed"
	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/blob"
	"github.com/shardtail/shardtail/persist/consensus"
	"github.com/shardtail/shardtail/pgwire"
)

// Server is a running shardtail process: storage, persist client,
// coordinator, pgwire server and (optionally) the HTTP server, started by
// New and stopped by Close.
type Server struct {
	cfg      Config
	log      *slog.Logger
	persist  *persist.Client
	coord    *adapter.Coordinator
	pgwire   *pgwire.Server
	throttle *pgwire.Throttle // of password logins, pgwire's and the feed's
	registry *prometheus.Registry
	budget   *membudget.Budget
	http     *http.Server // nil without Config.HTTPListen
	feed     *feed.Server // nil without Config.FeedListen
	addr     net.Addr
	httpAddr net.Addr

	// closers release, in order, what New opened before the coordinator
	// (the persist client, storage opened from URLs); Close runs them
	// after everything else has stopped.
	closers []io.Closer

	// served receives the pgwire server's Serve result once it returns.
	served chan error
	// closed is set by Close; a second Close returns nil.
	closed bool
}

// New starts a server: it opens the storage, the persist client and the
// coordinator, listens on Listen (and HTTPListen) and serves. When a step
// fails, New closes what the steps before it opened and returns the error.
func New(ctx context.Context, cfg Config) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	s := &Server{cfg: cfg, log: cfg.Log, registry: cfg.Registry, served: make(chan error, 1)}
	if s.log == nil {
		s.log = slog.Default()
	}
	defer func() {
		if err != nil {
			_ = s.closeAll() // the first error is the one to report
		}
	}()

	b := cfg.Blob
	if b == nil {
		if b, err = blob.Open(ctx, cfg.BlobURL); err != nil {
			return nil, fmt.Errorf("open blob %s: %w", cfg.BlobURL, err)
		}
		s.closers = append(s.closers, b)
	}
	cons := cfg.Consensus
	if cons == nil {
		if cons, err = consensus.Open(ctx, cfg.ConsensusURL); err != nil {
			return nil, fmt.Errorf("open consensus: %w", err)
		}
		s.closers = append(s.closers, cons)
	}
	// The budget is the process's: persist's writes charge it too.
	budget := cfg.Adapter.Tail.Budget
	if budget == nil {
		budget = membudget.New(cfg.MemoryBudget)
	}
	percfg := cfg.Persist
	if percfg.Memory == nil {
		percfg.Memory = budget.TransientHolder(membudget.HolderPersist)
	}
	if percfg.Budget == nil {
		percfg.Budget = budget
	}
	percfg.PartCacheBytes = partCacheBytes(percfg.PartCacheBytes, budget.Limit())
	if s.persist, err = persist.NewClient(b, cons, percfg); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.persist)
	if err := s.persist.Metrics().Register(s.registry); err != nil {
		return nil, err
	}

	acfg := cfg.Adapter
	acfg.Persist, acfg.Consensus, acfg.Registerer = s.persist, cons, s.registry
	acfg.Tail.Budget = budget
	s.budget = budget
	if err := s.budget.Register(s.registry); err != nil {
		return nil, err
	}
	if s.coord, err = adapter.NewCoordinator(ctx, acfg); err != nil {
		return nil, err
	}
	pcfg := cfg.PGWire
	pcfg.Registerer = s.registry
	if pcfg.MockSecret == nil {
		pcfg.MockSecret = s.coord.AuthSecret()
	}
	if pcfg.Throttle == nil {
		// One throttle of password logins for both transports: an
		// address guesses no faster over pgwire and the feed together.
		log := pcfg.Logger
		if log == nil {
			log = s.log
		}
		pcfg.Throttle = pgwire.NewThrottle(pcfg.AuthThrottle, log)
	}
	s.throttle = pcfg.Throttle
	if s.pgwire, err = pgwire.NewServer(s.coord, pcfg); err != nil {
		return nil, err
	}
	s.coord.SetCanceler(s.pgwire.CancelProcess)
	// pgwire exports its own holder; the budget adds it to the total.
	s.budget.AddSource(membudget.HolderPGWire, s.pgwire.MemoryBytes)

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	if cfg.HTTPListen != "" {
		hln, err := net.Listen("tcp", cfg.HTTPListen)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("http listen %s: %w", cfg.HTTPListen, err)
		}
		s.httpAddr = hln.Addr()
		s.http = &http.Server{Handler: s.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
		go s.http.Serve(hln) // returns when Close closes s.http
	}
	if cfg.FeedListen != "" {
		if err := s.startFeed(); err != nil {
			ln.Close()
			return nil, err
		}
	}
	s.addr = ln.Addr()
	go func() { s.served <- s.pgwire.Serve(context.Background(), ln) }()
	return s, nil
}

// startFeed starts the HTTP change feed on Config.FeedListen, with
// pgwire's TLS, authentication method and low-water mark unless Feed sets
// its own.
func (s *Server) startFeed() error {
	fcfg := s.cfg.Feed
	fcfg.Budget, fcfg.Registerer, fcfg.Log = s.budget, s.registry, s.log
	if fcfg.Throttle == nil {
		fcfg.Throttle = s.throttle
	}
	if fcfg.TLSConfig == nil {
		fcfg.TLSConfig = s.cfg.PGWire.TLSConfig
	}
	if fcfg.NotSentLowWater == 0 {
		fcfg.NotSentLowWater = s.cfg.PGWire.NotSentLowWater
	}
	fcfg.Trust = fcfg.Trust || s.cfg.PGWire.Auth == pgwire.AuthTrust
	h, err := feed.NewHandler(s.coord, fcfg)
	if err != nil {
		return err
	}
	fln, err := net.Listen("tcp", s.cfg.FeedListen)
	if err != nil {
		return fmt.Errorf("feed listen %s: %w", s.cfg.FeedListen, err)
	}
	s.feed = feed.Serve(h, fln)
	return nil
}

// httpHandler serves /metrics, /healthz and the profiles.
func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	// Profiles for operators (the HTTP port listens on loopback by default).
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.coord.Healthy(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// Run starts a server from cfg and serves until ctx is done (it then
// returns nil) or the pgwire server fails; either way it closes the server.
func Run(ctx context.Context, cfg Config) error {
	s, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	err = s.Wait(ctx)
	return errors.Join(err, s.Close())
}

// Wait blocks until ctx is done, returning nil, or until the pgwire server
// stops serving, returning why. It does not close the server.
func (s *Server) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-s.served:
		s.served <- nil // Close waits for it too; the error is reported here
		return err
	}
}

// Close stops the server: it closes every connection (clients get FATAL
// 57P01), then the HTTP server, the coordinator, the persist client and
// the storage New opened, and returns the errors they report. Storage
// given opened in Config is left open. Close is idempotent.
func (s *Server) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	return s.closeAll()
}

// closeAll stops whatever New got to, in reverse order of starting.
func (s *Server) closeAll() error {
	var errs []error
	if s.pgwire != nil {
		s.pgwire.Close()
		if s.addr != nil {
			if err := <-s.served; err != nil && !errors.Is(err, pgwire.ErrServerClosed) {
				errs = append(errs, fmt.Errorf("serve pgwire: %w", err))
			}
		}
	}
	if s.http != nil {
		errs = append(errs, s.http.Close())
	}
	if s.feed != nil {
		// Before the coordinator: the streams' subscriptions are its.
		errs = append(errs, s.feed.Close())
	}
	if s.coord != nil {
		errs = append(errs, s.coord.Close())
	}
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i].Close())
	}
	return errors.Join(errs...)
}

// Addr is the pgwire address the server listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// HTTPAddr is the HTTP address, or nil without Config.HTTPListen.
func (s *Server) HTTPAddr() net.Addr { return s.httpAddr }

// FeedAddr is the HTTP feed's address, or nil without Config.FeedListen.
func (s *Server) FeedAddr() net.Addr {
	if s.feed == nil {
		return nil
	}
	return s.feed.Addr()
}

// Coordinator returns the coordinator (for tests and tools).
func (s *Server) Coordinator() *adapter.Coordinator { return s.coord }

// Persist returns the persist client.
func (s *Server) Persist() *persist.Client { return s.persist }

// Budget returns the process's memory budget.
func (s *Server) Budget() *membudget.Budget { return s.budget }

// Registry returns the metrics registry /metrics serves.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// partCacheBytes is persist's part cache bound for a configured one (0:
// the default) under a memory budget (0: unlimited): the cache counts in
// the budget, so by default it takes at most a sixteenth of it, and a
// small budget is left to the subscribers.
func partCacheBytes(configured, budget int64) int64 {
	if configured != 0 || budget <= 0 {
		return configured
	}
	return max(1, min(persist.DefaultPartCacheBytes, budget/16))
}
