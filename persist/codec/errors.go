package codec

import "errors"

// ErrCorrupt means the bytes are not a well-formed part: bad magic, a
// truncated or inconsistent Arrow layout, out-of-range offsets, invalid
// values (non-UTF-8 text, non-canonical numeric), or updates that are not
// sorted and consolidated. Retrying the same bytes cannot succeed.
var ErrCorrupt = errors.New("corrupt part")

// ErrSchemaMismatch means the part is well formed but was written for a
// different schema than the caller expects (column count, names, types or
// nullability differ).
var ErrSchemaMismatch = errors.New("part schema mismatch")

// ErrUnsupportedVersion means the part declares a format version this code
// does not read (see FormatVersion).
var ErrUnsupportedVersion = errors.New("unsupported part format version")

// ErrTooLarge means a record batch would need more memory to decode than
// Config.MaxBatchDecodedBytes allows, or a single row is too big to encode.
var ErrTooLarge = errors.New("part batch too large")

// ErrInvalidInput means the arguments to an encode or decode call are
// wrong: an invalid schema or Config, a row that does not fit the schema,
// or updates that are not a consolidated run (see row.IsConsolidated).
var ErrInvalidInput = errors.New("invalid input")
