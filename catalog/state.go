package catalog

import (
	"maps"
	"sort"

	"github.com/shardtail/shardtail/row"
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

// DefaultRetainMs is an item's RETAIN HISTORY window when its CREATE
// names none.
const DefaultRetainMs = 1000

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
	// ConnLimit is the CONNECTION LIMIT: the sessions the role may hold at
	// once in one process, unless it is a superuser. Nil means no limit
	// (CONNECTION LIMIT -1, and roles written before the limit existed).
	ConnLimit *int `json:"conn_limit,omitempty"`
}

// State is one version of the catalog. It is stored as diffs from
// version to version with periodic rollups (see Catalog), so its maps are
// copy-on-write: a change replaces an *Item or *Role, never modifies one.
type State struct {
	Items  map[string]*Item  `json:"items"`
	Roles  map[string]*Role  `json:"roles"`
	System map[string]string `json:"system"` // ALTER SYSTEM SET values
	NextID uint64            `json:"next_id"`
	// AuthSecret seeds the fake password verifiers of names that are no
	// role (pgwire.Config.MockSecret): kept here, every process on the
	// catalog and every restart answers an unknown name with the same
	// salt, as a role's stays the same, so that salts tell no one which
	// roles exist. Set at bootstrap.
	AuthSecret []byte `json:"auth_secret,omitempty"`
}

func (s *State) clone() *State {
	c := &State{Items: maps.Clone(s.Items), Roles: maps.Clone(s.Roles), System: maps.Clone(s.System), NextID: s.NextID, AuthSecret: s.AuthSecret}
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
func (s *State) ItemByID(id uint64) *Item {
	for _, it := range s.Items {
		if it.ID == id {
			return it
		}
	}
	return nil
}

// Dependents returns the items that depend on id, directly or not, in an
// order in which they can be dropped (dependents first).
func (s *State) Dependents(id uint64) []*Item {
	var out []*Item
	seen := map[uint64]bool{}
	var visit func(uint64)
	visit = func(id uint64) {
		for _, it := range s.SortedItems() {
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

// SortedItems returns the items in the order they were created (by id):
// the order a restart resumes them in, so that an item starts after what
// it reads.
func (s *State) SortedItems() []*Item {
	items := make([]*Item, 0, len(s.Items))
	for _, it := range s.Items {
		items = append(items, it)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].ID < items[j].ID })
	return items
}
