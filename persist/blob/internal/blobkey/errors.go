package blobkey

import "errors"

// ErrInvalid is returned, wrapped with the reason, for a key or List prefix
// that breaks the grammar in the package doc. Package blob re-exports it as
// blob.ErrInvalidKey.
var ErrInvalid = errors.New("invalid blob key")
