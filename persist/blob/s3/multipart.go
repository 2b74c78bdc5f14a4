package s3

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"
)

const (
	// partConcurrency bounds the parts of one Set in flight at once: enough
	// to fill a link to a nearby server, few enough that one large Set does
	// not take every connection from concurrent Gets.
	partConcurrency = 4
	// abortTimeout bounds the cleanup after a failed multipart upload. It
	// runs even when the caller's context is done, because the parts
	// uploaded so far cost storage until they are aborted.
	abortTimeout = 30 * time.Second
)

// setMultipart stores value at key with a multipart upload: create, upload
// the parts concurrently, complete. The object appears only when complete
// succeeds, whole; until then a Get sees the old value. On any failure it
// aborts the upload so no parts linger (a bucket lifecycle rule
// AbortIncompleteMultipartUpload catches those an abort itself fails to
// remove). Only an unclear outcome of complete is indeterminate.
func (b *Blob) setMultipart(ctx context.Context, key string, value []byte) (err error) {
	bucket, objectKey := aws.String(b.bucket), aws.String(b.objectKey(key))
	created, err := b.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{
		Bucket: bucket,
		Key:    objectKey,
	})
	if err != nil {
		return fmt.Errorf("s3 blob: set %s: create multipart upload: %w", key, err)
	}
	uploadID := created.UploadId
	defer func() {
		if err == nil {
			return
		}
		abortCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		// If complete did succeed, abort fails with NoSuchUpload and the
		// object stays: harmless either way, so its error is dropped.
		_, _ = b.client.AbortMultipartUpload(abortCtx, &awss3.AbortMultipartUploadInput{
			Bucket:   bucket,
			Key:      objectKey,
			UploadId: uploadID,
		})
	}()

	partSize := b.partSize
	if n := int64(len(value)); (n+partSize-1)/partSize > MaxParts {
		partSize = (n + MaxParts - 1) / MaxParts
	}
	parts := make([]types.CompletedPart, 0, (int64(len(value))+partSize-1)/partSize)
	for off := int64(0); off < int64(len(value)); off += partSize {
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(int32(len(parts) + 1))})
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(partConcurrency)
	for i := range parts {
		if gctx.Err() != nil {
			break // a part failed: do not start more
		}
		chunk := value[int64(i)*partSize : min(int64(i+1)*partSize, int64(len(value)))]
		g.Go(func() error {
			b.parts.Add(1)
			out, err := b.client.UploadPart(gctx, &awss3.UploadPartInput{
				Bucket:        bucket,
				Key:           objectKey,
				UploadId:      uploadID,
				PartNumber:    parts[i].PartNumber,
				Body:          bytes.NewReader(chunk),
				ContentLength: aws.Int64(int64(len(chunk))),
				ContentMD5:    contentMD5(chunk),
			})
			if err != nil {
				return fmt.Errorf("upload part %d: %w", i+1, err)
			}
			parts[i].ETag = out.ETag // each goroutine writes only its own element
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		// Complete was never sent, so the object was not written.
		return fmt.Errorf("s3 blob: set %s: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		// The loop may have stopped early without a part failing.
		return fmt.Errorf("s3 blob: set %s: %w", key, err)
	}

	b.multiparts.Add(1)
	_, err = b.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
		Bucket:          bucket,
		Key:             objectKey,
		UploadId:        uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return classify(fmt.Sprintf("s3 blob: set %s: complete multipart upload", key), err)
	}
	return nil
}
