// Package redissink lands a shardtail change feed in Redis, keyed by the
// frozen key contract of package consumer (KeyJSON, ValueJSON), exactly
// once: each batch's keys and the checkpoint change in one atomic Redis
// function call. A Sink is both the consumer.Sink and the
// consumer.Checkpoint of consumer.Run.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	sink, err := redissink.New(ctx, redissink.Config{Client: rdb, Namespace: "orders:", Key: []string{"id"}})
//	...
//	cfg.Checkpoint = sink
//	err = consumer.Run(ctx, cfg, sink)
//
// # Layout in Redis
//
// Under the namespace ns (e.g. "orders:"):
//
//	ns gN:<key JSON array>  a row: hash {v: value JSON, ts: mz_timestamp};
//	                        a tombstone (Config.Tombstones): hash {ts}
//	ns active               the active generation's prefix ("orders:g2:"):
//	                        readers look keys up under it
//	ns checkpoint           the committed consumer.Position (JSON)
//	ns loading              the generation being loaded, until it is active
//	ns generation           counter of generation numbers (never reused)
//	ns generations          durable list of generations that may hold keys
//
// A reader reads `GET ns active`, then `HGET <prefix><key> v`; or, to be
// safe against a generation switch between the two, calls the function
// FunctionGet (`FCALL_RO shardtail_get 1 ns active <key>`), which does both
// atomically.
//
// # The upsert rule
//
// Every write goes through the Redis function shardtail_apply
// (library.lua), which compares timestamps itself: an upsert sets a key
// only if the stored row is older (or is a tombstone at the same
// timestamp: within one timestamp an update is a retraction and an
// insertion, in no set order); a delete removes the key (or leaves a
// tombstone) only if the stored row is older. So nothing moves a key
// backwards: a replayed chunk or a late write is rejected key by key and
// counted (Stats.Stale). Without tombstones a deleted key holds no
// timestamp, so only the checkpoint fence (below) keeps a stale writer
// from recreating it; with them, the guard does too.
//
// Before writing, shardtail_apply checks that the checkpoint is the one
// the writer expects, and that the generation it writes is the active one
// (or the one it claimed); otherwise nothing of the batch is written and
// the writer gets consumer.ErrFenced. A closed batch's keys and its new
// checkpoint are one call, so one round trip per batch and exactly once: a
// crash leaves either both or neither. A Partial chunk (a timestamp larger
// than a batch) is written at once, fenced but without moving the
// checkpoint; a crash before the closing batch replays the timestamp,
// which the guard makes harmless.
//
// One exception skips the function, for speed: the Partial chunks of a
// snapshot into a generation this Sink claimed are plain HSETs in one
// MULTI/EXEC that WATCHes the checkpoint and the claim (so the fence still
// holds). The guard has nothing to guard there: generation numbers are
// never reused, only the claim's owner writes the generation, and the
// snapshot is its first timestamp, so no stored row can be newer. Such a
// chunk loads in the background while the consumer fetches the next one
// and the Sink converts it (one at a time, in order; every other call
// waits for it before it writes), on a connection of the Sink's own,
// dialed with the Client's options (Dialer, TLS, password or
// CredentialsProvider, DB), where the chunk's RESP is written straight
// from its rows: through go-redis, a command object per key cost the sink
// more CPU than Redis spent on the key.
//
// # Generations
//
// The first snapshot, and every re-snapshot (a history loss, a replaced
// object: any batch whose consumer generation is not the checkpoint's),
// loads a new generation: shardtail_claim takes the next number, records
// it as the one loading (which fences any earlier loader) and appends it
// to the durable generations list, before any key of it is written. The
// commit of its first closed batch makes it active: checkpoint and pointer
// change in the same call. Then every listed generation that is neither
// active nor loading is deleted (SCAN + UNLINK) and dropped from the list;
// a crash in between leaves it listed, and the next Load finishes the job.
//
// This is also the fence against resurrection: a worker paused with a
// write of key k in hand, while k is deleted upstream and another worker
// re-snapshots, finds on resuming that the checkpoint and the active
// generation moved; its write is refused whole, and the active generation
// never holds k.
package redissink
