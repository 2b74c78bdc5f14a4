// Package catalog holds what a shardtail deployment knows durably about
// itself outside the shards: the catalog (collections, roles, system
// variables) and the timestamp oracle. Both live in consensus, under their
// own keys, beside the shards' state, so every process of a deployment
// reads the same ones.
//
// # The catalog
//
// A State is one version of the catalog: items (tables, sources, views,
// materialized views) by name, with their shard, schema, definition,
// RETAIN HISTORY window, owner and grants; roles; ALTER SYSTEM values; and
// the next item id. States are immutable once installed: Update hands fn a
// copy whose maps are fresh but whose *Item and *Role values are shared, so
// fn replaces what it changes and never writes through a pointer.
//
// Catalog is the log of versions under Key, changed by compare-and-set:
//
//	cat, err := catalog.Open(ctx, consensus) // cold read: rollup + diffs
//	st := cat.State()                        // this process's view
//	next, err := cat.Update(ctx, func(s *catalog.State) error {
//		s.Items[name] = &catalog.Item{ID: s.NextID, ...} // may run more than once
//		s.NextID++
//		return nil
//	})
//	err = cat.Sync(ctx) // linearizable: sees every commit made before the call
//
// A version is a diff from its predecessor (the items, roles and variables
// set or deleted) or, now and then, a rollup holding the whole state; a diff
// names the rollup it builds on. A DDL therefore writes what it changed, and
// the log before the latest rollup is truncated. Catalog documents when a
// rollup is due and why that bounds both the bytes per DDL and a cold read.
//
// Duties of the caller:
//
//  1. Only role `all` calls Update; a tail process follows the catalog with
//     Refresh or Sync (when Key's doorbell rings, and on a poll).
//  2. fn given to Update must be idempotent and side-effect free: a CAS
//     conflict refreshes and calls it again on the newer state.
//  3. Nothing modifies a State returned by State or Update.
//
// Privilege checks are not here: they are planning (they need the session
// and answer with SQLSTATEs), and stay in package adapter; this package
// holds only the data they read (owners, grants, role attributes).
//
// # The timestamp oracle
//
// Oracle issues write timestamps: epoch milliseconds, strictly increasing,
// and never going backwards across restarts even if the clock does. It
// makes one durable write (a reservation "nothing above R was issued") per
// few seconds of timestamps, not one per timestamp; a process that starts
// adopts the stored reservation and issues above it.
package catalog
