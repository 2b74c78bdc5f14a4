// Package s3test gives tests an S3-compatible server over real HTTP on
// loopback: gofakes3 behind an httptest.Server, or the server named by
// SHARDTAIL_TEST_S3_ENDPOINT (e.g. SeaweedFS) when that is set.
package s3test

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// EnvEndpoint names an external S3 endpoint to use instead of gofakes3; its
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
		backend := s3mem.New()
		if err := backend.CreateBucket(bucket); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gofakes3.New(backend).Server())
		t.Cleanup(srv.Close)
		endpoint = srv.URL
	}
	q := url.Values{}
	q.Set("endpoint", endpoint)
	q.Set("region", "us-east-1")
	q.Set("path_style", "true")
	q.Set("access_key_id", "test")
	q.Set("secret_access_key", "test")
	return fmt.Sprintf("s3://%s/test-%s?%s", bucket, uuid.NewString(), q.Encode())
}
