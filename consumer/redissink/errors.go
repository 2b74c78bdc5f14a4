package redissink

import "errors"

// ErrUnsupportedType reports a relation column whose type the key contract
// has no encoding for (its type OID is none of row's types).
var ErrUnsupportedType = errors.New("redissink: unsupported column type")

// ErrBadValue reports a value whose Go type does not fit its column: the
// driver decoded something the sink cannot render by the contract.
var ErrBadValue = errors.New("redissink: value does not fit its column")

// ErrNoActiveGeneration reports a checkpoint with no active generation
// pointer beside it: the namespace was changed by something other than a
// sink, and writing into it would guess.
var ErrNoActiveGeneration = errors.New("redissink: checkpoint has no active generation")

// ErrColumnsChanged reports a batch whose columns differ from the first
// batch's: the relation changed shape under a running sink.
var ErrColumnsChanged = errors.New("redissink: relation columns changed")

// ErrSeveralCollections reports a batch of more than one collection: a
// Sink lands one collection under one namespace (run one per collection).
var ErrSeveralCollections = errors.New("redissink: a Sink lands exactly one collection")
