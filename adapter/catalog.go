package adapter

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/shardtail/shardtail/internal/coalesce"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/row"
)

// ItemKind is the kind of a catalog item.
type ItemKind string

// The kinds of catalog items.
const (
	KindTable            ItemKind = "table"
	KindView             ItemKind = "view"
	KindMaterializedView ItemKind = "materialized view"
	KindSource           ItemKind = "source"
)

// Item is a named collection in the catalog.
type Item struct {
	ID     uint64     `json:"id"`
	Name   string     `json:"name"`
	Kind   ItemKind   `json:"kind"`
	Schema row.Schema `json:"schema"`
	// Shard holds the collection's data (tables, sources, materialized
	// views); empty for views.
	Shard string `json:"shard,omitempty"`
	// SQL is the CREATE statement, for views, materialized views and
	// sources: what a restart re-plans.
	SQL string `json:"sql,omitempty"`
	// DependsOn lists the ids of the items the definition reads.
	DependsOn []uint64 `json:"depends_on,omitempty"`
	// RetainMs is the RETAIN HISTORY window: since trails upper by it.
	RetainMs int64  `json:"retain_ms"`
	Owner    string `json:"owner"`
	// Grants maps a role to the privileges granted to it ("SELECT", ...).
	Grants map[string][]string `json:"grants,omitempty"`
}

// Writable reports whether INSERT/UPDATE/DELETE/COPY FROM may target it.
func (it *Item) Writable() bool { return it.Kind == KindTable }

// Role is a database role.
type Role struct {
	Name      string `json:"name"`
	Login     bool   `json:"login"`
	Superuser bool   `json:"superuser"`
	// CreateRole lets a role create, alter and drop roles that are not
	// superusers (PostgreSQL's CREATEROLE).
	CreateRole bool `json:"create_role,omitempty"`
	// Verifier is the SCRAM-SHA-256 verifier of the password, or empty.
	Verifier string `json:"verifier,omitempty"`
}

// CatalogState is one version of the catalog: small, and written whole.
type CatalogState struct {
	Items  map[string]*Item  `json:"items"`
	Roles  map[string]*Role  `json:"roles"`
	System map[string]string `json:"system"` // ALTER SYSTEM SET values
	NextID uint64            `json:"next_id"`
}

func (s *CatalogState) clone() *CatalogState {
	c := &CatalogState{Items: maps.Clone(s.Items), Roles: maps.Clone(s.Roles), System: maps.Clone(s.System), NextID: s.NextID}
	if c.Items == nil {
		c.Items = map[string]*Item{}
	}
	if c.Roles == nil {
		c.Roles = map[string]*Role{}
	}
	if c.System == nil {
		c.System = map[string]string{}
	}
	return c
}

// ItemByID finds an item by id.
func (s *CatalogState) ItemByID(id uint64) *Item {
	for _, it := range s.Items {
		if it.ID == id {
			return it
		}
	}
	return nil
}

// Dependents returns the items that depend on id, directly or not, in an
// order in which they can be dropped (dependents first).
func (s *CatalogState) Dependents(id uint64) []*Item {
	var out []*Item
	seen := map[uint64]bool{}
	var visit func(uint64)
	visit = func(id uint64) {
		for _, it := range s.sortedItems() {
			for _, d := range it.DependsOn {
				if d == id && !seen[it.ID] {
					seen[it.ID] = true
					visit(it.ID)
					out = append(out, it)
				}
			}
		}
	}
	visit(id)
	return out
}

func (s *CatalogState) sortedItems() []*Item {
	items := make([]*Item, 0, len(s.Items))
	for _, it := range s.Items {
		items = append(items, it)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].ID < items[j].ID })
	return items
}

// catalogKey is the consensus key of the catalog.
const catalogKey = "catalog"

// Catalog is the durable catalog: a CatalogState per version in consensus
// under catalogKey, changed by compare-and-set. Every process reads it from
// the shared consensus; only role `all` writes it.
type Catalog struct {
	consensus persist.Consensus

	mu    sync.Mutex
	seq   persist.SeqNo // mu
	state *CatalogState // mu
	// changed is closed and replaced when the state changes.
	changed chan struct{} // mu

	// syncs batches the linearizable reads of Sync.
	syncs *coalesce.Reads
}

// OpenCatalog loads the catalog, creating an empty one with the default
// role on first use.
func OpenCatalog(ctx context.Context, c persist.Consensus) (*Catalog, error) {
	cat := &Catalog{consensus: c, changed: make(chan struct{})}
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
func (c *Catalog) State() *CatalogState {
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

// Refresh reads the newest version from consensus.
func (c *Catalog) Refresh(ctx context.Context) error {
	head, err := c.consensus.Head(ctx, catalogKey)
	if err != nil {
		return fmt.Errorf("read catalog: %w", err)
	}
	st := &CatalogState{NextID: 1}
	var seq persist.SeqNo
	if head != nil {
		if err := json.Unmarshal(head.Data, st); err != nil {
			return fmt.Errorf("%w: catalog at %s: %v", persist.ErrCorruptState, head.SeqNo, err)
		}
		seq = head.SeqNo
	}
	st = st.clone()
	c.install(seq, st)
	return nil
}

// Sync is a linearizable Refresh: once it returns, the catalog holds every
// change committed (by any process) before it was called. Concurrent
// callers share consensus reads, so a storm of statements costs a few
// reads, not one each.
func (c *Catalog) Sync(ctx context.Context) error { return c.syncs.Do(ctx) }

func (c *Catalog) install(seq persist.SeqNo, st *CatalogState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != nil && seq <= c.seq {
		return
	}
	c.seq, c.state = seq, st
	close(c.changed)
	c.changed = make(chan struct{})
}

// Update applies fn to a copy of the current state and commits the result
// by CAS, retrying on conflicts. fn may return an error to abort; it may be
// called more than once.
func (c *Catalog) Update(ctx context.Context, fn func(*CatalogState) error) (*CatalogState, error) {
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		seq, cur := c.seq, c.state
		c.mu.Unlock()
		next := cur.clone()
		if err := fn(next); err != nil {
			return nil, err
		}
		data, err := json.Marshal(next)
		if err != nil {
			return nil, err
		}
		var expected *persist.SeqNo
		if seq > 0 {
			expected = &seq
		}
		ok, err := c.consensus.CompareAndSet(ctx, catalogKey, expected, persist.VersionedData{SeqNo: seq + 1, Data: data})
		if err != nil && !persist.IsIndeterminate(err) {
			return nil, fmt.Errorf("write catalog: %w", err)
		}
		if err == nil && ok {
			c.install(seq+1, next)
			if (seq+1)%64 == 0 {
				// Old versions are never read again.
				_, _ = c.consensus.Truncate(ctx, catalogKey, seq+1)
			}
			return next, nil
		}
		if attempt > 100 {
			return nil, fmt.Errorf("write catalog: too much contention")
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			// An indeterminate CAS may have committed: if the head is our
			// write, it did.
			if head, herr := c.consensus.Head(ctx, catalogKey); herr == nil && head != nil &&
				head.SeqNo == seq+1 && string(head.Data) == string(data) {
				c.install(seq+1, next)
				return next, nil
			}
		}
		if err := c.Refresh(ctx); err != nil {
			return nil, err
		}
	}
}
