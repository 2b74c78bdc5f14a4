package tail

import "errors"

// ErrClosed is returned by Subscribe once the Manager is closing.
var ErrClosed = errors.New("tail manager closed")
