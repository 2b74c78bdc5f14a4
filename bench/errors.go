package bench

import "errors"

// ErrConfig is the base of every invalid-configuration error.
var ErrConfig = errors.New("bench: invalid configuration")

// ErrNoPostgres means no PostgreSQL server binaries were found, so the
// peer columns of the report are empty.
var ErrNoPostgres = errors.New("bench: PostgreSQL server binaries (initdb, postgres) not found in PATH or /usr/lib/postgresql/*/bin")

// ErrReadmeMarkers means the README does not hold exactly one begin and
// one end marker line, in that order: the block to rewrite is not known.
var ErrReadmeMarkers = errors.New("bench: README markers")
