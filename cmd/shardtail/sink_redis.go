package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/consumer/redissink"
)

func init() {
	registerSink("redis", "land one collection in Redis by the frozen key contract", (*Main).sinkRedis)
}

const sinkRedisUsage = `shardtail sink redis: land one collection in Redis, exactly once

Each row is a hash {v: the row as JSON, ts: its mz_timestamp} under
<namespace>g<N>:<key JSON array> (the README's "Redis sink key contract");
<namespace>active names the generation readers use. Every batch's keys and
the checkpoint change in one atomic Redis function call, guarded by
mz_timestamp, so a restarted or stale sink never moves a key backwards.

Usage:
  shardtail sink redis --collection NAME --key COL[,COL...] [flags]

Example:
  shardtail sink redis --source postgres://materialize@127.0.0.1:6875/materialize \
    --collection orders --key customer,placed --target redis://127.0.0.1:6379/0

Flags:
`

// sinkRedis runs `shardtail sink redis`.
func (m *Main) sinkRedis(ctx context.Context, args []string) error {
	var f sinkFlags
	fs := m.newSinkFlagSet("redis", sinkRedisUsage, &f)
	fs.Lookup("collection").Usage = "collection to land (exactly one)"
	target := fs.String("target", "redis://127.0.0.1:6379/0", "Redis URL (redis://[user:password@]HOST:PORT/DB)")
	keys := fs.String("key", "", "KEY columns, comma-separated, in KEY order (required)")
	namespace := fs.String("namespace", "", `key prefix (default: the collection's name and ":")`)
	tombstones := fs.Bool("tombstones", false, "keep a deleted row's key with its deletion timestamp and no value")
	if err := parseSinkFlags(fs, args); err != nil {
		return err
	}
	cfg, err := f.config()
	if err != nil {
		return fmt.Errorf("sink redis: %w", err)
	}
	if len(cfg.Sources) != 1 {
		return errors.New("sink redis: exactly one --collection")
	}
	if *keys == "" {
		return errors.New("sink redis: --key is required")
	}
	ns := *namespace
	if ns == "" {
		ns = strings.Trim(cfg.Sources[0].Name, `"`) + ":"
	}
	opts, err := redis.ParseURL(*target)
	if err != nil {
		return fmt.Errorf("sink redis: --target: %w", err)
	}
	// The sink retries and resolves ambiguous writes itself (by the
	// checkpoint); a client that resent writes on its own would only
	// add round trips.
	opts.MaxRetries = -1
	stats := &redisSinkStats{}
	var registerOnce sync.Once
	err = m.runSink(ctx, &f, cfg, func(ctx context.Context, reg prometheus.Registerer) (consumer.Sink, consumer.Checkpoint, func(), error) {
		rdb := redis.NewClient(opts)
		sink, err := redissink.New(ctx, redissink.Config{
			Client:     rdb,
			Namespace:  ns,
			Key:        strings.Split(*keys, ","),
			Tombstones: *tombstones,
			Logger:     slog.Default(),
		})
		if err != nil {
			rdb.Close()
			return nil, nil, nil, err
		}
		registerOnce.Do(func() { stats.register(reg) })
		stats.open(sink)
		return sink, sink, func() { sink.Close(); stats.close(sink); rdb.Close() }, nil
	})
	st := stats.total()
	fmt.Fprintf(m.Stderr, "sink redis: %d keys written, %d stale writes rejected, %d key violations, %d generation switches, %d old keys deleted\n",
		st.Applied, st.Stale, st.KeyViolations, st.Generations, st.Deleted)
	if err != nil {
		return fmt.Errorf("sink redis: %w", err)
	}
	return nil
}

// redisSinkStats adds up the Stats of the sinks a process opened (runSink
// reopens the target after a transient failure), so that the exported
// counters never go backwards.
type redisSinkStats struct {
	mu     sync.Mutex
	closed redissink.Stats // mu must be held. The sum of closed sinks'.
	cur    *redissink.Sink // mu must be held. The open sink, or nil.
}

func (r *redisSinkStats) open(s *redissink.Sink) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur = s
}

func (r *redisSinkStats) close(s *redissink.Sink) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = addStats(r.closed, s.Stats())
	if r.cur == s {
		r.cur = nil
	}
}

func (r *redisSinkStats) total() redissink.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		return r.closed
	}
	return addStats(r.closed, r.cur.Stats())
}

func addStats(a, b redissink.Stats) redissink.Stats {
	return redissink.Stats{
		Applied:       a.Applied + b.Applied,
		Stale:         a.Stale + b.Stale,
		KeyViolations: a.KeyViolations + b.KeyViolations,
		Generations:   a.Generations + b.Generations,
		Deleted:       a.Deleted + b.Deleted,
	}
}

// register exports the totals as redis_sink_* counters.
func (r *redisSinkStats) register(reg prometheus.Registerer) {
	counter := func(name, help string, get func(redissink.Stats) int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "redis_sink_" + name, Help: help},
			func() float64 { return float64(get(r.total())) }))
	}
	counter("keys_written_total", "Key writes (sets and deletes) Redis applied.", func(s redissink.Stats) int64 { return s.Applied })
	counter("stale_writes_total", "Key writes the mz_timestamp guard rejected (the stored row was as new or newer).", func(s redissink.Stats) int64 { return s.Stale })
	counter("key_violations_total", "Keys with more than one row at one timestamp.", func(s redissink.Stats) int64 { return s.KeyViolations })
	counter("generation_switches_total", "Generations this process made active.", func(s redissink.Stats) int64 { return s.Generations })
	counter("old_generation_keys_deleted_total", "Keys of old generations deleted.", func(s redissink.Stats) int64 { return s.Deleted })
}
