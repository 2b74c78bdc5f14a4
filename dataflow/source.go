package dataflow

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// Load generator kinds (CREATE SOURCE ... FROM LOAD GENERATOR kind).
const (
	// GeneratorCounter appends 1, 2, 3, ..., one number per tick; with
	// MaxCardinality it retracts the oldest past that many.
	GeneratorCounter = "COUNTER"
	// GeneratorKeyValue holds Keys keys with random values: a snapshot of
	// every key, then BatchSize keys updated per tick, round robin.
	GeneratorKeyValue = "KEY VALUE"
)

// Generator is a load generator's kind and options, as CREATE SOURCE
// gave them (the adapter parses and checks them).
type Generator struct {
	Kind           string
	Tick           time.Duration
	Keys           int64
	ValueSize      int
	BatchSize      int64
	Seed           uint64
	Partitions     int64
	MaxCardinality int64
}

// Schema is the source's relation: (counter) or (key, partition, value).
func (g *Generator) Schema() row.Schema {
	if g.Kind == GeneratorCounter {
		return row.Schema{Columns: []row.Column{{Name: "counter", Type: row.TypeInt8}}}
	}
	return row.Schema{Columns: []row.Column{
		{Name: "key", Type: row.TypeInt8},
		{Name: "partition", Type: row.TypeInt8},
		{Name: "value", Type: row.TypeBytea},
	}}
}

// Source runs a load generator into its source's shard. It is a Job: each
// Run resumes from the shard's contents, so a restart continues the
// sequence.
type Source struct {
	Persist   *persist.Client
	Storage   Storage
	Shard     string
	Generator Generator
}

// Run appends the generator's updates at every tick until ctx is done.
func (s *Source) Run(ctx context.Context) error {
	g := &s.Generator
	current, err := s.current(ctx)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(g.Seed, uint64(len(current))))
	value := func() []byte {
		b := make([]byte, g.ValueSize)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	var counter int64
	values := map[int64][]byte{}
	for _, u := range current {
		if g.Kind == GeneratorCounter {
			counter = max(counter, u.Row[0].(int64))
		} else {
			values[u.Row[0].(int64)] = u.Row[2].([]byte)
		}
	}
	if g.Kind == GeneratorKeyValue && len(values) == 0 {
		// The snapshot: every key once.
		var ups []row.Update
		for k := range g.Keys {
			v := value()
			values[k] = v
			ups = append(ups, row.Update{Row: row.Row{k, k % g.Partitions, v}, Diff: 1})
		}
		if _, err := s.Storage.Append(ctx, s.Shard, ups); err != nil {
			return err
		}
	}
	next := int64(0)
	t := time.NewTicker(g.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var ups []row.Update
		if g.Kind == GeneratorCounter {
			counter++
			ups = append(ups, row.Update{Row: row.Row{counter}, Diff: 1})
			if g.MaxCardinality > 0 && counter > g.MaxCardinality {
				ups = append(ups, row.Update{Row: row.Row{counter - g.MaxCardinality}, Diff: -1})
			}
		} else {
			for range g.BatchSize {
				k := next % g.Keys
				next++
				old := values[k]
				v := value()
				values[k] = v
				ups = append(ups, row.Update{Row: row.Row{k, k % g.Partitions, old}, Diff: -1}, row.Update{Row: row.Row{k, k % g.Partitions, v}, Diff: 1})
			}
		}
		if _, err := s.Storage.Append(ctx, s.Shard, ups); err != nil {
			return err
		}
	}
}

// current reads the source's contents: where the generator was.
func (s *Source) current(ctx context.Context) ([]row.Update, error) {
	st, err := s.Persist.State(ctx, s.Shard)
	if err != nil || st.Upper == 0 {
		return nil, err
	}
	r, err := s.Persist.OpenReader(ctx, s.Shard, persist.ReaderOptions{Purpose: "load generator"})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return snapshot(ctx, r, st.Upper-1, nil)
}
