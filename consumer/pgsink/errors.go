package pgsink

import "errors"

// ErrRejected wraps a row the target rejected when the policy is Stall.
var ErrRejected = errors.New("pgsink: target rejected a row")

// ErrNoColumns reports a batch without the column description Run attaches:
// the sink cannot create or fill a table it cannot describe.
var ErrNoColumns = errors.New("pgsink: batch carries no column description")

// ErrBadKey reports a key column that is not among the source's columns.
var ErrBadKey = errors.New("pgsink: key column not in the source")

// ErrOtherSinksTable reports a target table another sink (another Name)
// lands: a snapshot does not replace it. Give each sink its own tables.
var ErrOtherSinksTable = errors.New("pgsink: target table is landed by another sink")
