package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shardtail/shardtail/consumer"
)

// sinkKind is one `shardtail sink <kind>`.
type sinkKind struct {
	summary string
	run     func(m *Main, ctx context.Context, args []string) error
}

// sinkKinds holds the sinks by name. Each sink's file registers itself from
// init with registerSink, so adding a sink is one line in its own file.
var sinkKinds = map[string]sinkKind{}

// registerSink makes `shardtail sink <name>` run run.
func registerSink(name, summary string, run func(m *Main, ctx context.Context, args []string) error) {
	if _, dup := sinkKinds[name]; dup {
		panic("sink " + name + " registered twice")
	}
	sinkKinds[name] = sinkKind{summary: summary, run: run}
}

func sinkUsage() string {
	var b strings.Builder
	b.WriteString("shardtail sink: land collections in a target, resuming from a checkpoint\n\nUsage:\n")
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range sinkKinds {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "  shardtail sink %-10s %s (see: shardtail sink %s -h)\n", name, sinkKinds[name].summary, name)
	}
	return b.String()
}

// sink dispatches `shardtail sink <kind> [flags]`.
func (m *Main) sink(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, sinkUsage())
		return errors.New("sink: no kind given")
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(m.Stdout, sinkUsage())
		return nil
	}
	k, ok := sinkKinds[args[0]]
	if !ok {
		fmt.Fprint(m.Stderr, sinkUsage())
		return fmt.Errorf("sink: unknown kind %q", args[0])
	}
	return k.run(m, ctx, args[1:])
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

// Set appends one value.
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// sinkFlags are the flags every sink shares: where the feed comes from, how
// batches are cut, where metrics and progress go.
type sinkFlags struct {
	source           string
	collections      stringList
	httpListen       string
	maxBatchBytes    int
	maxBatchDelay    time.Duration
	progressInterval time.Duration
	maxAttempts      int
	onHistoryLost    string
	onReplaced       string
}

// register adds the shared flags to fs.
// newSinkFlagSet is the flag set of `shardtail sink <kind>`: the flags
// every sink shares (registered into f) and usage, whose text precedes
// the flag list. The kind adds its own flags, then calls parseSinkFlags.
func (m *Main) newSinkFlagSet(kind, usage string, f *sinkFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("sink "+kind, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseSinkFlags parses args, then fills what they left unset from the
// SHARDTAIL_<NAME> environment variables.
func parseSinkFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	return envDefaults(fs)
}

func (f *sinkFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.source, "source", "postgres://materialize@127.0.0.1:6875/materialize?sslmode=disable", "shardtail connection URL")
	fs.Var(&f.collections, "collection", "collection to land (repeat for several)")
	fs.StringVar(&f.httpListen, "http-listen", "", "address for Prometheus /metrics (empty: none)")
	fs.IntVar(&f.maxBatchBytes, "max-batch-bytes", consumer.DefaultMaxBatchBytes, "close a batch at this many bytes; a larger timestamp is written in partial chunks")
	fs.DurationVar(&f.maxBatchDelay, "max-batch-delay", consumer.DefaultMaxBatchDelay, "close a batch this long after it first had data")
	fs.DurationVar(&f.progressInterval, "progress-interval", 5*time.Second, "how often to print progress on stderr (0: never)")
	fs.IntVar(&f.maxAttempts, "max-attempts", consumer.DefaultMaxAttempts, "consecutive transient failures before giving up")
	fs.StringVar(&f.onHistoryLost, "on-history-lost", "resnapshot", "when the checkpoint is below the collection's since: resnapshot (a new generation of the target) or stop")
	fs.StringVar(&f.onReplaced, "on-replaced", "stop", "when a collection was dropped and recreated under its name: stop or resnapshot")
}

// config returns the consumer configuration of the shared flags; the sink
// adds its checkpoint.
func (f *sinkFlags) config() (consumer.Config, error) {
	if len(f.collections) == 0 {
		return consumer.Config{}, errors.New("at least one --collection is required")
	}
	cfg := consumer.Config{
		URL:           f.source,
		MaxBatchBytes: f.maxBatchBytes,
		MaxBatchDelay: f.maxBatchDelay,
		Retry:         consumer.Retry{MaxAttempts: f.maxAttempts},
		Logger:        slog.Default(),
	}
	for _, c := range f.collections {
		cfg.Sources = append(cfg.Sources, consumer.Source{Name: c})
	}
	switch f.onHistoryLost {
	case "resnapshot":
		cfg.OnHistoryLost = consumer.Resnapshot
	case "stop":
		cfg.OnHistoryLost = consumer.Stop
	default:
		return consumer.Config{}, fmt.Errorf("--on-history-lost %q: want resnapshot or stop", f.onHistoryLost)
	}
	switch f.onReplaced {
	case "stop":
		cfg.OnObjectReplaced = consumer.StopOnReplace
	case "resnapshot":
		cfg.OnObjectReplaced = consumer.ResnapshotOnReplace
	default:
		return consumer.Config{}, fmt.Errorf("--on-replaced %q: want stop or resnapshot", f.onReplaced)
	}
	return cfg, nil
}

// sinkTarget opens a sink's target: the sink, its checkpoint (the same
// value for a sink that commits with its data) and a close. runSink calls it
// again after a transient failure of the target.
type sinkTarget func(ctx context.Context, reg prometheus.Registerer) (consumer.Sink, consumer.Checkpoint, func(), error)

// runSink runs consumer.Run against the target open returns, with metrics
// on --http-listen and a progress line on stderr. A transient failure of the
// target (it restarted, the connection dropped) reopens it after a backoff
// and resumes from its checkpoint; other errors end the command. SIGTERM
// (ctx's cancellation) drains: Run commits what is closed and runSink
// returns nil.
func (m *Main) runSink(ctx context.Context, f *sinkFlags, cfg consumer.Config, open sinkTarget) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Metrics = consumer.NewMetrics(reg)
	if f.httpListen != "" {
		ln, err := net.Listen("tcp", f.httpListen)
		if err != nil {
			return fmt.Errorf("http listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go hs.Serve(ln) //nolint:errcheck // ends with Close below
		defer hs.Close()
	}
	pctx, stopProgress := context.WithCancel(context.WithoutCancel(ctx))
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		m.sinkProgress(pctx, f.progressInterval, cfg.Metrics)
	}()
	defer func() {
		stopProgress()
		<-progressDone
		m.printProgress(cfg.Metrics)
	}()
	failures := 0
	for {
		before := cfg.Metrics.Stats().Batches
		err := m.runSinkOnce(ctx, cfg, open, reg)
		if cfg.Metrics.Stats().Batches > before {
			failures = 0
		}
		if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
			return nil
		}
		if consumer.Classify(err) != consumer.ClassTransient || errors.Is(err, consumer.ErrRetriesExhausted) {
			return err
		}
		failures++
		if failures >= cfg.Retry.MaxAttempts {
			return fmt.Errorf("%w after %d attempts: %w", consumer.ErrRetriesExhausted, failures, err)
		}
		slog.Warn("sink: target failed; reopening", "err", err, "attempt", failures)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(failures) * time.Second):
		}
	}
}

// runSinkOnce opens the target and runs the consumer until it ends.
func (m *Main) runSinkOnce(ctx context.Context, cfg consumer.Config, open sinkTarget, reg prometheus.Registerer) error {
	sink, cp, closeTarget, err := open(ctx, reg)
	if err != nil {
		return fmt.Errorf("open target: %w", err)
	}
	defer closeTarget()
	cfg.Checkpoint = cp
	return consumer.Run(ctx, cfg, sink)
}

// sinkProgress prints a progress line every interval until ctx ends.
func (m *Main) sinkProgress(ctx context.Context, interval time.Duration, mt *consumer.Metrics) {
	if interval <= 0 {
		return
	}
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			m.printProgress(mt)
		}
	}
}

func (m *Main) printProgress(mt *consumer.Metrics) {
	s := mt.Stats()
	fmt.Fprintf(m.Stderr, "sink: %d updates landed in %d batches, frontier %d, lag %s\n",
		s.Updates, s.Batches, s.Frontier, s.Lag(time.Now()).Round(time.Millisecond))
}
