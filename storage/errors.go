package storage

import "errors"

// ErrNoTxns is returned by a transaction that reads tables to modify them
// (UPDATE or DELETE in a transaction block) on a Storage without a txns
// shard: only the txns shard can check at commit that nothing wrote them
// since the read.
var ErrNoTxns = errors.New("transactions that read tables need the txns shard")

// ErrNotOwned reports a write to a shard this process does not write: one
// released since the caller looked it up (a DROP that won the race).
var ErrNotOwned = errors.New("shard is not writable here")
