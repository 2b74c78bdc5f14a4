// Package s3 is the persist.Blob on an S3 bucket, or on any S3-compatible
// server (MinIO, SeaweedFS, Ceph RGW, R2, ...): the shared store of a
// production deployment, where several tail processes read the shards one
// writer appends.
//
// Key "s0123/v17/r<uuid>" is object "PREFIX/s0123/v17/r<uuid>" in the
// bucket (no prefix: the key itself). Keys follow the same grammar as the
// other Blobs (see persist/blob.ErrInvalidKey).
//
//	b, err := s3.New(ctx, s3.Config{Bucket: "shards", Prefix: "prod",
//		Endpoint: "http://127.0.0.1:9000", PathStyle: true})
//
// Set sends one PutObject up to Config.MultipartThreshold (8 MiB by
// default), and a multipart upload above it: up to 4 parts of
// Config.MultipartPartSize in flight, then CompleteMultipartUpload; any
// failure aborts the upload. S3 makes an object visible only when its PUT
// or its completion succeeds, whole, which gives the Blob contract's atomic
// Set; since 2020 S3 is strongly consistent, which gives linearizability.
// An S3-compatible server must offer both. Every upload carries
// Content-MD5, so the server rejects bytes damaged on the way; the SDK's
// newer CRC trailers are off because many compatible servers reject them.
//
// Errors from Set and Delete are classified for persist's retries: a 4xx
// answer means the server refused and nothing changed (determinate); a
// timeout, a lost connection or a 5xx after the request was sent wraps
// persist.ErrIndeterminate. A failed part of a multipart upload is
// determinate: nothing is visible before completion.
//
// Get maps NoSuchKey, and a bare 404, to persist.ErrNotFound, but never
// NoSuchBucket: a misconfigured bucket must not look like a deleted blob.
// S3 answers 403 instead of 404 for a missing key when the credentials
// lack s3:ListBucket, so they need it (List needs it anyway). Delete asks
// HeadObject whether the key exists, as DeleteObject does not say, and
// deletes only what it found.
//
// The SDK retries throttling and 5xx answers itself (3 attempts); the Blob
// adds no retry loop of its own.
package s3
