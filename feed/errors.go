package feed

import "errors"

// ErrBadParameter is a request whose query parameters or headers cannot be
// read (400, SQLSTATE 22023).
var ErrBadParameter = errors.New("bad request")

// ErrTooManyConnections is a request past Config.MaxConnections (503,
// SQLSTATE 53300).
var ErrTooManyConnections = errors.New("too many feed connections")
