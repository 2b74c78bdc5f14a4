package feed_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// start starts a server with the feed on a free port.
func start(t *testing.T, opts testserver.Options) *testserver.Server {
	t.Helper()
	if opts.FeedListen == "" {
		opts.FeedListen = "127.0.0.1:0"
	}
	return testserver.Start(t, opts)
}

// connect opens a pgwire connection to srv as the default role.
func connect(t *testing.T, srv *testserver.Server) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// execAll runs statements, failing the test on the first error.
func execAll(t *testing.T, c *pgx.Conn, stmts ...string) {
	t.Helper()
	for _, st := range stmts {
		if _, err := c.Exec(context.Background(), st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
}

// event is one Server-Sent Event.
type event struct {
	Name, ID, Data string
}

// sseReader reads Server-Sent Events, as an EventSource parses them.
type sseReader struct {
	r *bufio.Reader
	// Comments counts comment lines (heartbeats); Retry is the last
	// retry: hint.
	Comments int
	Retry    string
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReader(r)} }

// Next returns the next event, or the read error (io.EOF at the end).
func (s *sseReader) Next() (event, error) {
	var ev event
	var data []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return event{}, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if ev.Name == "" && data == nil && ev.ID == "" {
				continue // a block with only retry: or comments
			}
			ev.Data = strings.Join(data, "\n")
			return ev, nil
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			s.Comments++
		case "event":
			ev.Name = value
		case "id":
			ev.ID = value
		case "data":
			data = append(data, value)
		case "retry":
			s.Retry = value
		}
	}
}

// get sends a GET to the feed with the given headers (name, value pairs).
func get(t *testing.T, ctx context.Context, url string, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// model is a collection's contents as a multiset of row objects (without
// mz_timestamp and mz_diff), built from the rows a stream delivered.
type model map[string]int64

// apply adds the rows of one rows event (a JSON array).
func (m model) apply(t *testing.T, data string) {
	t.Helper()
	var rows []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(data), &rows); err != nil {
		t.Fatalf("rows data %q: %v", data, err)
	}
	for _, r := range rows {
		var diff int64
		if err := json.Unmarshal(r["mz_diff"], &diff); err != nil {
			t.Fatalf("row %v: mz_diff: %v", r, err)
		}
		delete(r, "mz_diff")
		delete(r, "mz_timestamp")
		b, _ := json.Marshal(r) // keys sorted
		m[string(b)] += diff
		if m[string(b)] == 0 {
			delete(m, string(b))
		}
	}
}

// String lists the rows, sorted, one per line with their counts.
func (m model) String() string {
	var lines []string
	for k, n := range m {
		lines = append(lines, fmt.Sprintf("%s x%d", k, n))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// waitFor reads events until one satisfies done, applying rows events to
// m, and returns the last progress frontier seen.
func waitFor(t *testing.T, r *sseReader, m model, done func(ev event) bool) event {
	t.Helper()
	for {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("reading events: %v (model so far:\n%v)", err, m)
		}
		if ev.Name == "rows" && m != nil {
			m.apply(t, ev.Data)
		}
		if done(ev) {
			return ev
		}
	}
}

// waitSincePast1 waits for table t's since to pass 1 (its reader
// downgrades it in the background).
func waitSincePast1(t *testing.T, ctx context.Context, c *pgx.Conn) {
	t.Helper()
	for {
		_, err := c.Exec(ctx, "SELECT * FROM t AS OF 1")
		if err != nil && strings.Contains(err.Error(), "is not valid for all inputs") {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("since did not pass 1: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
