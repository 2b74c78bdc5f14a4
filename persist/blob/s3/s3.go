package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/blob/internal/blobkey"
)

// Blob is a persist.Blob on an S3 bucket. It is safe for concurrent use.
type Blob struct {
	client    *awss3.Client
	transport *http.Transport // ours, so that Close can drop its connections
	bucket    string
	prefix    string // "" or Config.Prefix + "/"
	threshold int64
	partSize  int64

	// Counters of requests that wrote objects, read by tests to check which
	// path a Set took.
	puts       atomic.Int64 // PutObject calls
	multiparts atomic.Int64 // CompleteMultipartUpload calls
	parts      atomic.Int64 // UploadPart calls
}

var _ persist.Blob = (*Blob)(nil)

// New returns a Blob on the bucket cfg names. It validates cfg and loads
// the AWS configuration (credentials are resolved lazily, on the first
// request); it sends no request, so a missing bucket shows on first use.
func New(ctx context.Context, cfg Config) (*Blob, error) {
	return newBlob(ctx, cfg)
}

// newBlob is New with extra client options, with which tests turn off
// retries to see the errors a single attempt gets.
func newBlob(ctx context.Context, cfg Config, optFns ...func(*awss3.Options)) (*Blob, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	opts := []func(*config.LoadOptions) error{
		// The SDK's default CRC trailers are not understood by many
		// S3-compatible servers; Set sends Content-MD5 instead, which every
		// server checks, so the bytes are verified end to end either way.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3 blob: load aws config: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = DefaultRegion
	}
	// Take the transport the SDK configured (its timeouts, AWS_CA_BUNDLE)
	// and own it, so that Close can drop its connections.
	buildable, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient)
	if !ok {
		buildable = awshttp.NewBuildableClient()
	}
	transport := buildable.GetTransport()
	// Parts upload in parallel and many Gets run at once: keep their
	// connections instead of re-dialing.
	transport.MaxIdleConnsPerHost = 64
	awsCfg.HTTPClient = &http.Client{
		Transport: transport,
		// Like the SDK's client: a redirect is an answer to report (a wrong
		// region), not to follow with a signature for another host.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	client := awss3.NewFromConfig(awsCfg, append([]func(*awss3.Options){func(o *awss3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
	}}, optFns...)...)
	b := &Blob{
		client:    client,
		transport: transport,
		bucket:    cfg.Bucket,
		threshold: cfg.MultipartThreshold,
		partSize:  cfg.MultipartPartSize,
	}
	if cfg.Prefix != "" {
		b.prefix = cfg.Prefix + "/"
	}
	return b, nil
}

// Get returns the value stored at key, or persist.ErrNotFound.
func (b *Blob) Get(ctx context.Context, key string) ([]byte, error) {
	if err := blobkey.Check(key); err != nil {
		return nil, fmt.Errorf("s3 blob: get: %w", err)
	}
	out, err := b.client.GetObject(ctx, &awss3.GetObjectInput{
		Bucket: aws.String(b.bucket),
		Key:    aws.String(b.objectKey(key)),
	})
	if isNotFound(err) {
		return nil, fmt.Errorf("s3 blob: get %s: %w", key, persist.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("s3 blob: get %s: %w", key, err)
	}
	defer out.Body.Close()
	// One GET returns one version of the object whole, so a concurrent Set
	// can not mix into it; a short body is an error, not a value.
	value := make([]byte, 0, max(aws.ToInt64(out.ContentLength), 0))
	buf := bytes.NewBuffer(value)
	if _, err := buf.ReadFrom(out.Body); err != nil {
		return nil, fmt.Errorf("s3 blob: get %s: read body: %w", key, err)
	}
	if n := out.ContentLength; n != nil && int64(buf.Len()) != *n {
		return nil, fmt.Errorf("s3 blob: get %s: read %d bytes, want %d", key, buf.Len(), *n)
	}
	return buf.Bytes(), nil
}

// Set stores value at key: with one PutObject up to the multipart
// threshold, with a multipart upload above it. Either way the object
// appears whole or not at all. An error that leaves it unknown whether the
// object was written wraps persist.ErrIndeterminate.
func (b *Blob) Set(ctx context.Context, key string, value []byte) error {
	if err := blobkey.Check(key); err != nil {
		return fmt.Errorf("s3 blob: set: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err // nothing was sent: determinate
	}
	if int64(len(value)) > b.threshold {
		return b.setMultipart(ctx, key, value)
	}
	b.puts.Add(1)
	_, err := b.client.PutObject(ctx, &awss3.PutObjectInput{
		Bucket:        aws.String(b.bucket),
		Key:           aws.String(b.objectKey(key)),
		Body:          bytes.NewReader(value),
		ContentLength: aws.Int64(int64(len(value))),
		ContentMD5:    contentMD5(value),
	})
	if err != nil {
		return classify(fmt.Sprintf("s3 blob: set %s", key), err)
	}
	return nil
}

// Delete removes key and reports whether it existed. S3's DeleteObject does
// not say, so Delete asks with HeadObject first, and deletes only what it
// found. Two racing Deletes may both report true.
func (b *Blob) Delete(ctx context.Context, key string) (bool, error) {
	if err := blobkey.Check(key); err != nil {
		return false, fmt.Errorf("s3 blob: delete: %w", err)
	}
	objectKey := aws.String(b.objectKey(key))
	_, err := b.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(b.bucket), Key: objectKey})
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("s3 blob: delete %s: head: %w", key, err)
	}
	_, err = b.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: objectKey})
	if err != nil {
		return false, classify(fmt.Sprintf("s3 blob: delete %s", key), err)
	}
	return true, nil
}

// List calls fn for every key with the prefix, in lexical order, a page of
// up to 1000 keys per request.
func (b *Blob) List(ctx context.Context, prefix string, fn func(persist.BlobMeta) error) error {
	if err := blobkey.CheckPrefix(prefix); err != nil {
		return fmt.Errorf("s3 blob: list: %w", err)
	}
	pages := awss3.NewListObjectsV2Paginator(b.client, &awss3.ListObjectsV2Input{
		Bucket: aws.String(b.bucket),
		// With an empty prefix this is b.prefix, ending in '/': a sibling
		// store under "PREFIX2/" is never listed.
		Prefix: aws.String(b.objectKey(prefix)),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("s3 blob: list %q: %w", prefix, err)
		}
		for _, obj := range page.Contents {
			key, ok := strings.CutPrefix(aws.ToString(obj.Key), b.prefix)
			if !ok {
				continue // cannot happen with a conforming server
			}
			meta := persist.BlobMeta{Key: key, Size: aws.ToInt64(obj.Size), Modified: aws.ToTime(obj.LastModified)}
			if err := fn(meta); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close closes the idle connections to the server. Requests in flight are
// not interrupted; their callers' contexts own them.
func (b *Blob) Close() error {
	b.transport.CloseIdleConnections()
	return nil
}

// objectKey maps a key (or a List prefix) to the object's name.
func (b *Blob) objectKey(key string) string { return b.prefix + key }

// contentMD5 returns the Content-MD5 header for value: the server rejects
// the upload if the bytes it received differ.
func contentMD5(value []byte) *string {
	sum := md5.Sum(value)
	return aws.String(base64.StdEncoding.EncodeToString(sum[:]))
}

// isNotFound reports whether err says the object does not exist. A 404 for
// a missing bucket is not that: persist must not take a misconfigured
// bucket for a deleted blob. (HeadObject's 404 has no body to tell the two
// apart; Delete accepts that, Get does not depend on it.)
func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	var noSuchKey *types.NoSuchKey
	if errors.As(err, &noSuchKey) {
		return true
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchBucket" {
		return false
	}
	return httpStatus(err) == http.StatusNotFound
}

// classify wraps err, from a request that writes, with step, and with
// persist.ErrIndeterminate unless the server answered with a 4xx status:
// a refusal means the write did not happen, but a timeout, a lost
// connection or a 5xx after the request was sent may hide one that did.
func classify(step string, err error) error {
	if status := httpStatus(err); status >= 400 && status < 500 {
		return fmt.Errorf("%s: %w", step, err)
	}
	return fmt.Errorf("%w: %s: %w", persist.ErrIndeterminate, step, err)
}

// httpStatus returns the HTTP status of the response err came with, or 0
// if there was none.
func httpStatus(err error) int {
	var resp interface{ HTTPStatusCode() int }
	if errors.As(err, &resp) {
		return resp.HTTPStatusCode()
	}
	return 0
}
