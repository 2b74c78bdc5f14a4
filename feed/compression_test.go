package feed_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardtail/shardtail/feed"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// fetchRaw sends a GET with the given headers on a transport that neither
// asks for nor decodes compression (the request's own Accept-Encoding
// decides), and returns the response and its body as sent.
func fetchRaw(t *testing.T, ctx context.Context, url string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d: %s", url, resp.StatusCode, body)
	}
	return resp, body
}

// gunzip decodes a whole gzip member, checking its CRC and length.
func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	br := bytes.NewReader(b) // a ByteReader: the gzip.Reader reads no further than the member
	zr, err := gzip.NewReader(br)
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gunzip %d bytes: %v", len(b), err)
	}
	if br.Len() != 0 {
		t.Fatalf("%d bytes after the gzip member", br.Len())
	}
	return out
}

// normalize is a stream's content without where its events were cut: an
// SSE stream's row objects one per line and its other events by name, id
// and data; NDJSON as it is.
func normalize(t *testing.T, body []byte, ndjson bool) string {
	t.Helper()
	if ndjson {
		return string(body)
	}
	r := newSSEReader(strings.NewReader(string(body)))
	var out []string
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Name != "rows" {
			out = append(out, fmt.Sprintf("%s %s %s", ev.Name, ev.ID, ev.Data))
			continue
		}
		var rows []json.RawMessage
		if err := json.Unmarshal([]byte(ev.Data), &rows); err != nil {
			t.Fatalf("rows %q: %v", ev.Data, err)
		}
		for _, row := range rows {
			out = append(out, string(row))
		}
	}
	return strings.Join(out, "\n")
}

// TestCompressedStreams: every kind of answer (an SSE snapshot, an SSE
// resume with Last-Event-ID, NDJSON, a ?live=false document, a stream of
// several collections) to a request with Accept-Encoding: gzip is a
// gzip member (CRC and length checked) of the same content as the
// uncompressed answer, and is smaller; Go's http.Client, which asks for
// gzip itself, reads it transparently; with Compression none, a request
// for gzip gets it uncompressed.
func TestCompressedStreams(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (k int, v text)", "CREATE TABLE u (k int)",
		"ALTER TABLE t SET (RETAIN HISTORY FOR '5 minutes')", "ALTER TABLE u SET (RETAIN HISTORY FOR '5 minutes')")
	var values []string
	for i := range 3000 {
		values = append(values, fmt.Sprintf("(%d, 'row %d of the table, padded')", i, i))
	}
	execAll(t, c, "INSERT INTO t VALUES "+strings.Join(values, ", "), "INSERT INTO u VALUES (1), (2)")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := "http://" + srv.FeedAddr
	frontier := func() uint64 {
		resp, _ := fetchRaw(t, ctx, base+"/v1/subscribe?collection=t&collection=u&live=false")
		f, err := strconv.ParseUint(resp.Header.Get(feed.FrontierHeader), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f0 := frontier()
	execAll(t, c, "UPDATE t SET v = 'changed' || v WHERE k < 500", "DELETE FROM t WHERE k >= 2900", "INSERT INTO u VALUES (3)")
	f1 := frontier()
	if f1 <= f0 {
		t.Fatalf("frontier %d after the writes, want above %d", f1, f0)
	}
	for _, tc := range []struct {
		name, path string
		headers    []string
		ndjson     bool
	}{
		{"SSESnapshot", fmt.Sprintf("/v1/subscribe/t?as_of=%d&up_to=%d", f1-1, f1), nil, false},
		{"SSEResume", fmt.Sprintf("/v1/subscribe/t?up_to=%d", f1), []string{"Last-Event-ID", strconv.FormatUint(f0, 10)}, false},
		{"SSESnapshotAndChanges", fmt.Sprintf("/v1/subscribe/t?as_of=%d&up_to=%d", f0-1, f1), nil, false},
		{"NDJSON", fmt.Sprintf("/v1/subscribe/t?as_of=%d&up_to=%d", f0-1, f1), []string{"Accept", "application/x-ndjson"}, true},
		{"Document", fmt.Sprintf("/v1/subscribe/t?live=false&as_of=%d", f1-1), nil, true},
		{"Several", fmt.Sprintf("/v1/subscribe?collection=t&collection=u&as_of=%d&up_to=%d", f0-1, f1), nil, false},
		{"SeveralDocument", fmt.Sprintf("/v1/subscribe?collection=t&collection=u&live=false&as_of=%d", f1-1), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plainResp, plain := fetchRaw(t, ctx, base+tc.path, tc.headers...)
			if enc := plainResp.Header.Get("Content-Encoding"); enc != "" {
				t.Fatalf("uncompressed answer has Content-Encoding %q", enc)
			}
			zResp, z := fetchRaw(t, ctx, base+tc.path, append([]string{"Accept-Encoding", "gzip"}, tc.headers...)...)
			if enc, vary := zResp.Header.Get("Content-Encoding"), zResp.Header.Values("Vary"); enc != "gzip" || !strings.Contains(strings.Join(vary, ","), "Accept-Encoding") {
				t.Fatalf("Content-Encoding %q, Vary %q; want gzip, Accept-Encoding", enc, vary)
			}
			want := normalize(t, plain, tc.ndjson)
			if got := normalize(t, gunzip(t, z), tc.ndjson); got != want {
				t.Fatalf("the gzip answer decodes to\n%.2000s\nwant\n%.2000s", got, want)
			}
			if len(z)*3 > len(plain) {
				t.Errorf("compressed %d bytes, uncompressed %d: want under a third", len(z), len(plain))
			}
			// Go's client asks for gzip and decodes it as it reads.
			resp := get(t, ctx, base+tc.path, tc.headers...)
			b, err := io.ReadAll(resp.Body)
			if err != nil || !resp.Uncompressed {
				t.Fatalf("http.Client read %v, decompressed %v; want no error, decompressed", err, resp.Uncompressed)
			}
			if got := normalize(t, b, tc.ndjson); got != want {
				t.Fatalf("http.Client read\n%.2000s\nwant\n%.2000s", got, want)
			}
		})
	}
}

// TestCompressionNone: with Compression none a request that accepts gzip
// gets the stream uncompressed.
func TestCompressionNone(t *testing.T) {
	srv := start(t, testserver.Options{Feed: feed.Config{Compression: feed.CompressionNone}})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (k int)", "INSERT INTO t VALUES (1)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+srv.FeedAddr+"/v1/subscribe/t", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "gzip")
	cl := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer cl.CloseIdleConnections()
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if enc := resp.Header.Get("Content-Encoding"); enc != "" {
		t.Fatalf("Content-Encoding %q, want none", enc)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "retry: 1000\n" {
		t.Fatalf("first line %q, %v; want the retry hint", line, err)
	}
}
