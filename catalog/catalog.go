package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shardtail/shardtail/internal/coalesce"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/mapdiff"
)

// Key is the consensus key of the catalog: a tail process rings its
// doorbell to follow changes, and a health check reads its head.
const Key = "catalog"

// Catalog is the durable catalog, a log of versions in consensus under
// Key changed by compare-and-set. Every process reads it from the
// shared consensus; only role `all` writes it.
//
// A version is stored as a diff from its predecessor (the items, roles and
// system variables set or deleted), so a DDL writes what it changed, not the
// whole catalog. Now and then a version is a rollup instead: the whole state.
// Every diff names the latest rollup at or before it, so a cold reader starts
// from the head, reads that rollup and applies the diffs after it; a warm one
// applies the diffs after the version it knows. A rollup is written when the
// diffs since the last one add up to its size (or there are
// catalogRollupMaxDiffs of them): the bytes written per DDL stay within
// twice the diff's, and a cold read within about twice the catalog's size.
// After a rollup the versions before it are truncated.
//
// The first format stored the whole state in every version. Such a version
// reads as a rollup, so an old data directory needs no migration step: the
// next change writes a diff that names it.
type Catalog struct {
	consensus persist.Consensus
	// maxDiffs bounds the diffs between rollups (catalogRollupMaxDiffs;
	// tests lower it).
	maxDiffs int

	mu    sync.Mutex
	seq   persist.SeqNo // mu
	state *State        // mu
	log   catalogLog    // mu
	// changed is closed and replaced when the state changes.
	changed chan struct{} // mu

	// syncs batches the linearizable reads of Sync.
	syncs *coalesce.Reads
}

// catalogRollupMaxDiffs bounds the versions a cold reader applies after a
// rollup.
const catalogRollupMaxDiffs = 4096

// catalogFormat marks versions written as catalogEntry. Versions of the
// first format (a bare State) have no format field.
const catalogFormat = 2

// catalogEntry is one version of the catalog in consensus: the whole state
// (a rollup) or the change from the previous version.
type catalogEntry struct {
	Format int `json:"format"`
	// Rollup is the latest version at or before this one that holds the
	// whole state: where a cold reader starts.
	Rollup persist.SeqNo `json:"rollup"`
	// State is the whole catalog, in a rollup; nil in a diff.
	State *State `json:"state,omitempty"`

	NextID    uint64            `json:"next_id,omitempty"`
	ItemsSet  map[string]*Item  `json:"items_set,omitempty"`
	ItemsDel  []string          `json:"items_del,omitempty"`
	RolesSet  map[string]*Role  `json:"roles_set,omitempty"`
	RolesDel  []string          `json:"roles_del,omitempty"`
	SystemSet map[string]string `json:"system_set,omitempty"`
	SystemDel []string          `json:"system_del,omitempty"`
	// AuthSecret is State.AuthSecret, in the diff that sets it (a catalog
	// written before it existed gets it in a diff, not a rollup).
	AuthSecret []byte `json:"auth_secret,omitempty"`
}

// catalogLog is what a process knows of the log behind its state: where
// the latest rollup is and how much was written since, which decides when
// the next rollup is due.
type catalogLog struct {
	rollup      persist.SeqNo
	rollupBytes int
	diffs       int // versions after the rollup
	diffBytes   int // their bytes
}

// after returns the log after version vd, decoded as e, is appended.
func (l catalogLog) after(vd persist.VersionedData, e *catalogEntry) catalogLog {
	if e.State != nil {
		return catalogLog{rollup: vd.SeqNo, rollupBytes: len(vd.Data)}
	}
	l.diffs++
	l.diffBytes += len(vd.Data)
	return l
}

// decodeCatalogEntry decodes a version of either format.
func decodeCatalogEntry(vd persist.VersionedData) (*catalogEntry, error) {
	var e catalogEntry
	if err := json.Unmarshal(vd.Data, &e); err != nil {
		return nil, fmt.Errorf("%w: catalog at %s: %v", persist.ErrCorruptState, vd.SeqNo, err)
	}
	switch e.Format {
	case catalogFormat:
	case 0:
		// The first format: the whole state, which is a rollup.
		st := &State{}
		if err := json.Unmarshal(vd.Data, st); err != nil {
			return nil, fmt.Errorf("%w: catalog at %s: %v", persist.ErrCorruptState, vd.SeqNo, err)
		}
		e = catalogEntry{Format: catalogFormat, Rollup: vd.SeqNo, State: st}
	default:
		return nil, fmt.Errorf("%w: catalog at %s has format %d, newer than this binary's %d",
			persist.ErrCorruptState, vd.SeqNo, e.Format, catalogFormat)
	}
	if e.State != nil {
		if e.Rollup != vd.SeqNo {
			return nil, fmt.Errorf("%w: catalog rollup at %s names %s", persist.ErrCorruptState, vd.SeqNo, e.Rollup)
		}
		e.State = e.State.clone()
	}
	return &e, nil
}

// diffCatalog returns the entry that turns old into new.
func diffCatalog(old, new *State, rollup persist.SeqNo) *catalogEntry {
	e := &catalogEntry{Format: catalogFormat, Rollup: rollup, NextID: new.NextID}
	e.ItemsSet, e.ItemsDel = mapdiff.Diff(old.Items, new.Items)
	e.RolesSet, e.RolesDel = mapdiff.Diff(old.Roles, new.Roles)
	e.SystemSet, e.SystemDel = mapdiff.Diff(old.System, new.System)
	if !bytes.Equal(old.AuthSecret, new.AuthSecret) {
		e.AuthSecret = new.AuthSecret
	}
	return e
}

// applyTo applies a diff to st in place, or returns the rollup's state
// (which is the entry's own: decoded entries are private to their reader).
func (e *catalogEntry) applyTo(st *State) *State {
	if e.State != nil {
		return e.State
	}
	mapdiff.Apply(st.Items, e.ItemsSet, e.ItemsDel)
	mapdiff.Apply(st.Roles, e.RolesSet, e.RolesDel)
	mapdiff.Apply(st.System, e.SystemSet, e.SystemDel)
	st.NextID = e.NextID
	if e.AuthSecret != nil {
		st.AuthSecret = e.AuthSecret
	}
	return st
}

// Open loads the catalog, creating an empty one with the default
// role on first use.
func Open(ctx context.Context, c persist.Consensus) (*Catalog, error) {
	cat := &Catalog{consensus: c, maxDiffs: catalogRollupMaxDiffs, changed: make(chan struct{})}
	cat.syncs = coalesce.New(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return cat.Refresh(ctx)
	})
	if err := cat.Refresh(ctx); err != nil {
		return nil, err
	}
	return cat, nil
}

// State returns the current catalog state. It must not be modified.
func (c *Catalog) State() *State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Seq is the catalog version this process knows: plans made at an older
// one may name dropped or replaced items.
func (c *Catalog) Seq() persist.SeqNo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// Changed returns a channel closed when the catalog next changes in this
// process's view.
func (c *Catalog) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// catalogScanPage is how many versions one consensus Scan returns.
const catalogScanPage = 1024

// Refresh reads the versions committed since the one this process knows
// (all of them, from the latest rollup, on the first call).
func (c *Catalog) Refresh(ctx context.Context) error {
	c.mu.Lock()
	seq, cur, log := c.seq, c.state, c.log
	c.mu.Unlock()
	for attempt := 0; ; attempt++ {
		var err error
		if cur == nil {
			err = c.load(ctx)
		} else {
			err = c.catchUp(ctx, seq, cur, log)
		}
		if !errors.Is(err, errGap) || attempt >= 10 {
			return err
		}
		cur = nil
	}
}

// load reads the catalog cold: the head names the latest rollup, which with
// the diffs after it gives the state.
func (c *Catalog) load(ctx context.Context) error {
	head, err := c.consensus.Head(ctx, Key)
	if err != nil {
		return fmt.Errorf("read catalog: %w", err)
	}
	if head == nil {
		c.install(0, (&State{NextID: 1}).clone(), catalogLog{})
		return nil
	}
	e, err := decodeCatalogEntry(*head)
	if err != nil {
		return err
	}
	if e.State != nil {
		c.install(head.SeqNo, e.State, catalogLog{}.after(*head, e))
		return nil
	}
	if e.Rollup == 0 || e.Rollup >= head.SeqNo {
		return fmt.Errorf("%w: catalog at %s names rollup %s", persist.ErrCorruptState, head.SeqNo, e.Rollup)
	}
	return c.catchUp(ctx, e.Rollup-1, nil, catalogLog{})
}

// catchUp applies the versions after seq to a private copy of st (nil when
// the first version read must be a rollup) and installs the result.
func (c *Catalog) catchUp(ctx context.Context, seq persist.SeqNo, st *State, log catalogLog) error {
	copied := false
	for {
		vds, err := c.consensus.Scan(ctx, Key, seq+1, catalogScanPage)
		if err != nil {
			return fmt.Errorf("read catalog from %s: %w", seq+1, err)
		}
		if len(vds) > 0 && vds[0].SeqNo != seq+1 {
			return errGap
		}
		for _, vd := range vds {
			e, err := decodeCatalogEntry(vd)
			if err != nil {
				return err
			}
			if st == nil && e.State == nil {
				return fmt.Errorf("%w: catalog at %s is a diff where a rollup was named", persist.ErrCorruptState, vd.SeqNo)
			}
			if e.State == nil && !copied {
				// st may be the installed state, which readers hold.
				st, copied = st.clone(), true
			}
			st = e.applyTo(st)
			copied = copied || e.State != nil
			seq, log = vd.SeqNo, log.after(vd, e)
		}
		if len(vds) < catalogScanPage {
			if st == nil {
				// The named rollup is gone: a newer one truncated it.
				return errGap
			}
			c.install(seq, st, log)
			return nil
		}
	}
}

// Sync is a linearizable Refresh: once it returns, the catalog holds every
// change committed (by any process) before it was called. Concurrent
// callers share consensus reads, so a storm of statements costs a few
// reads, not one each.
func (c *Catalog) Sync(ctx context.Context) error { return c.syncs.Do(ctx) }

func (c *Catalog) install(seq persist.SeqNo, st *State, log catalogLog) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != nil && seq <= c.seq {
		return
	}
	c.seq, c.state, c.log = seq, st, log
	close(c.changed)
	c.changed = make(chan struct{})
}

// Update applies fn to a copy of the current state and commits the result
// by CAS, retrying on conflicts. fn may return an error to abort; it may be
// called more than once. fn replaces the items and roles it changes (the
// maps are copy-on-write) and never modifies one in place.
func (c *Catalog) Update(ctx context.Context, fn func(*State) error) (*State, error) {
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		seq, cur, log := c.seq, c.state, c.log
		c.mu.Unlock()
		next := cur.clone()
		if err := fn(next); err != nil {
			return nil, err
		}
		data, e, err := c.encodeNext(seq, cur, next, log)
		if err != nil {
			return nil, err
		}
		vd := persist.VersionedData{SeqNo: seq + 1, Data: data}
		var expected *persist.SeqNo
		if seq > 0 {
			expected = &seq
		}
		ok, err := c.consensus.CompareAndSet(ctx, Key, expected, vd)
		if err != nil && !persist.IsIndeterminate(err) {
			return nil, fmt.Errorf("write catalog: %w", err)
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			// An indeterminate CAS may have committed: if the head is our
			// write, it did.
			if head, herr := c.consensus.Head(ctx, Key); herr == nil && head != nil &&
				head.SeqNo == vd.SeqNo && string(head.Data) == string(data) {
				ok = true
			}
		}
		if ok {
			c.install(vd.SeqNo, next, log.after(vd, e))
			if e.State != nil {
				// Nothing reads the versions before a rollup any more.
				_, _ = c.consensus.Truncate(ctx, Key, vd.SeqNo)
			}
			return next, nil
		}
		if attempt > 100 {
			return nil, fmt.Errorf("write catalog: too much contention")
		}
		if err := c.Refresh(ctx); err != nil {
			return nil, err
		}
	}
}

// encodeNext encodes version seq+1 with state next: a diff from cur, or a
// rollup when one is due.
func (c *Catalog) encodeNext(seq persist.SeqNo, cur, next *State, log catalogLog) ([]byte, *catalogEntry, error) {
	e := diffCatalog(cur, next, log.rollup)
	data, err := json.Marshal(e)
	if err != nil {
		return nil, nil, fmt.Errorf("encode catalog: %w", err)
	}
	if seq > 0 && log.diffBytes+len(data) < log.rollupBytes && log.diffs < c.maxDiffs {
		return data, e, nil
	}
	e = &catalogEntry{Format: catalogFormat, Rollup: seq + 1, State: next}
	if data, err = json.Marshal(e); err != nil {
		return nil, nil, fmt.Errorf("encode catalog: %w", err)
	}
	return data, e, nil
}
