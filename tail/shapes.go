package tail

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/subscribe"
)

// shapeCache holds data shared by every subscriber (a listen batch, a
// snapshot piece) computed once per key: mapped through a shape's MFP
// (subscribe.Shape.Key), or formatted into output rows once per shape and
// output shape (outputKey): subscribers with the same key share the work
// and its result. The zero value is empty and ready.
//
// A value computed is found without a lock: every subscriber of a batch
// looks it up as the batch is fanned out, and under one mutex the
// thousands of sessions a batch wakes at once queued on it (a starved
// mutex hands itself over with a goroutine switch each time) and, blocked,
// each had pgwire start another goroutine for the connections behind it:
// a convoy of a goroutine per subscriber that the writer's session waited
// behind.
type shapeCache[T any] struct {
	mu sync.Mutex // serializes compute
	// first is the first key's value, found with a load and a string
	// comparison: in the usual case every subscriber of a batch has the
	// same output (a table's plain COPY subscribers), and a sweep of
	// 10,000 of them each taking many batches looked the key up in the
	// map (an interface key hashed) a few times per batch (2 % of the
	// server's CPU).
	first  atomic.Pointer[shapeEntry[T]]
	shapes sync.Map // key -> T, for the keys after the first; stored under mu, loaded without it
}

// shapeEntry is a key of a shapeCache and its value.
type shapeEntry[T any] struct {
	key string
	v   T
}

// get returns the value for key, computing it with compute on first use.
// compute runs under the cache's lock, so that subscribers of a shape that
// arrive together compute it once, not once each. Rows it returns must be
// marked formatter.Shared: their encodings are then computed once too, and
// no subscriber may modify them.
func (c *shapeCache[T]) get(key string, compute func() T) T {
	if v, ok := c.load(key); ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.load(key); ok {
		return v
	}
	v := compute()
	if c.first.Load() == nil {
		c.first.Store(&shapeEntry[T]{key, v})
	} else {
		c.shapes.Store(key, v)
	}
	return v
}

// load returns key's value if it was computed.
func (c *shapeCache[T]) load(key string) (T, bool) {
	if e := c.first.Load(); e == nil {
		var zero T
		return zero, false // nothing yet: the map is empty too
	} else if e.key == key {
		return e.v, true
	}
	if v, ok := c.shapes.Load(key); ok {
		return v.(T), true
	}
	var zero T
	return zero, false
}

// outputKey is the cache key of rows mapped through sh (nil: the
// collection's rows as they are) and formatted for opts.
func outputKey(sh *subscribe.Shape, opts *formatter.Options) string {
	if sh == nil {
		return opts.ShapeKey()
	}
	return sh.Key + "\x00" + opts.ShapeKey()
}

// decoded is a list of updates shared by subscribers (a listen batch, a
// snapshot piece), with what shapes compute from it once: each shape's
// mapped updates, and for each indexed column the positions of the rows
// by value, which route rows to the shapes whose equality they satisfy.
type decoded struct {
	updates []row.Update

	routeMu sync.Mutex
	routes  map[int]map[row.Datum][]int32 // routeMu: column -> value -> positions

	mapped shapeCache[mapped]
}

// mapped is updates mapped through one shape's MFP, or the error the MFP
// failed with on the first row it failed on.
type mapped struct {
	updates []row.Update
	err     error
}

// route returns the positions of the updates whose column col holds
// value (nil for NULL), computing the column's table on first use.
func (d *decoded) route(col int) map[row.Datum][]int32 {
	d.routeMu.Lock()
	defer d.routeMu.Unlock()
	if r, ok := d.routes[col]; ok {
		return r
	}
	r := map[row.Datum][]int32{}
	for i, u := range d.updates {
		if col < len(u.Row) {
			r[u.Row[col]] = append(r[u.Row[col]], int32(i))
		}
	}
	if d.routes == nil {
		d.routes = map[int]map[row.Datum][]int32{}
	}
	d.routes[col] = r
	return r
}

// reaches reports whether some update's column x.Col holds one of x's
// keys: a shape indexed by x drops the others without evaluating them.
func (d *decoded) reaches(x *subscribe.Index) bool {
	r := d.route(x.Col)
	for _, v := range x.Keys() {
		if len(r[v]) > 0 {
			return true
		}
	}
	return false
}

// candidates returns the positions, in order, of the updates sh's MFP may
// pass: those its index routes to it, or all (nil, false) without an index.
func (d *decoded) candidates(sh *subscribe.Shape) ([]int32, bool) {
	if sh.Index == nil {
		return nil, false
	}
	r := d.route(sh.Index.Col)
	keys := sh.Index.Keys()
	var pos []int32
	for _, v := range keys {
		pos = append(pos, r[v]...)
	}
	if len(keys) > 1 {
		// IN (a, b): the updates in their order, as evaluating every
		// update would meet them (the first error must be the same).
		slices.Sort(pos)
		pos = slices.Compact(pos)
	}
	return pos, true
}

// apply maps the updates through sh's MFP once per shape, evaluating only
// the candidates its index routes to it. consolidate consolidates the
// result in time order (a listen batch: two rows the MFP maps to one must
// reach the client as one, as on the dataflow path); a snapshot piece is
// consolidated with the rest of its snapshot instead.
func (d *decoded) apply(sh *subscribe.Shape, consolidate bool, m *Metrics) mapped {
	if sh.Index != nil && !d.reaches(sh.Index) {
		// Its MFP drops every update without error: no evaluation, and
		// no entry in the cache (a sweep asks this of every routed shape
		// with PROGRESS).
		return mapped{}
	}
	return d.mapped.get(sh.Key, func() mapped {
		m.shapeEvals.Inc()
		pos, indexed := d.candidates(sh)
		n := len(d.updates)
		if indexed {
			n = len(pos)
			m.rowsRouted.Add(float64(n))
		}
		m.rowsEvaluated.Add(float64(n))
		out := make([]row.Update, 0, n)
		for i := range n {
			u := &d.updates[i]
			if indexed {
				u = &d.updates[pos[i]]
			}
			r, ok, err := sh.MFP.Apply(u.Row)
			if err != nil {
				return mapped{err: err}
			}
			if ok {
				out = append(out, row.Update{Row: r, T: u.T, Diff: u.Diff})
			}
		}
		if consolidate {
			out = row.Consolidate(out)
			row.SortByTime(out)
		}
		return mapped{updates: out}
	})
}

// shapeSubs is one distinct shape of a tail's subscribers.
type shapeSubs struct {
	shape *subscribe.Shape
	n     int // subscribers of the shape
	// routed are the subscribers of the shape that only need the batches
	// its index routes rows to (see Subscriber.routed).
	routed map[*Subscriber]struct{}
}

// addSubscriber registers s with the tail's shapes: s gets every batch
// (t.every) unless its shape's index routes batches to it. t.mu must be
// held.
func (t *SharedTail) addSubscriber(s *Subscriber) {
	t.subs[s] = struct{}{}
	sh := s.req.Shape
	if sh == nil {
		t.every[s] = struct{}{}
		return
	}
	ss := t.shapes[sh.Key]
	if ss == nil {
		ss = &shapeSubs{shape: sh, routed: map[*Subscriber]struct{}{}}
		t.shapes[sh.Key] = ss
		t.m.metrics.shapes.WithLabelValues(t.shard).Inc()
		if idx := sh.Index; idx != nil {
			byValue := t.indexed[idx.Col]
			if byValue == nil {
				byValue = map[row.Datum]map[*shapeSubs]struct{}{}
				t.indexed[idx.Col] = byValue
			}
			for _, v := range idx.Keys() {
				if byValue[v] == nil {
					byValue[v] = map[*shapeSubs]struct{}{}
				}
				byValue[v][ss] = struct{}{}
			}
		}
	}
	ss.n++
	if s.routed() {
		ss.routed[s] = struct{}{}
		if s.req.Output.Progress {
			t.progressed.add(s)
		}
	} else {
		t.every[s] = struct{}{}
	}
}

// removeSubscriber unregisters s, and its shape with its last subscriber.
// t.mu must be held.
func (t *SharedTail) removeSubscriber(s *Subscriber) {
	delete(t.subs, s)
	delete(t.every, s)
	t.progressed.remove(s)
	sh := s.req.Shape
	if sh == nil {
		return
	}
	ss := t.shapes[sh.Key]
	delete(ss.routed, s)
	if ss.n--; ss.n > 0 {
		return
	}
	delete(t.shapes, sh.Key)
	t.m.metrics.shapes.WithLabelValues(t.shard).Dec()
	if idx := sh.Index; idx != nil {
		byValue := t.indexed[idx.Col]
		for _, v := range idx.Keys() {
			delete(byValue[v], ss)
			if len(byValue[v]) == 0 {
				delete(byValue, v)
			}
		}
		if len(byValue) == 0 {
			delete(t.indexed, idx.Col)
		}
	}
}

// routedShapes returns the indexed shapes some row of b is routed to: a
// write costs the distinct values it holds in each indexed column plus
// the shapes it matches, not a look at every shape. t.mu must be held.
func (t *SharedTail) routedShapes(b *batch) map[*shapeSubs]struct{} {
	matched := map[*shapeSubs]struct{}{}
	for col, byValue := range t.indexed {
		for v := range b.route(col) {
			for ss := range byValue[v] {
				matched[ss] = struct{}{}
			}
		}
	}
	return matched
}

// pushRouted queues b for the subscribers of the indexed shapes it routes
// rows to, and sweeps progress to the other routed subscribers with
// PROGRESS when one is due. t.mu must be held.
func (t *SharedTail) pushRouted(b *batch) {
	if len(t.indexed) == 0 {
		return
	}
	pushed := 0
	matched := t.routedShapes(b)
	for ss := range matched {
		for s := range ss.routed {
			s.push(b)
		}
		pushed += len(ss.routed)
	}
	pushed += t.sweepProgress(b, matched)
	t.m.metrics.pushesSkipped.Add(float64(len(t.subs) - len(t.every) - pushed))
}

// sweepProgress hands b to the routed subscribers with PROGRESS that are
// due (see sweeper) and that it was not routed to (their shape is not in
// matched), and returns how many it handed it to. Each then reports the frontier at b's upper (a progress
// row, which also covers the batches it skipped): every ProgressInterval,
// as often as an idle collection's tick shows it, while a busy
// collection's writes for other values cost it nothing in between.
// Without the sweep every such subscriber would take every batch, and a
// write would cost one delivery per subscriber instead of per matched
// shape. t.mu must be held.
func (t *SharedTail) sweepProgress(b *batch, matched map[*shapeSubs]struct{}) int {
	if b.upper <= b.lower {
		return 0 // b advances no frontier: nothing to report
	}
	n := 0
	for _, s := range t.progressed.due(timeNow(), t.m.cfg.ProgressInterval) {
		if _, routed := matched[t.shapes[s.req.Shape.Key]]; routed {
			// Not by its queue's last batch: a subscriber still taking
			// its snapshot queues nothing, and would be counted twice.
			continue
		}
		s.push(b)
		n++
	}
	return n
}

// sweeper takes subscribers in turn, round robin, at a rate of all of them
// per interval, so that a sweep's deliveries spread over the batches
// published meanwhile instead of arriving all at once (ten thousand
// subscribers woken by one batch would hold up the rows of the next). The
// zero value is empty and ready.
type sweeper struct {
	subs []*Subscriber
	pos  map[*Subscriber]int // index in subs
	next int                 // the next index due
	at   time.Time           // when subs[next] became due
}

func (w *sweeper) add(s *Subscriber) {
	if w.pos == nil {
		w.pos = map[*Subscriber]int{}
	}
	w.pos[s] = len(w.subs)
	w.subs = append(w.subs, s)
}

// remove drops s, moving the last subscriber to its place: that one may
// be taken once early or once late in the current round.
func (w *sweeper) remove(s *Subscriber) {
	i, ok := w.pos[s]
	if !ok {
		return
	}
	last := len(w.subs) - 1
	w.subs[i] = w.subs[last]
	w.pos[w.subs[i]] = i
	w.subs[last] = nil
	w.subs = w.subs[:last]
	delete(w.pos, s)
	if w.next >= len(w.subs) {
		w.next = 0
	}
}

// due returns the subscribers whose turn came by now: all of them when an
// interval or more passed since the last, else the share of the interval
// that passed (the rest of a share carries over to the next call).
func (w *sweeper) due(now time.Time, interval time.Duration) []*Subscriber {
	n := len(w.subs)
	if n == 0 {
		return nil
	}
	k := n
	if elapsed := now.Sub(w.at); elapsed < interval {
		k = int(int64(n) * int64(elapsed) / int64(interval))
		if k == 0 {
			return nil
		}
		w.at = w.at.Add(time.Duration(int64(k) * int64(interval) / int64(n)))
	} else {
		w.at = now
	}
	var out []*Subscriber
	if end := w.next + k; end <= n {
		out = w.subs[w.next:end:end]
	} else {
		out = append(append([]*Subscriber(nil), w.subs[w.next:]...), w.subs[:end-n]...)
	}
	w.next = (w.next + k) % n
	return out
}
