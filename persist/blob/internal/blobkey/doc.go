// Package blobkey is the one key grammar every Blob backend enforces, so that
// a key accepted by the in-memory Blob in a unit test is also accepted by the
// file and S3 Blobs in production, and vice versa.
//
// A key is a '/'-separated path of segments:
//
//	s0123/v17/r6f1c...   valid
//	""                   empty key
//	/a  a/  a//b         leading '/', trailing '/', empty segment
//	a/../b  a/./b  .x    a segment that starts with '.' (reserved)
//	"a\x00b"             NUL byte
//
// The rules come from the strictest backend: the file Blob maps segments to
// directory and file names (so no empty, ".", ".." or NUL segments, and at
// most 255 bytes each), and reserves names that start with '.' for its
// temporary files; S3 limits keys to 1024 bytes of UTF-8.
//
// A List prefix is a key with a partial last segment: "", "s0123/",
// "s0123/v1" are valid prefixes. Its complete segments obey the key rules, so
// that a prefix can never name a directory outside the file Blob's root.
package blobkey
