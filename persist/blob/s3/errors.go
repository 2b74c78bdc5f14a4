package s3

import "errors"

// ErrInvalidConfig is returned by Config.Validate, wrapped with the field
// that is wrong and why.
var ErrInvalidConfig = errors.New("invalid s3 blob config")
