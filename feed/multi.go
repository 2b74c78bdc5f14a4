package feed

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/formatter"
	"github.com/shardtail/shardtail/pgwire"
)

// source is one collection of a stream of several (GET
// /v1/subscribe?collection=a&collection=b). Its rows wait in rows until
// every collection's frontier passes them: a progress event at F closes
// all of them below F, one consistent cut.
type source struct {
	name string
	sub  *adapter.Subscription
	wire *jsonWire
	// rows are data rows received and not yet sent, in time order; held
	// is their formatter.Row.Size.
	rows []formatter.Row
	held int64
	// frontier is the collection's progress the stream has taken into
	// account; ahead are its later progress rows received, in order, each
	// taken in turn (see emitMerged); done is set at UP TO.
	frontier uint64
	ahead    []uint64
	done     bool
}

// batch is what a source's reader hands the stream.
type batch struct {
	src  *source
	rows []formatter.Row
	err  error
}

// openSources starts one subscription per collection, all at one AS OF:
// the request's (as_of, or after-1 on a resume), or else the latest of
// the times each collection would start at alone, those below it
// restarted at it.
func (s *stream) openSources(ctx context.Context, user string, tr transport, req *request) error {
	start := func(name string, r request) (*source, error) {
		r.collection = name
		st, err := r.statement()
		if err != nil {
			return nil, err
		}
		sub, err := s.h.coord.Subscribe(ctx, user, tr.String(), st)
		if err != nil {
			return nil, err
		}
		if err := checkKeys(sub.Columns(), name); err != nil {
			sub.Close()
			return nil, err
		}
		// The first row of every subscribe is a progress row at its AS OF,
		// unless AS OF is UP TO: that one completes with no row at all.
		for {
			rows, err := sub.Next(ctx, 0)
			if errors.Is(err, io.EOF) && r.upTo != nil {
				return &source{name: name, sub: sub, wire: newJSONWire(sub.Columns(), name, s.f.sep()),
					frontier: *r.upTo, done: true}, nil
			}
			if err != nil {
				sub.Close()
				return nil, err
			}
			if len(rows) > 0 {
				// The rest waits to be ingested when the stream runs.
				return &source{name: name, sub: sub, wire: newJSONWire(sub.Columns(), name, s.f.sep()),
					frontier: rows[0].Time, rows: rows[1:]}, nil
			}
		}
	}
	var asOf uint64
	for _, name := range req.collections {
		src, err := start(name, *req)
		if err != nil {
			return err
		}
		s.srcs = append(s.srcs, src)
		asOf = max(asOf, src.frontier)
	}
	if req.asOf == nil && req.after == nil {
		// Each chose its own latest time: restart those behind at the
		// latest, which they can read (it is above their since).
		r := *req
		r.asOf = &asOf
		for i, src := range s.srcs {
			if src.frontier == asOf {
				continue
			}
			src.sub.Close()
			src.sub = nil
			again, err := start(src.name, r)
			if err != nil {
				return err
			}
			s.srcs[i] = again
		}
	}
	if !s.pos.known {
		s.pos.closed, s.pos.known = asOf, true
	}
	return nil
}

// closeSources ends every collection's subscription.
func (s *stream) closeSources() {
	for _, src := range s.srcs {
		if src.sub != nil {
			src.sub.Close()
		}
	}
}

// runMerged streams the collections aligned, as run streams one; with
// snapshot it answers ?live=false instead and returns an error that came
// before the response.
func (s *stream) runMerged(ctx context.Context, snapshot bool) error {
	defer s.charge(true)
	// Watched from the start: its readers wait for their collections.
	s.startWatch()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: the readers return
	defer cancel()
	batches := make(chan batch)
	for _, src := range s.srcs {
		if src.done {
			continue // done at its start (AS OF = UP TO): nothing to read
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				rows, err := src.sub.Next(ctx, 0)
				select {
				case batches <- batch{src: src, rows: rows, err: err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
		pending := src.rows
		src.rows, src.held = nil, 0
		s.ingest(src, pending)
	}
	if !snapshot {
		// Before overHeld, whose reset is the body's first event then
		// (and must follow the gzip header when compressed).
		s.startBody()
	}
	if over, err := s.overHeld(snapshot); over {
		return err
	}
	if snapshot {
		s.startSnapshot()
	} else if !s.write() {
		return nil
	}
	at := s.pos.closed // a snapshot ends at the first frontier above it
	heartbeat := time.NewTicker(s.h.cfg.Heartbeat)
	defer heartbeat.Stop()
	for {
		if !s.emitMerged(snapshot) {
			return s.snapErr
		}
		if snapshot && s.pos.closed > at {
			s.finishSnapshot(s.pos.closed)
			return nil
		}
		select {
		case <-ctx.Done():
			if !snapshot {
				s.stopped()
			}
			return ctx.Err()
		case <-heartbeat.C:
			if !snapshot {
				s.buf = s.f.heartbeat(s.buf)
				if !s.write() {
					return nil
				}
			}
		case b := <-batches:
			switch {
			case b.err == nil:
				s.ingest(b.src, b.rows)
				if over, err := s.overHeld(snapshot); over {
					return err
				}
			case errors.Is(b.err, io.EOF):
				// UP TO: the last progress, after those still queued,
				// which the merge has yet to announce (a collection
				// behind may have held it back).
				b.src.done = true
				s.ingest(b.src, []formatter.Row{{Time: s.upTo, Progressed: true}})
			case ctx.Err() != nil:
				if !snapshot {
					s.stopped()
				}
				return ctx.Err()
			case snapshot:
				return b.err
			case adapter.HistoryLost(b.err):
				s.h.metrics.resets.Inc()
				s.buf = s.f.reset(s.buf, toErrorBody(b.err))
				s.writeLast()
				return nil
			default:
				s.buf = s.f.fail(s.buf, toErrorBody(b.err))
				s.writeLast()
				return nil
			}
		}
	}
}

// ingest takes a batch of one collection: its data rows wait, its
// progress rows queue in ahead. A batch may hold many (a subscription that
// caught up hands its backlog at once): emitMerged takes them one at a
// time, so that the stream announces each frontier the collections pass
// together, as it would had they come one batch at a time; a client whose
// connection breaks early in a large catch-up still resumes past some of
// it.
func (s *stream) ingest(src *source, rows []formatter.Row) {
	for _, r := range rows {
		switch {
		case r.Progressed:
			last := src.frontier
			if n := len(src.ahead); n > 0 {
				last = src.ahead[n-1]
			}
			if r.Time > last {
				src.ahead = append(src.ahead, r.Time)
			}
		case r.Time >= s.pos.minRow:
			src.rows = append(src.rows, r)
			src.held += r.Size()
			s.held += r.Size()
		}
	}
}

// overHeld ends the stream when it holds more than Config.MaxHeldBytes
// of rows: with event: reset (53200), as a subscriber past its budget, or
// for a ?live=false answer with the error to answer.
func (s *stream) overHeld(snapshot bool) (bool, error) {
	if s.held <= s.h.cfg.MaxHeldBytes {
		return false, nil
	}
	err := pgwire.Errorf("53200", "the stream held over %d bytes of collections ahead of a lagging one (%s); reconnect without Last-Event-ID",
		s.h.cfg.MaxHeldBytes, s.lagging())
	if snapshot {
		return true, err
	}
	s.h.metrics.resets.Inc()
	s.buf = s.f.reset(s.buf, toErrorBody(err))
	s.writeLast()
	return true, nil
}

// lagging names the collection with the least frontier, for errors.
func (s *stream) lagging() string {
	slow := s.srcs[0]
	for _, src := range s.srcs[1:] {
		if src.frontier < slow.frontier {
			slow = src
		}
	}
	return slow.name
}

// emitMerged sends the rows below the collections' common frontier and a
// progress event at it, for each frontier it passes as the collections
// take their progress rows in turn (the least first), in one write; at UP
// TO everything and the end. A ?live=false answer stops at the first
// frontier above where it started. It returns false when the stream is
// over.
func (s *stream) emitMerged(snapshot bool) bool {
	moved := false
	for {
		frontier, done := s.mergedFrontier()
		if frontier > s.pos.closed || done {
			moved = true
			if !s.emitBelow(frontier, snapshot) {
				return false
			}
		}
		if done {
			s.buf = s.f.end(s.buf, s.upTo)
			s.writeLast()
			return false
		}
		if (snapshot && moved) || !s.takeAhead(frontier) {
			break
		}
	}
	if snapshot {
		if s.snapErr = s.chargeSnapshot(); s.snapErr != nil {
			return false
		}
		return true
	}
	if !moved {
		return true
	}
	return s.write()
}

// mergedFrontier is the collections' common frontier, and whether every
// one reached UP TO.
func (s *stream) mergedFrontier() (uint64, bool) {
	frontier, done := uint64(0), true
	for i, src := range s.srcs {
		if i == 0 || src.frontier < frontier {
			frontier = src.frontier
		}
		done = done && src.done && len(src.ahead) == 0
	}
	return frontier, done
}

// takeAhead moves the collections at the common frontier to their next
// progress row received; false when none has one (the common frontier
// waits for them).
func (s *stream) takeAhead(frontier uint64) bool {
	took := false
	for _, src := range s.srcs {
		if src.frontier <= frontier && len(src.ahead) > 0 {
			src.frontier = max(src.frontier, src.ahead[0])
			src.ahead = src.ahead[1:]
			took = true
		}
	}
	return took
}

// emitBelow adds the rows below frontier to the stream's buffer, and a
// progress event at it when it is new; false when the client is gone.
func (s *stream) emitBelow(frontier uint64, snapshot bool) bool {
	for _, src := range s.srcs {
		n := 0
		for n < len(src.rows) && src.rows[n].Time < frontier {
			n++
		}
		if n == 0 {
			continue
		}
		if snapshot {
			s.snapshotRows(src.wire, src.rows[:n])
		} else {
			s.rows(src.wire, src.rows[:n])
		}
		for _, r := range src.rows[:n] {
			src.held -= r.Size()
			s.held -= r.Size()
		}
		src.rows = src.rows[n:]
	}
	if frontier > s.pos.closed {
		s.pos.closed = frontier
		if !snapshot {
			s.buf = s.f.progress(s.buf, frontier)
		}
	}
	return true
}
