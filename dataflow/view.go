package dataflow

import (
	"context"
	"sync/atomic"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// ViewConfig describes one materialized view's maintenance.
type ViewConfig struct {
	Persist *persist.Client
	Storage Storage
	// Name is the view's, for its readers' purposes in shard state.
	Name string
	// Input is the shard the view reads; Shard is the view's own, owned by
	// Storage.
	Input string
	Shard string
	// MFP returns the view's map/filter/project over the input's rows,
	// bound for one run: it is called at each (re)start.
	MFP func() MFP
}

// View maintains a materialized view: it follows the input's shard,
// applies the view's MFP and appends the result to the view's shard,
// batch by batch, so the view's upper tracks the input's. A View is a Job:
// each Run resumes from the view's own upper.
type View struct {
	cfg ViewConfig
	// stalled is why the view cannot advance (a row its expressions cannot
	// evaluate); nil while it is healthy.
	stalled atomic.Pointer[error]
}

// NewView returns the maintenance of the view cfg describes; Start runs it.
func NewView(cfg ViewConfig) *View { return &View{cfg: cfg} }

// Stalled returns why the view is stalled, or nil: readers report it
// rather than wait for an upper that does not advance.
func (v *View) Stalled() error {
	if p := v.stalled.Load(); p != nil {
		return *p
	}
	return nil
}

func (v *View) setStalled(err error) {
	if err == nil {
		v.stalled.Store(nil)
	} else {
		v.stalled.Store(&err)
	}
}

// Run maintains the view until ctx is done or an error stops it, in three
// steps: choose the time to resume at, correct the view's contents up to
// it if the input has moved on without the view, then follow the input.
func (v *View) Run(ctx context.Context) error {
	r, err := v.cfg.Persist.OpenReader(ctx, v.cfg.Input, persist.ReaderOptions{Purpose: "materialized view " + v.cfg.Name})
	if err != nil {
		return err
	}
	defer r.Close()
	asOf, upper, err := v.resumeAt(ctx, r)
	if err != nil {
		return err
	}
	m := v.cfg.MFP()
	if upper == 0 || asOf > upper-1 {
		if err := v.correct(ctx, r, m, asOf, upper); err != nil {
			return err
		}
		upper = asOf + 1
	}
	return v.follow(ctx, r, m, asOf, upper)
}

// resumeAt chooses the input time the view resumes at, asOf, and returns it
// with the view's own upper: the first run starts at the input's latest
// time; a restart where it stopped (upper-1), unless the input has since
// compacted past that, in which case at the input's since.
func (v *View) resumeAt(ctx context.Context, r *persist.Reader) (asOf, upper uint64, err error) {
	out, err := v.cfg.Persist.State(ctx, v.cfg.Shard)
	if err != nil {
		return 0, 0, err
	}
	in, err := v.cfg.Persist.WaitForUpper(ctx, v.cfg.Input, 0)
	if err != nil {
		return 0, 0, err
	}
	upper = out.Upper
	switch {
	case upper == 0:
		asOf = max(in.Upper-1, r.Since())
	case upper-1 >= r.Since():
		asOf = upper - 1
	default:
		// The input compacted past the view's upper while it was down.
		asOf = r.Since()
	}
	return asOf, upper, nil
}

// correct brings the view's contents to a fresh evaluation of the input at
// asOf, in one write at asOf that advances the view's upper to asOf+1: on
// the first run that is the whole view; after a restart past a compaction,
// the difference between what the view holds (up to upper-1) and the fresh
// evaluation — the changes it missed, which can no longer be read one by
// one.
func (v *View) correct(ctx context.Context, r *persist.Reader, m MFP, asOf, upper uint64) error {
	fresh, err := snapshot(ctx, r, asOf, m)
	if err != nil {
		return err
	}
	var correction []row.Update
	if upper > 0 {
		vr, err := v.cfg.Persist.OpenReader(ctx, v.cfg.Shard, persist.ReaderOptions{Purpose: "materialized view correction"})
		if err != nil {
			return err
		}
		stored, err := snapshot(ctx, vr, upper-1, nil)
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
	return v.cfg.Storage.AppendAt(ctx, v.cfg.Shard, row.Consolidate(correction), upper, asOf+1)
}

// follow is the steady loop: it listens to the input from asOf and appends
// each batch, mapped, to the view, whose upper follows the input's
// frontier; it lets the input compact what the view has passed.
//
// A batch the view cannot evaluate (a row its expressions fail on, such as
// a division by zero) stalls it: the view reports the error (Stalled), and
// later batches join the pending ones, with times advanced to their
// frontier, until the bad rows are retracted and the whole evaluates; then
// the view resumes at that frontier, correct from there on.
func (v *View) follow(ctx context.Context, r *persist.Reader, m MFP, asOf, upper uint64) error {
	l, err := r.Listen(ctx, asOf)
	if err != nil {
		return err
	}
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
		mapped, evalErr := Apply(m, batch)
		if evalErr != nil {
			if pending == nil {
				pending = append([]row.Update(nil), updates...)
			}
			v.setStalled(evalErr)
			continue
		}
		if pending != nil {
			pending = nil
			v.setStalled(nil)
		}
		if err := v.cfg.Storage.AppendAt(ctx, v.cfg.Shard, row.Consolidate(mapped), upper, frontier); err != nil {
			return err
		}
		upper = frontier
		_ = r.Downgrade(ctx, frontier-1)
	}
}
