package catalog

import "errors"

// errGap means the versions right after the one a read started from were
// truncated: a newer rollup replaced them, and the read starts over.
var errGap = errors.New("catalog versions truncated")
