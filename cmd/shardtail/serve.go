package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/feed"
	"github.com/shardtail/shardtail/internal/sockopt"
	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/server"
	"github.com/shardtail/shardtail/stmtlog"
	"github.com/shardtail/shardtail/storage"
	"github.com/shardtail/shardtail/tail"
)

// serveConfig is the configuration of `shardtail serve`.
type serveConfig struct {
	Listen          string
	HTTPListen      string
	FeedListen      string
	FeedCORS        string
	FeedMaxConns    int
	FeedCompression string
	DataDir         string
	Blob            string
	Consensus       string
	Upstream        string
	UpstreamPass    string
	TLSCert, TLSKey string
	PeerID          uint
	Peers           string
	FastPath        bool
	RequirePassword bool
	Tick            time.Duration
	// StatementLogRetention is how long the statement log keeps records.
	StatementLogRetention time.Duration
	MaxConnections        int
	OrphanGrace           time.Duration
	SweepInterval         time.Duration
	MemoryBudget          sizeFlag
	// PartCache is persist.Config's PartCacheBytes; unset, the server's
	// default (server.Config.Persist), and 0 turns it off.
	PartCache givenSizeFlag
	// NotSentLowWater is pgwire.Config's and feed.Config's NotSentLowWater
	// (0: the kernel's).
	NotSentLowWater sizeFlag
	// LargeWriters and LargeWriteTurn are pgwire.Config's.
	LargeWriters   int
	LargeWriteTurn time.Duration
	// DetachStalledAfter is tail.Config's, but 0 is never (there, the
	// default), as 0 is no limit for --large-writers and --memory-budget.
	DetachStalledAfter time.Duration
}

// defaultLargeWriters is --large-writers: in (a)'s storms of 256 to
// 10,000 clients it kept server CPU per client within 15 % over N (33 %
// unpaced) and halved the median client's wait at 10,000.
const defaultLargeWriters = 256

// sizeFlag is a byte size flag: 268435456, 256MiB, 1GB.
type sizeFlag int64

func (f *sizeFlag) String() string { return membudget.FormatSize(int64(*f)) }

func (f *sizeFlag) Set(s string) error {
	n, err := membudget.ParseSize(s)
	*f = sizeFlag(n)
	return err
}

// givenSizeFlag is a sizeFlag that records whether it was given, on the
// command line or in the environment.
type givenSizeFlag struct {
	sizeFlag
	given bool
}

func (f *givenSizeFlag) Set(s string) error {
	f.given = true
	return f.sizeFlag.Set(s)
}

// bytes is the flag for a Config field whose zero is its default and whose
// negative turns it off: 0 when not given, -1 when given as 0.
func (f *givenSizeFlag) bytes() int64 {
	switch {
	case !f.given:
		return 0
	case f.sizeFlag == 0:
		return -1
	}
	return int64(f.sizeFlag)
}

const serveUsage = `Usage: shardtail serve [flags]

Runs the server. With no flags it uses the embedded default: ./shardtail-data
holding file blobs and a SQLite consensus, pgwire on 127.0.0.1:6875, HTTP
(/metrics, /healthz) on 127.0.0.1:6876 and the HTTP change feed on
127.0.0.1:6877 (curl -N http://127.0.0.1:6877/v1/subscribe/<collection>). Every flag can also be set by the
environment variable SHARDTAIL_<NAME>, e.g. SHARDTAIL_DATA_DIR.

Example (shared storage):
  shardtail serve --blob 's3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1' \
      --consensus 'postgres://user@127.0.0.1:5432/shardtail'

Flags:
`

func (m *Main) serve(ctx context.Context, args []string) error {
	var cfg serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() { fmt.Fprint(m.Stderr, serveUsage); fs.PrintDefaults() }
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:6875", "pgwire address")
	fs.StringVar(&cfg.HTTPListen, "http-listen", "127.0.0.1:6876", "HTTP address for /metrics and /healthz")
	fs.StringVar(&cfg.FeedListen, "feed-listen", feed.DefaultListen, "HTTP change feed address (Server-Sent Events and NDJSON: GET /v1/subscribe/<collection>); empty disables it")
	fs.StringVar(&cfg.FeedCORS, "feed-cors-origins", "", "comma-separated origins whose pages may read the feed with the browser's credentials, or * for any page without them")
	fs.IntVar(&cfg.FeedMaxConns, "feed-max-connections", feed.DefaultMaxConnections, "most feed streams at once; past it a request gets 503")
	fs.StringVar(&cfg.FeedCompression, "feed-compression", feed.CompressionGzip, "feed streams' Content-Encoding for requests that accept it: gzip (each shared run of rows compressed once for every stream of its shape) or none")
	fs.StringVar(&cfg.DataDir, "data-dir", "./shardtail-data", "directory of the embedded default storage")
	fs.StringVar(&cfg.Blob, "blob", "", "blob store URL: file://DIR, s3://BUCKET/PREFIX?endpoint=...&region=..., mem:// (default file://<data-dir>/blob)")
	fs.StringVar(&cfg.Consensus, "consensus", "", "consensus URL: sqlite://FILE, postgres://..., mem:// (default sqlite://<data-dir>/consensus.db)")
	fs.StringVar(&cfg.Upstream, "upstream", "", "HOST:PORT of the upstream server: run as a tail process")
	fs.StringVar(&cfg.UpstreamPass, "upstream-password", "", "tail process: password for upstream connections of roles whose client sent none (the client's own password is passed through)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "TLS certificate file (PEM); enables TLS with --tls-key")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "TLS key file (PEM)")
	fs.UintVar(&cfg.PeerID, "peer-id", 0, "this server's id (1-255) among servers behind one load balancer, for forwarding cancel requests (see --peers)")
	fs.StringVar(&cfg.Peers, "peers", "", "ID=HOST:PORT,... of the other servers behind the load balancer: a cancel request for one of their connections is forwarded to it")
	fs.BoolVar(&cfg.FastPath, "subscribe-persist-fast-path", true, "serve bare SUBSCRIBE <collection> from a shared tail")
	fs.BoolVar(&cfg.RequirePassword, "require-password", false, "require every role to authenticate with a password (SCRAM-SHA-256)")
	fs.IntVar(&cfg.MaxConnections, "max-connections", 0, "most client connections at once; past it a client gets FATAL 53300 (0: derived from RLIMIT_NOFILE, raised to its hard limit, less a reserve of max(256, 10%) descriptors for storage)")
	fs.DurationVar(&cfg.Tick, "tick", storage.DefaultTick, "how often table and source uppers advance without writes")
	fs.DurationVar(&cfg.StatementLogRetention, "statement-log-retention", stmtlog.DefaultRetention, "how long the statement log (mz_internal.mz_statement_execution_history) keeps a statement's record")
	fs.DurationVar(&cfg.OrphanGrace, "orphan-grace", persist.DefaultOrphanGrace, "how old a blob no shard state references must be before the sweep deletes it (an upload whose commit a crash cut off); keep well above the clock skew between servers and the blob store")
	fs.DurationVar(&cfg.SweepInterval, "sweep-interval", persist.DefaultSweepInterval, "how often each shard's orphaned blobs are swept (also once per shard after every start)")
	cfg.NotSentLowWater = sizeFlag(sockopt.DefaultNotSentLowWater)
	fs.Var(&cfg.NotSentLowWater, "tcp-notsent-lowat", "bytes each client connection's socket (pgwire and the HTTP feed) may hold that the kernel has not sent yet (TCP_NOTSENT_LOWAT, Linux): the rest of a result waits in the process, where subscribers share it and the memory budget counts it, so that a client that stops reading pins at most this much kernel memory, not up to net.ipv4.tcp_wmem's maximum, for more and smaller writes (0: the kernel's net.ipv4.tcp_notsent_lowat)")
	fs.IntVar(&cfg.LargeWriters, "large-writers", defaultLargeWriters, "how many client connections may write a large result (64 KiB or more at once) at the same time; the others wait their turn, in order, so that a storm of clients taking a snapshot holds the kernel's queues of that many only and half of them finish in the first half of the storm (0: no limit)")
	fs.DurationVar(&cfg.LargeWriteTurn, "large-write-turn", pgwire.DefaultLargeWriteTurn, "how long a connection may keep its turn for large writes (--large-writers) before it goes to the back of the line: a client that does not read, or a huge result, holds no one up longer")
	fs.DurationVar(&cfg.DetachStalledAfter, "detach-stalled-after", tail.DefaultDetachStalledAfter, "how long a fast-path subscriber may take nothing while more than 1 MiB of changes (or 1/64 of the memory budget, if less) waits for it (its client stopped reading) before it is detached: it then pins no change and resumes from the window or the shard, with no gap, once its client reads again; a slow client that still reads stays attached (0: never; the memory budget still detaches the largest queues)")
	cfg.MemoryBudget = sizeFlag(membudget.Default())
	fs.Var(&cfg.MemoryBudget, "memory-budget", "memory the server's large holders (shared-tail windows and queues, snapshot shares, ordered timestamps, dataflow queues, pgwire buffers, persist writes and compactions in flight) may hold together; over it windows shrink, then the largest fast-path queues are detached (0: unlimited; default half of the machine's or cgroup's memory)")
	fs.Var(&cfg.PartCache, "part-cache", "decoded parts kept in memory for snapshot reads, the most recently read: a snapshot of a cached part needs no fetch, decompression or check (of a part over 1/8 of it, its first rows only); the memory budget counts it (0: off; default 256MiB, or 1/16 of --memory-budget if less)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := envDefaults(fs); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	return runServer(ctx, cfg, m)
}

func runServer(ctx context.Context, cfg serveConfig, m *Main) error {
	log := slog.Default()
	if cfg.Blob == "" || cfg.Consensus == "" {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		abs, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			return err
		}
		if cfg.Blob == "" {
			cfg.Blob = "file://" + filepath.Join(abs, "blob")
		}
		if cfg.Consensus == "" {
			cfg.Consensus = "sqlite://" + filepath.Join(abs, "consensus.db")
		}
	}
	var tlsConfig *tls.Config
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return errors.New("serve: --tls-cert and --tls-key go together")
	}
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("serve: load TLS key pair: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}

	auth := pgwire.AuthSCRAM
	if cfg.Upstream != "" {
		// A tail passes the client's password on to the upstream, so it
		// must see it: it asks for it in clear text (checked against the
		// role's SCRAM verifier here). Use --tls-cert off loopback.
		auth = pgwire.AuthCleartext
	}
	peers, err := parsePeers(cfg.Peers)
	if err != nil {
		return err
	}
	if cfg.PeerID > pgwire.MaxPeerID {
		return fmt.Errorf("--peer-id %d: ids are 1 to %d", cfg.PeerID, pgwire.MaxPeerID)
	}
	maxConns, err := maxConnections(cfg, log)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The budget bounds what the holders hold; the runtime's soft limit
	// keeps garbage from doubling it.
	runtimeLimit := membudget.ApplyRuntimeLimit(int64(cfg.MemoryBudget))
	srv, err := server.New(ctx, server.Config{
		BlobURL:      cfg.Blob,
		ConsensusURL: cfg.Consensus,
		Persist:      persist.Config{OrphanGrace: cfg.OrphanGrace, SweepInterval: cfg.SweepInterval, PartCacheBytes: cfg.PartCache.bytes()},
		Adapter: adapter.Config{
			Tick:             cfg.Tick,
			FastPath:         cfg.FastPath,
			Upstream:         cfg.Upstream,
			UpstreamPassword: cfg.UpstreamPass,
			RequirePassword:  cfg.RequirePassword,
			Version:          Version,
			AfterTxnCommit:   killAfterTxnCommit(),
			StatementLog:     stmtlog.Config{Retention: cfg.StatementLogRetention},
			Tail:             tail.Config{DetachStalledAfter: cmp.Or(cfg.DetachStalledAfter, -1)},
		},
		PGWire: pgwire.Config{TLSConfig: tlsConfig, Auth: auth, PeerID: uint8(cfg.PeerID), Peers: peers, MaxConnections: maxConns,
			NotSentLowWater: int(cfg.NotSentLowWater), LargeWriters: cfg.LargeWriters, LargeWriteTurn: cfg.LargeWriteTurn},
		MemoryBudget: int64(cfg.MemoryBudget),
		Listen:       cfg.Listen,
		HTTPListen:   cfg.HTTPListen,
		FeedListen:   cfg.FeedListen,
		Feed: feed.Config{
			CORSOrigins:    splitList(cfg.FeedCORS),
			MaxConnections: cfg.FeedMaxConns,
			Compression:    cfg.FeedCompression,
		},
		Registry: reg,
		Log:      log,
	})
	if err != nil {
		return err
	}

	host, port, _ := net.SplitHostPort(srv.Addr().String())
	httpAddr := "off"
	if a := srv.HTTPAddr(); a != nil {
		httpAddr = a.String()
	}
	feedAddr := "off"
	if a := srv.FeedAddr(); a != nil {
		feedAddr = a.String()
	}
	log.Info("shardtail serving", "pgwire", srv.Addr().String(), "http", httpAddr, "feed", feedAddr, "blob", cfg.Blob, "consensus", redactURL(cfg.Consensus), "max_connections", maxConns, "memory_budget", cfg.MemoryBudget.String(), "go_memory_limit", membudget.FormatSize(runtimeLimit))
	fmt.Fprintf(m.Stdout, "shardtail %s is ready. Connect with:\n  psql -h %s -p %s -U materialize materialize\n", Version, host, port)

	err = srv.Wait(ctx)
	if err == nil {
		log.Info("shutting down")
	}
	return errors.Join(err, srv.Close())
}

// killAfterTxnCommitEnv names the crash tests' hook: a probability with
// which the process SIGKILLs itself after a table write's commit to the
// txns shard and before its applies, the moment a random kill rarely
// hits. It is not a flag: nothing but a test should ever set it.
const killAfterTxnCommitEnv = "SHARDTAIL_TEST_KILL_AFTER_TXN_COMMIT"

// killAfterTxnCommit is the hook killAfterTxnCommitEnv asks for, or nil.
func killAfterTxnCommit() func() {
	p, err := strconv.ParseFloat(os.Getenv(killAfterTxnCommitEnv), 64)
	if err != nil || p <= 0 {
		return nil
	}
	return func() {
		if rand.Float64() < p {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// parsePeers parses --peers: ID=HOST:PORT, comma-separated.
func parsePeers(s string) (map[uint8]string, error) {
	if s == "" {
		return nil, nil
	}
	peers := map[uint8]string{}
	for _, p := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(p), "=")
		n, err := strconv.ParseUint(id, 10, 8)
		if !ok || err != nil || n == 0 {
			return nil, fmt.Errorf("--peers: %q is not ID=HOST:PORT with an id from 1 to %d", p, pgwire.MaxPeerID)
		}
		peers[uint8(n)] = addr
	}
	return peers, nil
}

// redactURL hides the password of a connection URL for logs.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
