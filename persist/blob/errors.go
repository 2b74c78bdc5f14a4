package blob

import (
	"errors"

	"github.com/shardtail/shardtail/persist/blob/internal/blobkey"
)

// ErrInvalidURL is returned by Open, wrapped with the part of the URL that
// is wrong. The message never quotes a secret_access_key.
var ErrInvalidURL = errors.New("invalid blob URL")

// ErrInvalidKey is what every backend's Get, Set, Delete and List wrap for a
// key (or List prefix) outside the Blob key grammar: empty, a leading or
// trailing '/', an empty segment, a segment starting with '.' (".", ".."
// and the file Blob's temporary files), NUL, invalid UTF-8, more than 1024
// bytes, or a segment of more than 255 bytes.
var ErrInvalidKey = blobkey.ErrInvalid
