// Package file is the persist.Blob on a local filesystem: the embedded
// default, under `--data-dir/blob`.
//
// A key's '/'-separated segments are directories under the root, its last
// segment a file: key "s0123/v17/r<uuid>" is the file ROOT/s0123/v17/r<uuid>.
// The key grammar (see persist/blob.ErrInvalidKey) rules out "..", empty
// segments, a leading '/' and NUL, so that no key reaches outside the root,
// and reserves names starting with '.' for the Blob's own temporary files.
// Because a key is a file and its prefixes are directories, a key can not
// also be a directory of other keys here ("a" and "a/b" cannot both exist);
// persist never needs that, and Set of the second one fails.
//
// Set is atomic and durable the way a database commit is:
//
//	create ROOT/dir/.tmp-<random>   a temporary file next to the target
//	write value, fsync              the bytes are on disk
//	rename over ROOT/dir/name       readers see the old or the new file, never a part
//	fsync ROOT/dir ... ROOT         the new name, and any new directory, is on disk
//
// A crash before the rename leaves the old value and a stale temporary file;
// List and Get never see temporary files, and Open removes stale ones. An
// error after the rename wraps persist.ErrIndeterminate: the value may be
// visible but not yet durable.
//
// Get reads through one open file descriptor, and a Set replaces the name,
// never the contents of an existing file, so a Get never sees a mix of two
// values. Delete removes the file and then every directory it leaves empty,
// up to the root; a Set racing with that pruning retries its mkdir.
//
// Several processes on one host may share a root: every step above is safe
// across processes, which is how several `shardtail serve` processes share
// the embedded store.
package file
