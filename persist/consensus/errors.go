package consensus

import "errors"

// ErrInvalidURL is returned by Open for a URL it cannot parse or whose
// scheme it does not support.
var ErrInvalidURL = errors.New("invalid consensus URL")
