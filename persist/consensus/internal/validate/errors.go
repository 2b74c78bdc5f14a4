package validate

import "errors"

// ErrInvalidArgument marks a call that no state of the log could make
// valid; the backend rejects it without attempting it.
var ErrInvalidArgument = errors.New("invalid argument")
