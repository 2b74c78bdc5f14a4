package s3

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/shardtail/shardtail/persist/blob/internal/blobkey"
)

const (
	// DefaultRegion is the region used when neither Config.Region nor the
	// AWS environment names one. S3-compatible servers mostly ignore it but
	// SigV4 signatures need some region.
	DefaultRegion = "us-east-1"
	// DefaultMultipartThreshold is the value size above which Set uses a
	// multipart upload.
	DefaultMultipartThreshold = 8 << 20
	// DefaultMultipartPartSize is the size of each part of a multipart
	// upload but the last.
	DefaultMultipartPartSize = 8 << 20
	// MinMultipartPartSize is S3's minimum size of every part but the last.
	MinMultipartPartSize = 5 << 20
	// MaxObjectPartSize is S3's limit on one PutObject and on one part.
	MaxObjectPartSize = 5 << 30
	// MaxParts is S3's limit on the number of parts of one upload. Set grows
	// the part size beyond MultipartPartSize when a value needs more.
	MaxParts = 10000
)

// Config says which bucket a Blob stores its objects in and how to reach it.
// The zero value of every field but Bucket is usable.
type Config struct {
	// Bucket is the name of an existing bucket. Required.
	Bucket string
	// Prefix is prepended, with a '/', to every key, so that several stores
	// can share a bucket: key "s1/v2" is object "Prefix/s1/v2". Empty means
	// keys are object names. It has no leading or trailing '/'.
	Prefix string
	// Endpoint is the base URL of an S3-compatible server, such as
	// "http://127.0.0.1:9000". Empty means AWS S3 in Region (or the
	// endpoint the AWS environment configures).
	Endpoint string
	// Region is the bucket's region. Empty means the AWS environment's
	// (AWS_REGION, the shared config profile), else DefaultRegion.
	Region string
	// AccessKeyID and SecretAccessKey are static credentials; set both or
	// neither. Empty means the default AWS credential chain (environment,
	// shared credentials file, SSO, web identity, EC2/ECS role).
	AccessKeyID     string
	SecretAccessKey string
	// PathStyle addresses the bucket as ENDPOINT/BUCKET/KEY instead of
	// BUCKET.ENDPOINT/KEY; most self-hosted S3-compatible servers need it.
	PathStyle bool
	// MultipartThreshold is the value size in bytes above which Set uses a
	// multipart upload instead of one PutObject. Zero means
	// DefaultMultipartThreshold.
	MultipartThreshold int64
	// MultipartPartSize is the size in bytes of each part of a multipart
	// upload but the last, between MinMultipartPartSize and
	// MaxObjectPartSize. Zero means DefaultMultipartPartSize.
	MultipartPartSize int64
}

// Validate returns nil if c is usable, or an error wrapping
// ErrInvalidConfig that names the wrong field and says why. It never quotes
// the credentials.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Bucket == "":
		return bad("Bucket", "required")
	case len(c.Bucket) < 3 || len(c.Bucket) > 63:
		return bad("Bucket", "%q: a bucket name has 3 to 63 characters", c.Bucket)
	case strings.ContainsAny(c.Bucket, "/?#:@ "):
		return bad("Bucket", "%q: a bucket name has no '/', '?', '#', ':', '@' or space", c.Bucket)
	}
	if c.Prefix != "" {
		if err := blobkey.Check(c.Prefix); err != nil {
			return bad("Prefix", "%v", err)
		}
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		switch {
		case err != nil:
			return bad("Endpoint", "not a URL") // url's error would quote it
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			// Checked first: only now is it safe to quote the endpoint.
			return bad("Endpoint", "a base URL has no user, query or fragment")
		case u.Scheme != "http" && u.Scheme != "https":
			return bad("Endpoint", "%q: scheme must be http or https", c.Endpoint)
		case u.Host == "":
			return bad("Endpoint", "%q: no host", c.Endpoint)
		}
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		return bad("AccessKeyID/SecretAccessKey", "set both or neither")
	}
	if c.MultipartThreshold < 0 || c.MultipartThreshold > MaxObjectPartSize {
		return bad("MultipartThreshold", "%d: must be between 0 (default) and %d", c.MultipartThreshold, int64(MaxObjectPartSize))
	}
	if c.MultipartPartSize != 0 && (c.MultipartPartSize < MinMultipartPartSize || c.MultipartPartSize > MaxObjectPartSize) {
		return bad("MultipartPartSize", "%d: must be 0 (default) or between %d and %d",
			c.MultipartPartSize, int64(MinMultipartPartSize), int64(MaxObjectPartSize))
	}
	return nil
}

// withDefaults returns c with every zero field that has a default set to it.
func (c Config) withDefaults() Config {
	if c.MultipartThreshold == 0 {
		c.MultipartThreshold = DefaultMultipartThreshold
	}
	if c.MultipartPartSize == 0 {
		c.MultipartPartSize = DefaultMultipartPartSize
	}
	return c
}
