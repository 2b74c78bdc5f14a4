package adapter

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardtail/shardtail/catalog"
	"github.com/shardtail/shardtail/dataflow"
	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/txnwal"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/stmtlog"
	"github.com/shardtail/shardtail/storage"
	"github.com/shardtail/shardtail/tail"
)

// DefaultMaxBufferedBytes is subscribe_max_buffered_bytes's default.
const DefaultMaxBufferedBytes = 128 << 20

// Config configures a Coordinator.
type Config struct {
	// Persist is the shard client; Consensus holds the catalog and the
	// timestamp oracle (usually Persist's own consensus).
	Persist   *persist.Client
	Consensus persist.Consensus
	// Tick is how often table and source uppers advance; 0 means
	// storage.DefaultTick, negative disables the tick (tests drive it).
	Tick time.Duration
	// FastPath is enable_subscribe_persist_fast_path's default.
	FastPath bool
	// Upstream, when set, makes this a proxy process (a "tail process" in
	// DESIGN.md and the README; see package proxy). Its
	// sessions connect upstream as the client's role, with the password
	// the client logged in with (the pgwire server must then ask for it in
	// clear text, pgwire.AuthCleartext) or else UpstreamPassword.
	Upstream         string
	UpstreamPassword string
	// RequirePassword refuses roles without a password.
	RequirePassword bool
	// Registerer receives the adapter's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Version is reported in version() and mz_version.
	Version string
	// Tail tunes the fast path's shared tails.
	Tail tail.Config
	// FinalizeGrace is how long a dropped collection's data may be kept for
	// readers still reading it (see storage.Finalizer): its shard is finalized
	// once no reader is left, and at the latest FinalizeGrace after the
	// DROP. 0 means storage.DefaultFinalizeGrace; negative disables the background
	// finalizer (tests drive it with FinalizeDropped, which then does not
	// wait for readers).
	FinalizeGrace time.Duration
	// AfterTxnCommit, when set, runs after a table write's commit to the
	// txns shard and before it is applied to the tables: crash tests kill
	// the process there. nil in production.
	AfterTxnCommit func()
	// StatementLog configures the statement log (mz_internal's
	// mz_statement_execution_history). Registerer and Sweep are set by
	// the coordinator: role `all` sweeps expired records.
	StatementLog stmtlog.Config
}

// Coordinator is the SQL server behind pgwire: it owns the catalog, the
// timestamp oracle, the storage of role `all` (table writes, ticks,
// retention), materialized-view and source dataflows, and creates a
// Session per connection. It implements pgwire.Backend.
type Coordinator struct {
	cfg     Config
	persist *persist.Client
	catalog *catalog.Catalog
	oracle  *catalog.Oracle
	storage *storage.Storage
	// txns is the txns shard: tables' writes commit there, and every
	// reader of a table (both SUBSCRIBE paths, SELECT, views) reads
	// through it (see package persist/txnwal).
	txns *txnwal.Txns
	// finalizer deletes the data of dropped collections (role `all`).
	finalizer *storage.Finalizer
	tails     *tail.Manager
	stmtlog   *stmtlog.Log
	metrics   *metrics
	log       *slog.Logger
	// memTxn counts the writes transactions buffer until COMMIT (see
	// Session.holdTxWrite).
	memTxn *membudget.Holder

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// ddl serializes catalog changes made by this process.
	ddl sync.Mutex

	mu        sync.Mutex
	dataflows map[uint64]*dataflow.Handle // mu: running MVs and sources by item id
	sessions  map[uint32]*Session         // mu: by connection id
	userConns map[string]int              // mu: sessions by role, for CONNECTION LIMIT
	subs      map[uint64]*subInfo         // mu: running subscribes by id
	nextSubID uint64                      // mu

	nextConnID atomic.Uint32

	// canceler cancels another connection's statement (pg_cancel_backend);
	// set by SetCanceler once the pgwire server exists.
	canceler atomic.Pointer[func(pid uint32) bool]
}

// SetCanceler installs how pg_cancel_backend reaches other connections
// (pgwire.Server.CancelProcess).
func (c *Coordinator) SetCanceler(cancel func(pid uint32) bool) { c.canceler.Store(&cancel) }

// cancelBackend cancels the statement of the session with process id pid.
func (c *Coordinator) cancelBackend(pid uint32) bool {
	if f := c.canceler.Load(); f != nil {
		return (*f)(pid)
	}
	return false
}

// NewCoordinator loads the catalog, takes ownership of the collections'
// shards, restarts materialized views and sources, and starts the tick.
// When a step fails it stops what the steps before started (the fast
// path's manager, owned shards, dataflows) before it returns the error.
func NewCoordinator(ctx context.Context, cfg Config) (_ *Coordinator, err error) {
	if cfg.Persist == nil || cfg.Consensus == nil {
		return nil, fmt.Errorf("adapter: Persist and Consensus are required")
	}
	if cfg.Tick == 0 {
		cfg.Tick = storage.DefaultTick
	}
	if cfg.Version == "" {
		cfg.Version = "0.0.0"
	}
	cat, err := catalog.Open(ctx, cfg.Consensus)
	if err != nil {
		return nil, err
	}
	oracle, err := catalog.OpenOracle(ctx, cfg.Consensus, nil)
	if err != nil {
		return nil, err
	}
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	txns, err := txnwal.Open(ctx, cfg.Persist, txnwal.Config{AfterCommit: cfg.AfterTxnCommit})
	if err != nil {
		return nil, err
	}
	cfg.Persist.SetTxnReads(txns)
	cctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{
		cfg:       cfg,
		persist:   cfg.Persist,
		catalog:   cat,
		oracle:    oracle,
		txns:      txns,
		storage:   storage.New(cfg.Persist, oracle, txns),
		finalizer: storage.NewFinalizer(cfg.Persist, cfg.FinalizeGrace),
		tails:     tail.NewManager(cfg.Persist, cfg.Tail),
		metrics:   met,
		log:       slog.Default(),
		// Transient: the policy makes room for a transaction's writes
		// by shrinking and detaching, but ends no one's subscribe for
		// them; the transaction fails instead (holdTxWrite).
		memTxn:    cfg.Tail.Budget.TransientHolder(membudget.HolderTxnWrites),
		ctx:       cctx,
		cancel:    cancel,
		dataflows: map[uint64]*dataflow.Handle{},
		sessions:  map[uint32]*Session{},
		userConns: map[string]int{},
		subs:      map[uint64]*subInfo{},
	}
	defer func() {
		if err != nil {
			// Close's own error adds nothing to why the start failed.
			_ = c.Close()
		}
	}()
	if cfg.Registerer != nil {
		if err := c.tails.Metrics().Register(cfg.Registerer); err != nil {
			return nil, err
		}
		if err := txns.Metrics().Register(cfg.Registerer); err != nil {
			return nil, err
		}
	}
	logCfg := cfg.StatementLog
	logCfg.Registerer, logCfg.Sweep = cfg.Registerer, !c.isProxy()
	if c.stmtlog, err = stmtlog.Open(ctx, cfg.Persist, logCfg); err != nil {
		return nil, err
	}
	if err := c.bootstrap(ctx); err != nil {
		return nil, err
	}
	if cfg.Tick > 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.storage.Run(cctx, cfg.Tick)
		}()
	}
	if !c.isProxy() && cfg.FinalizeGrace >= 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.finalizer.Run(cctx, c.liveShards, c.log)
		}()
	}
	return c, nil
}

// AuthSecret is the catalog's seed of the fake verifiers of unknown role
// names (catalog.State.AuthSecret, pgwire.Config.MockSecret); nil while the
// catalog has none (a tail process whose upstream has not set it yet).
func (c *Coordinator) AuthSecret() []byte { return c.catalog.State().AuthSecret }

// bootstrap creates the default role and the catalog's AuthSecret, and
// resumes every collection.
func (c *Coordinator) bootstrap(ctx context.Context) error {
	if c.isProxy() {
		// A proxy process never writes the catalog: it follows the
		// upstream's through the shared consensus.
		c.wg.Add(1)
		go c.followCatalog()
		return nil
	}
	if cs := c.catalog.State(); cs.Roles[defaultRole] == nil || cs.AuthSecret == nil {
		if _, err := c.catalog.Update(ctx, func(s *catalog.State) error {
			if _, ok := s.Roles[defaultRole]; !ok {
				s.Roles[defaultRole] = &catalog.Role{Name: defaultRole, Login: true, Superuser: true}
			}
			if s.AuthSecret == nil {
				s.AuthSecret = make([]byte, 32)
				rand.Read(s.AuthSecret)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	// A crash between a commit and its applies left it recorded only in
	// the txns shard: complete it before serving (readers would anyway).
	if err := c.txns.Recover(ctx); err != nil {
		return fmt.Errorf("recover table commits: %w", err)
	}
	for _, it := range c.catalog.State().SortedItems() {
		if err := c.startItem(ctx, it); err != nil {
			return fmt.Errorf("resume %s %s: %w", it.Kind, it.Name, err)
		}
	}
	return nil
}

// catalogPoll is how often a proxy process re-reads the shared catalog
// when no doorbell rings.
const catalogPoll = 500 * time.Millisecond

// followCatalog keeps a proxy process's catalog current, so that a new table
// is subscribable at once, roles can log in, and the subscribers of a
// dropped collection end. It re-reads the catalog when the consensus
// doorbell rings for it (another process changed it) and at catalogPoll.
// Statements that depend on the catalog do not wait for it: they Sync.
func (c *Coordinator) followCatalog() {
	defer c.wg.Done()
	bell := c.persist.Doorbell(catalog.Key)
	t := time.NewTicker(catalogPoll)
	defer t.Stop()
	var failingSince time.Time // one warning per outage
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-bell:
		case <-t.C:
		}
		err := c.catalog.Sync(c.ctx)
		switch {
		case c.ctx.Err() != nil:
			return
		case err != nil && failingSince.IsZero():
			failingSince = time.Now()
			c.log.Warn("proxy: cannot read the catalog, retrying", "err", err)
		case err == nil && !failingSince.IsZero():
			c.log.Info("proxy: catalog readable again", "after", time.Since(failingSince).Round(time.Millisecond))
			failingSince = time.Time{}
		}
	}
}

// isProxy reports whether this process is a proxy process (no writes, no
// dataflows).
func (c *Coordinator) isProxy() bool { return c.cfg.Upstream != "" }

// startItem takes ownership of an item's shard and starts its dataflow.
func (c *Coordinator) startItem(ctx context.Context, it *catalog.Item) error {
	switch it.Kind {
	case catalog.KindTable:
		return c.storage.OwnTable(ctx, it.Shard, it.RetainMs)
	case catalog.KindSource:
		if err := c.storage.Own(ctx, it.Shard, it.RetainMs, true); err != nil {
			return err
		}
		return c.startSource(ctx, it)
	case catalog.KindMaterializedView:
		if err := c.storage.Own(ctx, it.Shard, it.RetainMs, false); err != nil {
			return err
		}
		return c.startMaterializedView(ctx, it)
	}
	return nil
}

// stopItem stops an item's dataflow and releases its shard.
func (c *Coordinator) stopItem(it *catalog.Item) {
	c.mu.Lock()
	df := c.dataflows[it.ID]
	delete(c.dataflows, it.ID)
	c.mu.Unlock()
	if df != nil {
		df.Stop()
	}
	if it.Shard != "" {
		c.storage.Release(it.Shard)
	}
}

// Close stops dataflows, the tick and every session's work, waits for the
// goroutines it owns, and releases the owned shards; it returns the errors
// met releasing them.
func (c *Coordinator) Close() error {
	c.cancel()
	c.mu.Lock()
	dfs := c.dataflows
	c.dataflows = map[uint64]*dataflow.Handle{}
	c.mu.Unlock()
	for _, df := range dfs {
		df.Stop()
	}
	c.wg.Wait()
	c.tails.Close()
	// What the sessions' last statements recorded, appended before the
	// persist client goes.
	lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	logErr := c.stmtlog.Close(lctx)
	err := errors.Join(c.storage.Close(), logErr)
	c.txns.Close()
	return err
}

// Tick runs one tick of the storage now: tests that turn the background
// tick off (Config.Tick < 0) drive it.
func (c *Coordinator) Tick(ctx context.Context) { c.storage.Tick(ctx) }

// StatementLog returns the statement log (for tests and tools).
func (c *Coordinator) StatementLog() *stmtlog.Log { return c.stmtlog }

// Catalog returns the catalog (for tests and tools).
func (c *Coordinator) Catalog() *catalog.Catalog { return c.catalog }

// Tails returns the fast path's manager (for tests and metrics).
func (c *Coordinator) Tails() *tail.Manager { return c.tails }

// Healthy reports whether the coordinator can reach its storage.
func (c *Coordinator) Healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.cfg.Consensus.Head(ctx, catalog.Key); err != nil {
		return fmt.Errorf("consensus: %w", err)
	}
	return nil
}

// defaultRole is the superuser every server starts with; it logs in
// without a password (trust), like Materialize's local default.
const defaultRole = "materialize"

// Role implements pgwire.Backend.
func (c *Coordinator) Role(ctx context.Context, user string) (pgwire.Role, error) {
	if c.isProxy() {
		// The upstream may have just created the role or changed its
		// password.
		if err := c.catalog.Sync(ctx); err != nil {
			c.log.Warn("proxy: sync catalog", "err", err)
		}
	}
	r, ok := c.catalog.State().Roles[user]
	if !ok || !r.Login {
		return pgwire.Role{}, fmt.Errorf("%w: %s", pgwire.ErrUnknownRole, user)
	}
	if r.Verifier == "" {
		if c.cfg.RequirePassword {
			return pgwire.Role{}, fmt.Errorf("%w: %s has no password", pgwire.ErrUnknownRole, user)
		}
		return pgwire.Role{}, nil
	}
	return pgwire.Role{PasswordRequired: true, Verifier: r.Verifier}, nil
}

// OpenSession implements pgwire.Backend.
func (c *Coordinator) OpenSession(ctx context.Context, info pgwire.ConnInfo) (pgwire.Session, error) {
	db := info.Database
	if db == "" {
		db = "materialize"
	}
	if db != "materialize" {
		return nil, errorf("3D000", "database %q does not exist", db)
	}
	// CONNECTION LIMIT, checked after authentication as Postgres does, and
	// not for superusers. Counting under mu makes the limit exact, where
	// Postgres's is approximate.
	role := c.catalog.State().Roles[info.User]
	s := newSession(c, info)
	c.mu.Lock()
	if role != nil && role.ConnLimit != nil && !role.Superuser && c.userConns[info.User] >= *role.ConnLimit {
		c.mu.Unlock()
		return nil, errorf(codeTooManyConns, "too many connections for role \"%s\"", info.User)
	}
	c.userConns[info.User]++
	c.sessions[s.id] = s
	c.mu.Unlock()
	c.metrics.sessions.Inc()
	return s, nil
}

func (c *Coordinator) forgetSession(s *Session) {
	c.mu.Lock()
	delete(c.sessions, s.id)
	if c.userConns[s.user]--; c.userConns[s.user] <= 0 {
		delete(c.userConns, s.user)
	}
	c.mu.Unlock()
	c.metrics.sessions.Dec()
}

// systemVar returns an ALTER SYSTEM value, if set.
func (c *Coordinator) systemVar(name string) (string, bool) {
	v, ok := c.catalog.State().System[name]
	return v, ok
}
