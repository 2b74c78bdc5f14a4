// Package s3test gives tests an S3-compatible server over real HTTP on
// loopback: an in-memory one (internal/fakes3) per test, or the server
// named by SHARDTAIL_TEST_S3_ENDPOINT (e.g. SeaweedFS) when that is set.
package s3test

import (
	"os"
	"testing"

	"github.com/google/uuid"

	"github.com/shardtail/shardtail/internal/fakes3"
)

// EnvEndpoint names an external S3 endpoint to use instead of fakes3; its
// bucket (SHARDTAIL_TEST_S3_BUCKET, default shardtail-test) must exist.
const EnvEndpoint = "SHARDTAIL_TEST_S3_ENDPOINT"

// URL returns a blob URL (s3://bucket/prefix?endpoint=...) on a fresh
// prefix, for persist/blob.Open.
func URL(t testing.TB) string {
	t.Helper()
	endpoint, bucket := os.Getenv(EnvEndpoint), os.Getenv("SHARDTAIL_TEST_S3_BUCKET")
	if bucket == "" {
		bucket = "shardtail-test"
	}
	if endpoint == "" {
		s, err := fakes3.Start(bucket)
		if err != nil {
			t.Fatalf("s3test: %v", err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("s3test: close: %v", err)
			}
		})
		endpoint = s.Endpoint
	}
	return fakes3.BlobURL(endpoint, bucket, "test-"+uuid.NewString())
}
