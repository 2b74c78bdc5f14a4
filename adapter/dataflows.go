package adapter

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/shardtail/shardtail/catalog"
	"github.com/shardtail/shardtail/dataflow"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/sql"
)

// viewError returns why the view with id is stalled, or nil.
func (c *Coordinator) viewError(id uint64) error {
	c.mu.Lock()
	df := c.dataflows[id]
	c.mu.Unlock()
	if df == nil {
		return nil
	}
	return df.Stalled()
}

// writeFloor is the newest acknowledged write to the tables and sources
// that an item reads, directly or through other views.
func (c *Coordinator) writeFloor(it *catalog.Item) uint64 {
	cs := c.catalog.State()
	var floor uint64
	seen := map[uint64]bool{}
	var walk func(*catalog.Item)
	walk = func(it *catalog.Item) {
		if it == nil || seen[it.ID] {
			return
		}
		seen[it.ID] = true
		if it.Kind == catalog.KindTable || it.Kind == catalog.KindSource {
			floor = max(floor, c.storage.LastWrite(it.Shard))
		}
		for _, d := range it.DependsOn {
			walk(cs.ItemByID(d))
		}
	}
	walk(it)
	return floor
}

// startDataflow runs job as the dataflow of item id until stopItem or
// Close stops it.
func (c *Coordinator) startDataflow(id uint64, name string, job dataflow.Job) {
	h := dataflow.Start(c.ctx, c.log, name, job)
	c.mu.Lock()
	c.dataflows[id] = h
	c.mu.Unlock()
}

// systemSession plans on behalf of the server itself (superuser).
func (c *Coordinator) systemSession() *Session {
	return newSession(c, pgwire.ConnInfo{User: defaultRole, ProcessID: ^uint32(0)})
}

// startMaterializedView plans a materialized view's definition and starts
// its maintenance (dataflow.View).
func (c *Coordinator) startMaterializedView(ctx context.Context, it *catalog.Item) error {
	st, err := sql.Parse(it.SQL)
	if err != nil {
		return fmt.Errorf("parse definition: %w", err)
	}
	cv, ok := st.(*sql.CreateView)
	if !ok {
		return fmt.Errorf("definition is a %T", st)
	}
	q, err := c.systemSession().planQuery(cv.Query, nil)
	if err != nil {
		return err
	}
	m := renameMFP(q.mfp, it.Schema)
	c.startDataflow(it.ID, it.Name, dataflow.NewView(dataflow.ViewConfig{
		Persist: c.persist, Storage: c.storage, Name: it.Name, Input: q.input.Shard, Shard: it.Shard,
		MFP: func() dataflow.MFP { return m.bind(nil) },
	}))
	return nil
}

// Load generators (CREATE SOURCE ... FROM LOAD GENERATOR).

// parseGenerator reads a load generator's kind and options.
func parseGenerator(st *sql.CreateSource) (*dataflow.Generator, error) {
	g := &dataflow.Generator{Kind: st.Generator, Tick: time.Second, Keys: 16, ValueSize: 64, BatchSize: 1, Partitions: 1}
	intOpt := func(o sql.Option) (int64, error) {
		v, ok := sql.ValueText(o.Value)
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || n < 0 {
			return 0, errorf(codeInvalidParamValue, "%s must be a non-negative integer", o.Name)
		}
		return n, nil
	}
	for _, o := range st.Options {
		var err error
		switch o.Name {
		case "TICK INTERVAL":
			v, ok := sql.ValueText(o.Value)
			if !ok {
				return nil, errorf(codeInvalidParamValue, "TICK INTERVAL must be an interval")
			}
			g.Tick, err = parseInterval(v)
			if err == nil && g.Tick <= 0 {
				err = errorf(codeInvalidParamValue, "TICK INTERVAL must be positive")
			}
		case "KEYS":
			g.Keys, err = intOpt(o)
		case "VALUE SIZE":
			var n int64
			n, err = intOpt(o)
			g.ValueSize = int(n)
		case "BATCH SIZE":
			g.BatchSize, err = intOpt(o)
		case "SEED":
			var n int64
			n, err = intOpt(o)
			g.Seed = uint64(n)
		case "PARTITIONS":
			g.Partitions, err = intOpt(o)
		case "MAX CARDINALITY":
			g.MaxCardinality, err = intOpt(o)
		case "SNAPSHOT ROUNDS", "TRANSACTIONAL SNAPSHOT", "AS OF", "UP TO", "SCALE FACTOR":
		default:
			return nil, errorf(codeFeatureNotSupp, "load generator option %s not supported", o.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	switch g.Kind {
	case dataflow.GeneratorCounter:
	case dataflow.GeneratorKeyValue:
		if g.Partitions < 1 || g.Keys < 1 || g.Keys%g.Partitions != 0 {
			return nil, errorf(codeInvalidParamValue, "KEYS must be a positive multiple of PARTITIONS")
		}
		if g.BatchSize < 1 {
			g.BatchSize = 1
		}
	default:
		return nil, errorf(codeFeatureNotSupp, "LOAD GENERATOR %s is not supported (COUNTER and KEY VALUE are)", g.Kind)
	}
	return g, nil
}

func (s *Session) planCreateSource(st *sql.CreateSource) (*plan, error) {
	name, err := resolveName(st.Name)
	if err != nil {
		return nil, err
	}
	g, err := parseGenerator(st)
	if err != nil {
		return nil, err
	}
	retain, err := retainHistory(st.With, "CREATE SOURCE ... WITH")
	if err != nil {
		return nil, err
	}
	return s.ddlPlan("CREATE SOURCE", func(ctx context.Context) ([][]byte, error) {
		if _, ok := s.c.catalog.State().Items[name]; ok && st.IfNotExists {
			return [][]byte{notice("42P07", fmt.Sprintf("catalog item '%s' already exists, skipping", name), "")}, nil
		}
		_, err := s.c.createCollection(ctx, &catalog.Item{Name: name, Kind: catalog.KindSource, Schema: g.Schema(), SQL: st.String(), Owner: s.user, RetainMs: retain})
		return nil, err
	}), nil
}

// startSource starts a load generator: it resumes from the source's
// contents, so a restart continues the sequence.
func (c *Coordinator) startSource(ctx context.Context, it *catalog.Item) error {
	st, err := sql.Parse(it.SQL)
	if err != nil {
		return err
	}
	cs, ok := st.(*sql.CreateSource)
	if !ok {
		return fmt.Errorf("definition is a %T", st)
	}
	g, err := parseGenerator(cs)
	if err != nil {
		return err
	}
	c.startDataflow(it.ID, it.Name, &dataflow.Source{Persist: c.persist, Storage: c.storage, Shard: it.Shard, Generator: *g})
	return nil
}
