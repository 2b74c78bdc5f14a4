// Package fakes3 serves an in-memory S3 bucket over real HTTP on loopback,
// and writes the s3:// blob URLs (for persist/blob.Open) that point at it or
// at any S3-compatible test endpoint. internal/testsupport/s3test gives
// tests one per test; bench shares one between a server and its tail
// processes. It lives outside internal/testsupport because `shardtail
// bench` ships in the binary and starts it (--tail-storage s3); the
// serving path does not link it.
//
//	s, err := fakes3.Start("shardtail-test")
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	b, err := blob.Open(ctx, s.URL("some/prefix"))
//
// The server is gofakes3 with its memory backend, inside this process: its
// objects die with it, and it accepts any credentials, so the URLs carry
// static ones (the AWS SDK insists on some). Close stops serving, closes the
// open connections and waits for the serving goroutine.
package fakes3
