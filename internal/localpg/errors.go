package localpg

import "errors"

// ErrNoBinaries means initdb and postgres were found neither in PATH nor
// in /usr/lib/postgresql/*/bin: PostgreSQL's server is not installed.
var ErrNoBinaries = errors.New("localpg: PostgreSQL server binaries (initdb, postgres) not found in PATH or /usr/lib/postgresql/*/bin")

// errPortTaken means postgres could not bind the port Start picked; Start
// retries on another.
var errPortTaken = errors.New("port taken")
