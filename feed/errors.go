package feed

import "errors"

// ErrBadParameter is a request whose query parameters or headers cannot be
// read (400, SQLSTATE 22023).
var ErrBadParameter = errors.New("bad request")

// ErrTooManyConnections is a request past Config.MaxConnections (503,
// SQLSTATE 53300).
var ErrTooManyConnections = errors.New("too many feed connections")

// ErrSnapshotTooLarge is a ?live=false answer past Config.MaxSnapshotBytes,
// or growing while the memory budget is over its limit (503, SQLSTATE
// 53200): the client should stream the collection instead.
var ErrSnapshotTooLarge = errors.New("the snapshot is too large to answer as one document; stream it instead (without live=false)")

// errIdle ends a stream's wait for its next batch after Config.Heartbeat
// (idleWait): the stream sends a heartbeat and waits again.
var errIdle = errors.New("feed: idle")
