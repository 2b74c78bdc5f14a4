package adapter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// dataflowHandle owns one background dataflow (a materialized view's
// maintenance or a source's generator).
type dataflowHandle struct {
	cancel context.CancelFunc
	done   chan struct{}
	// err is why a materialized view is stalled (a row its expressions
	// cannot evaluate); nil while it is healthy.
	err atomic.Pointer[error]
}

// viewError returns why the view with id is stalled, or nil.
func (c *Coordinator) viewError(id uint64) error {
	c.mu.Lock()
	df := c.dataflows[id]
	c.mu.Unlock()
	if df == nil {
		return nil
	}
	if p := df.err.Load(); p != nil {
		return *p
	}
	return nil
}

// writeFloor is the newest acknowledged write to the tables and sources
// that an item reads, directly or through other views.
func (c *Coordinator) writeFloor(it *Item) uint64 {
	cs := c.catalog.State()
	var floor uint64
	seen := map[uint64]bool{}
	var walk func(*Item)
	walk = func(it *Item) {
		if it == nil || seen[it.ID] {
			return
		}
		seen[it.ID] = true
		if it.Kind == KindTable || it.Kind == KindSource {
			floor = max(floor, c.storage.LastWrite(it.Shard))
		}
		for _, d := range it.DependsOn {
			walk(cs.ItemByID(d))
		}
	}
	walk(it)
	return floor
}

func (d *dataflowHandle) stop() {
	d.cancel()
	<-d.done
}

// spawn runs f as the dataflow of item id until stopped, restarting it with
// a backoff after errors (storage outages); it gives up when the item's
// shard is dropped.
func (c *Coordinator) spawn(id uint64, name string, f func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(c.ctx)
	h := &dataflowHandle{cancel: cancel, done: make(chan struct{})}
	c.mu.Lock()
	c.dataflows[id] = h
	c.mu.Unlock()
	go func() {
		defer close(h.done)
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			err := f(ctx)
			if err == nil || ctx.Err() != nil || errors.Is(err, persist.ErrShardTombstoned) {
				return
			}
			c.log.Warn("dataflow failed; restarting", "item", name, "err", err, "backoff", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 10*time.Second)
		}
	}()
}

// systemSession plans on behalf of the server itself (superuser).
func (c *Coordinator) systemSession() *Session {
	return newSession(c, pgwire.ConnInfo{User: defaultRole, ProcessID: ^uint32(0)})
}

// startMaterializedView starts the maintenance dataflow of a materialized
// view: it follows the input's shard, applies the view's map/filter/project
// and appends the result to the view's shard, batch by batch, so the view's
// upper tracks the input's. It resumes from the view's own upper after a
// restart; if the input has since compacted past it, it first appends the
// correction between the stored contents and a fresh evaluation.
func (c *Coordinator) startMaterializedView(ctx context.Context, it *Item) error {
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
	q.mfp = renameMFP(q.mfp, it.Schema)
	c.spawn(it.ID, it.Name, func(ctx context.Context) error { return c.maintainView(ctx, it, q) })
	return nil
}

func (c *Coordinator) setViewError(id uint64, err error) {
	c.mu.Lock()
	df := c.dataflows[id]
	c.mu.Unlock()
	if df == nil {
		return
	}
	if err == nil {
		df.err.Store(nil)
	} else {
		df.err.Store(&err)
	}
}

func (c *Coordinator) maintainView(ctx context.Context, it *Item, q *queryPlan) error {
	r, err := c.persist.OpenReader(ctx, q.input.Shard, persist.ReaderOptions{Purpose: "materialized view " + it.Name})
	if err != nil {
		return err
	}
	defer r.Close()
	out, err := c.persist.State(ctx, it.Shard)
	if err != nil {
		return err
	}
	in, err := c.persist.WaitForUpper(ctx, q.input.Shard, 0)
	if err != nil {
		return err
	}
	upper := out.Upper
	var asOf uint64
	switch {
	case upper == 0:
		// First run: the view starts at the input's latest time.
		asOf = max(in.Upper-1, r.Since())
	case upper-1 >= r.Since():
		asOf = upper - 1
	default:
		// The input compacted past the view's upper while it was down.
		asOf = r.Since()
	}
	m := q.mfp.bind(nil)
	if upper == 0 || asOf > upper-1 {
		fresh, err := c.evaluate(ctx, r, asOf, m)
		if err != nil {
			return err
		}
		var correction []row.Update
		if upper > 0 {
			vr, err := c.persist.OpenReader(ctx, it.Shard, persist.ReaderOptions{Purpose: "materialized view correction"})
			if err != nil {
				return err
			}
			stored, err := readAll(ctx, vr, upper-1)
			vr.Close()
			if err != nil {
				return err
			}
			for _, u := range stored {
				correction = append(correction, row.Update{Row: u.Row, Diff: -u.Diff})
			}
		}
		correction = append(correction, fresh...)
		for i := range correction {
			correction[i].T = asOf
		}
		correction = row.Consolidate(correction)
		if err := c.storage.AppendAt(ctx, it.Shard, correction, upper, asOf+1); err != nil {
			return err
		}
		upper = asOf + 1
	}
	l, err := r.Listen(ctx, asOf)
	if err != nil {
		return err
	}
	// pending holds input updates the view could not evaluate (a row its
	// expressions fail on, such as a division by zero). The view stalls
	// there and reports the error to readers; later batches join pending,
	// with times advanced to their frontier, until the bad rows are
	// retracted and the whole evaluates — then the view resumes at that
	// frontier, correct from there on.
	var pending []row.Update
	for {
		updates, frontier, err := l.Next(ctx)
		if err != nil {
			return err
		}
		if frontier <= upper {
			continue
		}
		batch := updates
		if pending != nil {
			pending = append(pending, updates...)
			for i := range pending {
				pending[i].T = frontier - 1
			}
			pending = row.Consolidate(pending)
			batch = pending
		}
		mapped, evalErr := applyMFP(m, batch)
		if evalErr != nil {
			if pending == nil {
				pending = append([]row.Update(nil), updates...)
			}
			c.setViewError(it.ID, evalErr)
			continue
		}
		if pending != nil {
			pending = nil
			c.setViewError(it.ID, nil)
		}
		if err := c.storage.AppendAt(ctx, it.Shard, row.Consolidate(mapped), upper, frontier); err != nil {
			return err
		}
		upper = frontier
		_ = r.Downgrade(ctx, frontier-1)
	}
}

// applyMFP maps updates through m.
func applyMFP(m *mfp, updates []row.Update) ([]row.Update, error) {
	var out []row.Update
	for _, u := range updates {
		r, ok, err := m.Apply(u.Row)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, row.Update{Row: r, T: u.T, Diff: u.Diff})
		}
	}
	return out, nil
}

// evaluate reads the input at asOf through the MFP.
func (c *Coordinator) evaluate(ctx context.Context, r *persist.Reader, asOf uint64, m *mfp) ([]row.Update, error) {
	cur, err := r.Snapshot(ctx, asOf)
	if err != nil {
		return nil, err
	}
	var out []row.Update
	err = cur.Each(ctx, func(chunk []row.Update) error {
		for _, u := range chunk {
			o, ok, err := m.Apply(u.Row)
			if err != nil {
				return err
			}
			if ok {
				out = append(out, row.Update{Row: o, T: asOf, Diff: u.Diff})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return row.Consolidate(out), nil
}

// Load generators (CREATE SOURCE ... FROM LOAD GENERATOR).

// generator describes a load generator's schema and options.
type generator struct {
	kind      string
	tick      time.Duration
	keys      int64
	valueSize int
	batchSize int64
	seed      uint64
	parts     int64
	maxCard   int64
}

func parseGenerator(st *sql.CreateSource) (*generator, error) {
	g := &generator{kind: st.Generator, tick: time.Second, keys: 16, valueSize: 64, batchSize: 1, parts: 1}
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
			g.tick, err = parseInterval(v)
			if err == nil && g.tick <= 0 {
				err = errorf(codeInvalidParamValue, "TICK INTERVAL must be positive")
			}
		case "KEYS":
			g.keys, err = intOpt(o)
		case "VALUE SIZE":
			var n int64
			n, err = intOpt(o)
			g.valueSize = int(n)
		case "BATCH SIZE":
			g.batchSize, err = intOpt(o)
		case "SEED":
			var n int64
			n, err = intOpt(o)
			g.seed = uint64(n)
		case "PARTITIONS":
			g.parts, err = intOpt(o)
		case "MAX CARDINALITY":
			g.maxCard, err = intOpt(o)
		case "SNAPSHOT ROUNDS", "TRANSACTIONAL SNAPSHOT", "AS OF", "UP TO", "SCALE FACTOR":
		default:
			return nil, errorf(codeFeatureNotSupp, "load generator option %s not supported", o.Name)
		}
		if err != nil {
			return nil, err
		}
	}
	switch g.kind {
	case "COUNTER":
	case "KEY VALUE":
		if g.parts < 1 || g.keys < 1 || g.keys%g.parts != 0 {
			return nil, errorf(codeInvalidParamValue, "KEYS must be a positive multiple of PARTITIONS")
		}
		if g.batchSize < 1 {
			g.batchSize = 1
		}
	default:
		return nil, errorf(codeFeatureNotSupp, "LOAD GENERATOR %s is not supported (COUNTER and KEY VALUE are)", g.kind)
	}
	return g, nil
}

func (g *generator) schema() row.Schema {
	if g.kind == "COUNTER" {
		return row.Schema{Columns: []row.Column{{Name: "counter", Type: row.TypeInt8}}}
	}
	return row.Schema{Columns: []row.Column{
		{Name: "key", Type: row.TypeInt8},
		{Name: "partition", Type: row.TypeInt8},
		{Name: "value", Type: row.TypeBytea},
	}}
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
	return s.ddlPlan("CREATE SOURCE", func(ctx context.Context) ([][]byte, error) {
		if _, ok := s.c.catalog.State().Items[name]; ok && st.IfNotExists {
			return [][]byte{notice("42P07", fmt.Sprintf("catalog item '%s' already exists, skipping", name), "")}, nil
		}
		_, err := s.c.createCollection(ctx, &Item{Name: name, Kind: KindSource, Schema: g.schema(), SQL: st.String(), Owner: s.user})
		return nil, err
	}), nil
}

// startSource starts a load generator: it resumes from the source's
// contents, so a restart continues the sequence.
func (c *Coordinator) startSource(ctx context.Context, it *Item) error {
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
	c.spawn(it.ID, it.Name, func(ctx context.Context) error { return c.runGenerator(ctx, it, g) })
	return nil
}

func (c *Coordinator) runGenerator(ctx context.Context, it *Item, g *generator) error {
	st, err := c.persist.State(ctx, it.Shard)
	if err != nil {
		return err
	}
	// Resume: the current contents tell where the generator was.
	var current []row.Update
	if st.Upper > 0 {
		r, err := c.persist.OpenReader(ctx, it.Shard, persist.ReaderOptions{Purpose: "load generator"})
		if err != nil {
			return err
		}
		current, err = readAll(ctx, r, st.Upper-1)
		r.Close()
		if err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewPCG(g.seed, uint64(len(current))))
	value := func() []byte {
		b := make([]byte, g.valueSize)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	var counter int64
	values := map[int64][]byte{}
	for _, u := range current {
		if g.kind == "COUNTER" {
			counter = max(counter, u.Row[0].(int64))
		} else {
			values[u.Row[0].(int64)] = u.Row[2].([]byte)
		}
	}
	if g.kind == "KEY VALUE" && len(values) == 0 {
		// The snapshot: every key once.
		var ups []row.Update
		for k := range g.keys {
			v := value()
			values[k] = v
			ups = append(ups, row.Update{Row: row.Row{k, k % g.parts, v}, Diff: 1})
		}
		if _, err := c.storage.Append(ctx, it.Shard, ups); err != nil {
			return err
		}
	}
	next := int64(0)
	t := time.NewTicker(g.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var ups []row.Update
		if g.kind == "COUNTER" {
			counter++
			ups = append(ups, row.Update{Row: row.Row{counter}, Diff: 1})
			if g.maxCard > 0 && counter > g.maxCard {
				ups = append(ups, row.Update{Row: row.Row{counter - g.maxCard}, Diff: -1})
			}
		} else {
			for range g.batchSize {
				k := next % g.keys
				next++
				old := values[k]
				v := value()
				values[k] = v
				ups = append(ups, row.Update{Row: row.Row{k, k % g.parts, old}, Diff: -1}, row.Update{Row: row.Row{k, k % g.parts, v}, Diff: 1})
			}
		}
		if _, err := c.storage.Append(ctx, it.Shard, ups); err != nil {
			return err
		}
	}
}
