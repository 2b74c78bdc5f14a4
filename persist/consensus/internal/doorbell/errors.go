package doorbell

import "errors"

// ErrClosed is returned by Watch after Close.
var ErrClosed = errors.New("doorbell closed")
