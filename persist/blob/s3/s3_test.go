package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/uuid"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/persisttest"
)

// Environment variables that point the tests at a real S3-compatible
// server instead of the in-process fake. Credentials and region then come
// from the usual AWS variables (AWS_ACCESS_KEY_ID, ...).
const (
	envEndpoint = "SHARDTAIL_TEST_S3_ENDPOINT"
	envBucket   = "SHARDTAIL_TEST_S3_BUCKET" // default "shardtail-test"; created if missing
)

func TestBlob(t *testing.T) {
	cfg := testServer(t)
	var mu sync.Mutex
	var blobs []*Blob
	persisttest.TestBlob(t, func(t *testing.T) persist.Blob {
		c := cfg
		c.Prefix = cfg.Prefix + "/" + uuid.NewString() // a new, empty Blob
		b := openTestBlob(t, c)
		mu.Lock()
		blobs = append(blobs, b)
		mu.Unlock()
		return b
	})
	var puts, multiparts int64
	for _, b := range blobs {
		puts += b.puts.Load()
		multiparts += b.multiparts.Load()
	}
	// The suite's 20 MiB value is above the default threshold.
	if puts == 0 || multiparts == 0 {
		t.Errorf("suite used %d PutObject and %d multipart uploads, want both > 0", puts, multiparts)
	}
}

func TestMultipartThreshold(t *testing.T) {
	cfg := testServer(t)
	cfg.MultipartThreshold = 1 << 20
	cfg.MultipartPartSize = MinMultipartPartSize
	b := openTestBlob(t, cfg)
	for _, tc := range []struct {
		size                    int
		puts, multiparts, parts int64
	}{
		{1 << 20, 1, 0, 0},                      // at the threshold: one PutObject
		{1<<20 + 1, 0, 1, 1},                    // above it: one part, smaller than the minimum, is fine as the last
		{2*MinMultipartPartSize + 100, 0, 1, 3}, // two full parts and a short one
	} {
		puts, multiparts, parts := b.puts.Load(), b.multiparts.Load(), b.parts.Load()
		key := fmt.Sprintf("size/%d", tc.size)
		value := make([]byte, tc.size)
		for i := range value {
			value[i] = byte(i % 251)
		}
		if err := b.Set(t.Context(), key, value); err != nil {
			t.Fatalf("Set(%d bytes): %v", tc.size, err)
		}
		got := [3]int64{b.puts.Load() - puts, b.multiparts.Load() - multiparts, b.parts.Load() - parts}
		if want := [3]int64{tc.puts, tc.multiparts, tc.parts}; got != want {
			t.Errorf("Set(%d bytes): got %d puts, %d multipart uploads, %d parts; want %d, %d, %d",
				tc.size, got[0], got[1], got[2], want[0], want[1], want[2])
		}
		back, err := b.Get(t.Context(), key)
		if err != nil || string(back) != string(value) {
			t.Errorf("Get(%d bytes): got %d bytes, %v", tc.size, len(back), err)
		}
	}
}

func TestPrefixesShareBucket(t *testing.T) {
	cfg := testServer(t)
	base := cfg.Prefix
	cfg.Prefix = base + "/p"
	p := openTestBlob(t, cfg)
	cfg.Prefix = base + "/p2" // a sibling whose name starts with the other's
	p2 := openTestBlob(t, cfg)
	cfg.Prefix = ""
	root := openTestBlob(t, cfg)
	for _, b := range []*Blob{p, p2} {
		if err := b.Set(t.Context(), "k", []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		b    *Blob
		want string
	}{{"p", p, "k"}, {"p2", p2, "k"}} {
		var keys []string
		if err := tc.b.List(t.Context(), "", func(m persist.BlobMeta) error {
			keys = append(keys, m.Key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(keys) != 1 || keys[0] != tc.want {
			t.Errorf("List on prefix %s: got %q, want [%s]", tc.name, keys, tc.want)
		}
	}
	// Without a prefix, keys are object names: no leading '/'.
	got, err := root.Get(t.Context(), base+"/p/k")
	if err != nil || string(got) != "v" {
		t.Errorf("Get(%s/p/k) on the bucket root = %q, %v; want %q", base, got, err, "v")
	}
}

func TestMissingBucketIsNotNotFound(t *testing.T) {
	cfg := testServer(t)
	cfg.Bucket = "shardtail-missing-" + strings.ToLower(uuid.NewString()[:8])
	b := openTestBlob(t, cfg)
	if _, err := b.Get(t.Context(), "k"); err == nil || errors.Is(err, persist.ErrNotFound) {
		t.Errorf("Get on a missing bucket = %v, want an error other than ErrNotFound", err)
	}
	if err := b.Set(t.Context(), "k", []byte("v")); err == nil {
		t.Errorf("Set on a missing bucket = nil, want an error")
	}
}

func TestMultipartFailureAborts(t *testing.T) {
	var aborts atomic.Int64
	cfg := fakeServer(t, func(w http.ResponseWriter, r *http.Request) bool {
		q := r.URL.Query()
		switch {
		case r.Method == http.MethodPut && q.Get("partNumber") == "2":
			writeS3Error(w, http.StatusForbidden, "AccessDenied")
			return true
		case r.Method == http.MethodDelete && q.Has("uploadId"):
			aborts.Add(1)
		}
		return false
	})
	cfg.MultipartThreshold = 1 << 20
	cfg.MultipartPartSize = MinMultipartPartSize
	b := openTestBlob(t, cfg, noRetries)
	err := b.Set(t.Context(), "big", make([]byte, 3*MinMultipartPartSize))
	if err == nil || persist.IsIndeterminate(err) {
		t.Fatalf("Set with a refused part = %v, want a determinate error", err)
	}
	if n := aborts.Load(); n != 1 {
		t.Errorf("abort requests after a failed upload: got %d, want 1", n)
	}
	if _, err := b.Get(t.Context(), "big"); !errors.Is(err, persist.ErrNotFound) {
		t.Errorf("Get after a failed multipart Set = %v, want ErrNotFound", err)
	}
	uploads, err := b.client.ListMultipartUploads(t.Context(), &awss3.ListMultipartUploadsInput{Bucket: aws.String(cfg.Bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(uploads.Uploads) != 0 {
		t.Errorf("multipart uploads left after abort: %d, want 0", len(uploads.Uploads))
	}
}

func TestSetErrorClassification(t *testing.T) {
	cfg := fakeServer(t, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPut {
			return false
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/refused"):
			writeS3Error(w, http.StatusForbidden, "AccessDenied")
			return true
		case strings.HasSuffix(r.URL.Path, "/unavailable"):
			writeS3Error(w, http.StatusServiceUnavailable, "ServiceUnavailable")
			return true
		case strings.HasSuffix(r.URL.Path, "/lost"):
			// The request arrived; the answer never does.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return true
		}
		return false
	})
	b := openTestBlob(t, cfg, noRetries)
	for _, tc := range []struct {
		key           string
		indeterminate bool
	}{
		{"refused", false},
		{"unavailable", true},
		{"lost", true},
	} {
		err := b.Set(t.Context(), tc.key, []byte("v"))
		if err == nil || persist.IsIndeterminate(err) != tc.indeterminate {
			t.Errorf("Set(%s) = %v; want an error with indeterminate %v", tc.key, err, tc.indeterminate)
		}
	}
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.Set(canceled, "k", []byte("v")); err == nil || persist.IsIndeterminate(err) {
		t.Errorf("Set with a canceled context = %v; want a determinate error", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Bucket: "bucket"}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string // "" means valid
	}{
		{"Minimal", func(*Config) {}, ""},
		{"Full", func(c *Config) {
			*c = Config{Bucket: "bucket", Prefix: "a/b", Endpoint: "https://s3.example.com:9000", Region: "eu-west-1",
				AccessKeyID: "id", SecretAccessKey: "secret", PathStyle: true,
				MultipartThreshold: 1, MultipartPartSize: MinMultipartPartSize}
		}, ""},
		{"NoBucket", func(c *Config) { c.Bucket = "" }, "Bucket"},
		{"ShortBucket", func(c *Config) { c.Bucket = "ab" }, "Bucket"},
		{"SlashBucket", func(c *Config) { c.Bucket = "a/b/c" }, "Bucket"},
		{"LeadingSlashPrefix", func(c *Config) { c.Prefix = "/a" }, "Prefix"},
		{"TrailingSlashPrefix", func(c *Config) { c.Prefix = "a/" }, "Prefix"},
		{"EndpointScheme", func(c *Config) { c.Endpoint = "ftp://host" }, "Endpoint"},
		{"EndpointNoHost", func(c *Config) { c.Endpoint = "http://" }, "Endpoint"},
		{"OnlyAccessKey", func(c *Config) { c.AccessKeyID = "id" }, "AccessKeyID"},
		{"OnlySecret", func(c *Config) { c.SecretAccessKey = "secret" }, "SecretAccessKey"},
		{"NegativeThreshold", func(c *Config) { c.MultipartThreshold = -1 }, "MultipartThreshold"},
		{"SmallParts", func(c *Config) { c.MultipartPartSize = 1 << 20 }, "MultipartPartSize"},
		{"HugeParts", func(c *Config) { c.MultipartPartSize = MaxObjectPartSize + 1 }, "MultipartPartSize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig naming %s", err, tc.field)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("Validate() = %v quotes the secret", err)
			}
		})
	}
}

func BenchmarkSetGet(b *testing.B) {
	fake := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	defer fake.Close()
	cfg := Config{Bucket: "bench", Endpoint: fake.URL, PathStyle: true, AccessKeyID: "test", SecretAccessKey: "test"}
	blob, err := New(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer blob.Close()
	if _, err := blob.client.CreateBucket(b.Context(), &awss3.CreateBucketInput{Bucket: aws.String(cfg.Bucket)}); err != nil {
		b.Fatal(err)
	}
	persisttest.BenchmarkBlobSetGet(b, blob)
}

// testServer returns the Config of a bucket on an S3 server for t, with a
// Prefix of its own: the server named by SHARDTAIL_TEST_S3_ENDPOINT, or an
// in-process gofakes3 over real HTTP on 127.0.0.1.
func testServer(t *testing.T) Config {
	t.Helper()
	endpoint := os.Getenv(envEndpoint)
	if endpoint == "" {
		return fakeServer(t, nil)
	}
	bucket := os.Getenv(envBucket)
	if bucket == "" {
		bucket = "shardtail-test"
	}
	cfg := Config{Bucket: bucket, Endpoint: endpoint, PathStyle: true, Prefix: "test-" + uuid.NewString()}
	createBucket(t, cfg)
	return cfg
}

// fakeServer starts gofakes3 behind an httptest.Server and returns a Config
// for a bucket on it. inject, if not nil, sees every request first and
// answers it itself when it returns true: the tests' fault injection.
func fakeServer(t *testing.T, inject func(http.ResponseWriter, *http.Request) bool) Config {
	t.Helper()
	fake := gofakes3.New(s3mem.New()).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inject != nil && inject(w, r) {
			return
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := Config{
		Bucket:          "shardtail-test",
		Prefix:          "test-" + uuid.NewString(),
		Endpoint:        srv.URL,
		Region:          DefaultRegion,
		AccessKeyID:     "test",
		SecretAccessKey: "test",
		PathStyle:       true,
	}
	createBucket(t, cfg)
	return cfg
}

// createBucket creates cfg's bucket unless it exists.
func createBucket(t *testing.T, cfg Config) {
	t.Helper()
	cfg.Prefix = ""
	b := openTestBlob(t, cfg)
	_, err := b.client.CreateBucket(t.Context(), &awss3.CreateBucketInput{Bucket: aws.String(cfg.Bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		t.Fatalf("create bucket %s: %v", cfg.Bucket, err)
	}
}

// openTestBlob opens a Blob on cfg. On a real server it deletes what the
// Blob stored when t ends.
func openTestBlob(t *testing.T, cfg Config, optFns ...func(*awss3.Options)) *Blob {
	t.Helper()
	b, err := newBlob(t.Context(), cfg, optFns...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if os.Getenv(envEndpoint) != "" && cfg.Prefix != "" {
		t.Cleanup(func() {
			ctx := context.WithoutCancel(t.Context())
			_ = b.List(ctx, "", func(m persist.BlobMeta) error {
				_, err := b.Delete(ctx, m.Key)
				return err
			})
		})
	}
	return b
}

// noRetries makes every request a single attempt, so that a test sees the
// error an injected fault causes at once instead of after backoff.
func noRetries(o *awss3.Options) { o.RetryMaxAttempts = 1 }

func writeS3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by test</Message></Error>`, code)
}
