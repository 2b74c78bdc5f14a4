// Package blob opens a persist.Blob from the URL given to `--blob`:
//
//	b, err := blob.Open(ctx, "s3://shards/prod?endpoint=http://127.0.0.1:9000&path_style=true")
//	if err != nil {
//		return err // wraps ErrInvalidURL for a malformed URL
//	}
//	defer b.Close()
//	slog.Info("blob store", "url", blob.Redact(url))
//
// It is the only place that knows every backend; the backends hold no
// policy and never import it:
//
//	blob/file   file:///abs/dir, file://rel/dir  local files, the embedded default
//	blob/s3     s3://BUCKET/PREFIX?...           S3 and S3-compatible servers
//	blob/mem    mem://                           in memory, for tests
//
// All of them accept the same keys: a '/'-separated path whose segments are
// not empty and do not start with '.', without NUL, at most 1024 bytes
// (ErrInvalidKey lists the rules, internal/blobkey enforces them). One
// grammar means code tested against mem:// meets no surprise on files or
// S3. All of them pass the one acceptance suite, persisttest.TestBlob.
//
// The URL syntax belongs to the operator, so errors say which part is wrong
// (the scheme, a parameter, a config field) and never echo a
// secret_access_key; Redact makes a URL safe to log.
package blob
