package fakes3

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Server is an in-memory S3 server on a loopback port, holding one bucket.
// Start sets its exported fields; they are read-only.
type Server struct {
	// Endpoint is the server's base URL: http://127.0.0.1:port.
	Endpoint string
	// Bucket is the bucket Start created.
	Bucket string

	srv      *http.Server
	served   chan struct{} // closed when Serve has returned; then serveErr is set
	serveErr error
}

// Start creates bucket in a new in-memory backend and serves it on a free
// port of 127.0.0.1 until Close.
func Start(bucket string) (*Server, error) {
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &Server{
		Endpoint: "http://" + ln.Addr().String(),
		Bucket:   bucket,
		srv:      &http.Server{Handler: gofakes3.New(backend).Server(), ReadHeaderTimeout: 10 * time.Second},
		served:   make(chan struct{}),
	}
	go func() {
		s.serveErr = s.srv.Serve(ln)
		close(s.served)
	}()
	return s, nil
}

// URL returns the blob URL of prefix in the server's bucket.
func (s *Server) URL(prefix string) string { return BlobURL(s.Endpoint, s.Bucket, prefix) }

// Close stops the server, closing its connections, and waits for it.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.served
	if !errors.Is(s.serveErr, http.ErrServerClosed) {
		err = errors.Join(err, s.serveErr)
	}
	return err
}

// BlobURL returns the blob URL (s3://bucket/prefix?endpoint=...) of prefix
// in bucket on the S3-compatible server at endpoint: path-style addressing,
// as a server on an IP address needs, region us-east-1 and credentials
// "test", which gofakes3 and an unauthenticated test server accept.
func BlobURL(endpoint, bucket, prefix string) string {
	q := url.Values{}
	q.Set("endpoint", endpoint)
	q.Set("region", "us-east-1")
	q.Set("path_style", "true")
	q.Set("access_key_id", "test")
	q.Set("secret_access_key", "test")
	return fmt.Sprintf("s3://%s/%s?%s", bucket, prefix, q.Encode())
}
