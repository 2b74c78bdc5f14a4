package bench

import "errors"

// ErrConfig is the base of every invalid-configuration error.
var ErrConfig = errors.New("bench: invalid configuration")

// ErrNoPostgres means no PostgreSQL server binaries were found, so the
// peer columns of the report are empty.
var ErrNoPostgres = errors.New("bench: PostgreSQL server binaries (initdb, postgres) not found in PATH or /usr/lib/postgresql/*/bin")
