package fakes3

import (
	"bytes"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/shardtail/shardtail/persist/blob"
)

func TestServerServesBlobs(t *testing.T) {
	s, err := Start("fakes3-test")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	raw := s.URL("a/prefix")
	if !strings.HasPrefix(raw, "s3://fakes3-test/a/prefix?") {
		t.Errorf("URL = %s; want s3://fakes3-test/a/prefix?...", raw)
	}
	b, err := blob.Open(t.Context(), raw)
	if err != nil {
		t.Fatalf("open %s: %v", raw, err)
	}
	defer b.Close()
	want := []byte("value")
	if err := b.Set(t.Context(), "key", want); err != nil {
		t.Fatalf("Set: %v", err)
	}
	got, err := b.Get(t.Context(), "key")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Get = %q, %v; want %q", got, err, want)
	}

	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	u, _ := url.Parse(s.Endpoint)
	if c, err := net.Dial("tcp", u.Host); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Close", u.Host)
	}
}
