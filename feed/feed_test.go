package feed_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/feed"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
)

// wantModel fails unless m lists exactly want (sorted lines).
func wantModel(t *testing.T, m model, want ...string) {
	t.Helper()
	if got := m.String(); got != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

// TestSSEStream subscribes over SSE and checks the framing: a retry hint,
// the snapshot as a rows event closed by a progress event whose id is its
// frontier, then each change.
func TestSSEStream(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int, b text)", "INSERT INTO t VALUES (1, 'x'), (2, 'y')")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := get(t, ctx, "http://"+srv.FeedAddr+"/v1/subscribe/t")
	if got, want := resp.Header.Get("Content-Type"), "text/event-stream; charset=utf-8"; resp.StatusCode != 200 || got != want {
		t.Fatalf("status %d, Content-Type %q; want 200, %q", resp.StatusCode, got, want)
	}
	r := newSSEReader(resp.Body)
	m := model{}
	first := waitFor(t, r, m, func(ev event) bool { return ev.Name == "progress" })
	if r.Retry != "1000" {
		t.Errorf("retry hint %q, want 1000", r.Retry)
	}
	if want := `{"frontier":"` + first.ID + `"}`; first.Data != want {
		t.Errorf("progress data %q, want %q (its id is %q)", first.Data, want, first.ID)
	}
	wantModel(t, m, `{"a":1,"b":"x"} x1`, `{"a":2,"b":"y"} x1`)

	execAll(t, c, "INSERT INTO t VALUES (3, 'z')", "DELETE FROM t WHERE a = 1")
	waitFor(t, r, m, func(ev event) bool {
		return ev.Name == "progress" && len(m) == 2 && strings.Contains(m.String(), `"a":3`)
	})
	wantModel(t, m, `{"a":2,"b":"y"} x1`, `{"a":3,"b":"z"} x1`)
}

// TestSSEShapeAndEnvelope: columns, where and the upsert envelope reach
// the planner as a pgwire SUBSCRIBE of the same shape would.
func TestSSEShapeAndEnvelope(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int, b text, c int)", "INSERT INTO t VALUES (1, 'x', 10), (2, 'y', 20), (3, 'z', 30)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name, query string
		want        string
	}{
		{"Columns", "columns=c,a", `[{"mz_timestamp":"T","mz_diff":1,"c":10,"a":1},{"mz_timestamp":"T","mz_diff":1,"c":20,"a":2},{"mz_timestamp":"T","mz_diff":1,"c":30,"a":3}]`},
		{"Where", "where=" + urlEscape("a >= 2 AND b <> 'z'"), `[{"mz_timestamp":"T","mz_diff":1,"a":2,"b":"y","c":20}]`},
		{"ColumnsWhere", "columns=b&where=c%3E15", `[{"mz_timestamp":"T","mz_diff":1,"b":"y"},{"mz_timestamp":"T","mz_diff":1,"b":"z"}]`},
		{"Upsert", "envelope=upsert&key=c&where=a%3D1", `[{"mz_timestamp":"T","mz_state":"upsert","c":10,"a":1,"b":"x"}]`},
		{"Debezium", "envelope=debezium&key=a&where=a%3D1", `[{"mz_timestamp":"T","mz_state":"insert","a":1,"before_b":null,"before_c":null,"after_b":"x","after_c":10}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := get(t, ctx, "http://"+srv.FeedAddr+"/v1/subscribe/t?"+tc.query)
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			r := newSSEReader(resp.Body)
			ev, err := r.Next()
			if err != nil || ev.Name != "rows" {
				t.Fatalf("first event %+v, %v; want rows", ev, err)
			}
			p, err := r.Next()
			if err != nil || p.Name != "progress" {
				t.Fatalf("second event %+v, %v; want progress", p, err)
			}
			// Every snapshot row is at AS OF, the progress frontier less one.
			got := replaceTimestamp(t, ev.Data, p.ID)
			if got != tc.want {
				t.Errorf("rows\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// replaceTimestamp replaces the snapshot's mz_timestamp (frontier-1) by T.
func replaceTimestamp(t *testing.T, data, frontier string) string {
	t.Helper()
	var f uint64
	if err := json.Unmarshal([]byte(frontier), &f); err != nil {
		t.Fatalf("frontier %q: %v", frontier, err)
	}
	asOf, _ := json.Marshal(f - 1)
	return strings.ReplaceAll(data, `"mz_timestamp":"`+string(asOf)+`"`, `"mz_timestamp":"T"`)
}

func urlEscape(s string) string {
	r := strings.NewReplacer(" ", "%20", "'", "%27", ">", "%3E", "<", "%3C", "=", "%3D")
	return r.Replace(s)
}

// TestBadRequests: errors before streaming are JSON bodies naming the
// SQLSTATE, with the HTTP status that fits.
func TestBadRequests(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int)", "CREATE TABLE clash (a int, mz_diff int, mz_state text)", "CREATE TABLE mz_clash (mz_collection int)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name, path string
		status     int
		code       string
	}{
		{"UnknownCollection", "/v1/subscribe/nope", 404, "42P01"},
		// Two fields of one name in the rows: a JSON parser keeps one.
		{"ColumnNamedAsField", "/v1/subscribe/clash", 400, "42701"},
		{"ColumnNamedAsFieldUpsert", "/v1/subscribe/clash?envelope=upsert&key=a&live=false", 400, "42701"},
		{"ColumnTwice", "/v1/subscribe/t?columns=a,a", 400, "42701"},
		{"ColumnNamedAsCollectionField", "/v1/subscribe?collection=t&collection=mz_clash", 400, "42701"},
		{"UnknownColumn", "/v1/subscribe/t?columns=zz", 400, "42703"},
		{"UnknownParameter", "/v1/subscribe/t?snapshots=false", 400, "22023"},
		{"BadWhere", "/v1/subscribe/t?where=a%3D", 400, "42601"},
		{"WhereInjection", "/v1/subscribe/t?where=true%20ORDER%20BY%20a", 400, "22023"},
		{"WhereStatements", "/v1/subscribe/t?where=true%3B%20DROP%20TABLE%20t", 400, "22023"},
		{"WhereSubquery", "/v1/subscribe/t?where=a%20IN%20(SELECT%201)", 400, "22023"},
		{"KeyWithoutEnvelope", "/v1/subscribe/t?key=a", 400, "22023"},
		{"AfterNotAfterAsOf", "/v1/subscribe/t?after=5&as_of=5", 400, "22023"},
		{"BadTimestamp", "/v1/subscribe/t?as_of=-1", 400, "22023"},
		{"UpToBeforeAsOf", "/v1/subscribe/t?as_of=" + "18446744073709551615&up_to=1", 400, "22000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := get(t, ctx, "http://"+srv.FeedAddr+tc.path)
			var body struct{ Code, Error string }
			err := json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tc.status || err != nil || body.Code != tc.code || body.Error == "" {
				t.Errorf("status %d, body %+v (%v); want %d with code %s", resp.StatusCode, body, err, tc.status, tc.code)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
		})
	}
	// The table is still there (the injected DROP did not run).
	execAll(t, c, "SELECT * FROM t")
	_ = http.StatusOK
}

// TestWhereSyntaxError: a where= predicate that does not parse gets the
// parser's SQLSTATE, 42601, as the statement would over pgwire, and the
// error's position, counted in characters of the where= text.
func TestWhereSyntaxError(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int, b text)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name, where, want string
	}{
		{"AtEnd", "a>>", `{"code":"42601","error":"where: syntax error at end of input","position":4}`},
		{"Within", "a = = 1", `{"code":"42601","error":"where: syntax error at or near \"=\"","position":5}`},
		// Characters, not bytes: é is two.
		{"Characters", "b = 'é' b", `{"code":"42601","error":"where: syntax error at or near \"b\"","position":9}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := get(t, ctx, "http://"+srv.FeedAddr+"/v1/subscribe/t?live=false&where="+url.QueryEscape(tc.where))
			b, err := io.ReadAll(resp.Body)
			if got := strings.TrimSuffix(string(b), "\n"); resp.StatusCode != 400 || err != nil || got != tc.want {
				t.Errorf("status %d, body %s (%v); want 400, %s", resp.StatusCode, got, err, tc.want)
			}
		})
	}
}

// TestResetWhenHistoryLost: a resume point older than the collection's
// history gets event: reset (200, so that an EventSource reads it), and
// NDJSON a reset line; an as_of older than it, 400.
func TestResetWhenHistoryLost(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitSincePast1(t, ctx, c)
	resp := get(t, ctx, "http://"+srv.FeedAddr+"/v1/subscribe/t", "Last-Event-ID", "2")
	r := newSSEReader(resp.Body)
	ev, err := r.Next()
	if resp.StatusCode != 200 || err != nil || ev.Name != "reset" || !strings.Contains(ev.Data, `"code":"53200"`) || ev.ID != "" {
		t.Errorf("status %d, event %+v, %v; want 200 and a reset event without id", resp.StatusCode, ev, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after reset: %v, want the end of the stream", err)
	}
	resp = get(t, ctx, "http://"+srv.FeedAddr+"/v1/subscribe/t?after=2", "Accept", "application/x-ndjson")
	b, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(string(b), `{"reset":true,"code":"53200","error":"Timestamp (1) is not valid`) {
		t.Errorf("NDJSON reset: %s", b)
	}
	// An as_of of the request's own below since is no resume point:
	// starting over would ask for it again, so it is the request's error
	// (a reset made an EventSource, and feed.js at once, reconnect in a
	// loop), with pgwire's SQLSTATE for an AS OF below since.
	for _, path := range []string{"/v1/subscribe/t?as_of=1", "/v1/subscribe/t?as_of=1&live=false", "/v1/subscribe?collection=t&as_of=1"} {
		resp := get(t, ctx, "http://"+srv.FeedAddr+path)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || !strings.HasPrefix(string(b), `{"code":"XX000","error":"Timestamp (1) is not valid`) {
			t.Errorf("%s: status %d, body %s; want 400 with XX000", path, resp.StatusCode, b)
		}
	}
}

// TestHeartbeat: an idle stream sends comments.
func TestHeartbeat(t *testing.T) {
	srv := start(t, testserver.Options{Tick: time.Hour, Feed: feed.Config{Heartbeat: 10 * time.Millisecond}})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int)", "INSERT INTO t VALUES (1)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := get(t, ctx, "http://"+srv.FeedAddr+"/v1/subscribe/t")
	r := newSSEReader(resp.Body)
	waitFor(t, r, nil, func(event) bool { return true }) // the snapshot
	// The next event needs a write; comments come meanwhile.
	for r.Comments < 3 {
		line, err := r.r.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if line == ": heartbeat\n" {
			r.Comments++
		}
	}
}

// TestNDJSONAndSnapshot: NDJSON streams row objects and frontier lines;
// ?live=false answers the snapshot as one document with its frontier in a
// header, and ?after=<it> continues exactly after it.
func TestNDJSONAndSnapshot(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int)", "INSERT INTO t VALUES (1), (2)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := "http://" + srv.FeedAddr + "/v1/subscribe/t"

	resp := get(t, ctx, base+"?live=false")
	body, _ := io.ReadAll(resp.Body)
	f := resp.Header.Get("Shardtail-Frontier")
	if got, want := replaceTimestamp(t, string(body), f), `[{"mz_timestamp":"T","mz_diff":1,"a":1},{"mz_timestamp":"T","mz_diff":1,"a":2}]`+"\n"; got != want {
		t.Errorf("live=false: %s, want %s", got, want)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("live=false Content-Type %q", ct)
	}
	// The answer is the role's (its privileges) and of its time: no cache
	// may keep it, as none keeps a stream.
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("live=false Cache-Control %q, want no-store", cc)
	}

	execAll(t, c, "INSERT INTO t VALUES (3)")
	resp = get(t, ctx, base+"?after="+f, "Accept", "application/x-ndjson")
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("NDJSON Content-Type %q", ct)
	}
	lines := bufioLines(resp.Body)
	// Frontier lines may come first: the table's upper advances between
	// the snapshot and the INSERT. The first row must be a=3 alone.
	first := <-lines
	for strings.HasPrefix(first, `{"frontier":"`) {
		first = <-lines
	}
	if !strings.HasPrefix(first, `{"mz_timestamp":"`) || !strings.HasSuffix(first, `","mz_diff":1,"a":3}`) {
		t.Errorf("first NDJSON row %q, want the row a=3 alone (after the snapshot's frontier)", first)
	}
	if p := <-lines; !strings.HasPrefix(p, `{"frontier":"`) {
		t.Errorf("NDJSON line after the row %q, want a frontier", p)
	}
}

// bufioLines sends r's lines.
func bufioLines(r io.Reader) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		s := newSSEReader(r)
		for {
			line, err := s.r.ReadString('\n')
			if err != nil {
				return
			}
			ch <- strings.TrimSuffix(line, "\n")
		}
	}()
	return ch
}

// TestUpTo: a stream with up_to ends with event: end at it, and a
// reconnect after the end gets 204, which stops an EventSource.
func TestUpTo(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int)", "INSERT INTO t VALUES (1)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := "http://" + srv.FeedAddr + "/v1/subscribe/t"
	resp := get(t, ctx, base+"?live=false")
	io.Copy(io.Discard, resp.Body)
	f := resp.Header.Get("Shardtail-Frontier")
	fv, _ := strconv.ParseUint(f, 10, 64)
	upTo := strconv.FormatUint(fv+300, 10)
	resp = get(t, ctx, base+"?up_to="+upTo)
	r := newSSEReader(resp.Body)
	m := model{}
	var last event
	end := waitFor(t, r, m, func(ev event) bool {
		if ev.Name == "end" {
			return true
		}
		last = ev
		return false
	})
	// A progress event at UP TO comes first: an EventSource that does not
	// know the end event reconnects from it, and gets 204.
	if end.Data != `{"frontier":"`+upTo+`"}` || last.Name != "progress" || last.ID != upTo {
		t.Errorf("end event %+v after %+v, want frontier %s after a progress event at it", end, last, upTo)
	}
	wantModel(t, m, `{"a":1} x1`)
	resp = get(t, ctx, base+"?up_to="+upTo, "Last-Event-ID", upTo)
	if resp.StatusCode != 204 {
		t.Errorf("reconnect after the end: status %d, want 204", resp.StatusCode)
	}
}

// TestUpToAtAsOf: a stream whose as_of is its up_to completes with no
// rows and no progress event, since the only one would be at AS OF,
// whose id a client must not resume from (after=AS OF asks for AS OF-1,
// which may be below since, and skips the snapshot): event: end alone,
// at UP TO; an NDJSON stream is empty. So with several collections.
func TestUpToAtAsOf(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int)", "CREATE TABLE u (b int)", "INSERT INTO t VALUES (1)", "INSERT INTO u VALUES (2)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := get(t, ctx, "http://"+srv.FeedAddr+"/v1/subscribe/t?live=false")
	io.Copy(io.Discard, resp.Body)
	f, _ := strconv.ParseUint(resp.Header.Get("Shardtail-Frontier"), 10, 64)
	at := strconv.FormatUint(f-1, 10) // the snapshot's time: readable
	for _, tc := range []struct{ name, path string }{
		{"One", "/v1/subscribe/t?"},
		{"Several", "/v1/subscribe?collection=t&collection=u&"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := "http://" + srv.FeedAddr + tc.path + "as_of=" + at + "&up_to=" + at
			resp := get(t, ctx, url)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d, want 200", resp.StatusCode)
			}
			r := newSSEReader(resp.Body)
			var events []event
			for {
				ev, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("reading events: %v", err)
				}
				events = append(events, ev)
			}
			if want := []event{{Name: "end", Data: `{"frontier":"` + at + `"}`}}; fmt.Sprint(events) != fmt.Sprint(want) {
				t.Errorf("events %+v, want %+v", events, want)
			}
			resp = get(t, ctx, url, "Accept", "application/x-ndjson")
			if b, err := io.ReadAll(resp.Body); resp.StatusCode != 200 || err != nil || len(b) != 0 {
				t.Errorf("NDJSON: status %d, body %q (%v); want 200 and nothing", resp.StatusCode, b, err)
			}
		})
	}
}

// TestMetricsByTransport: subscribes are counted by transport, pgwire's
// among them, and the feed counts its bytes.
func TestMetricsByTransport(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int)", "INSERT INTO t VALUES (1)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := "http://" + srv.FeedAddr + "/v1/subscribe/t"
	waitFor(t, newSSEReader(get(t, ctx, base).Body), nil, func(ev event) bool { return ev.Name == "progress" })
	nd := bufioLines(get(t, ctx, base, "Accept", "application/x-ndjson").Body)
	<-nd
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	execAll(t, tx.Conn(), "DECLARE c CURSOR FOR SUBSCRIBE t", "FETCH 1 c")
	families, err := srv.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for _, name := range []string{"shardtail_subscribes_by_transport/sse", "shardtail_subscribes_by_transport/ndjson",
		"shardtail_subscribes_by_transport/pgwire", "shardtail_feed_streams/sse", "shardtail_subscribes_by_transport_total/sse"} {
		if got[name] != 1 {
			t.Errorf("%s = %v, want 1", name, got[name])
		}
	}
	// The streams' buffers are the memory budget's holder "feed", charged
	// while a batch is written: idle streams hold none (their write
	// buffers went back to the pool with their last write). The client
	// may read a batch before its stream has uncharged it: wait.
	for gauge(t, srv, "shardtail_memory_bytes/feed") != 0 {
		if ctx.Err() != nil {
			t.Fatalf(`shardtail_memory_bytes{holder="feed"} = %v with two idle streams, want 0`, gauge(t, srv, "shardtail_memory_bytes/feed"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTailProcess: a tail process (--upstream) serves the feed of the
// subscribes it serves itself, from the shared storage.
func TestTailProcess(t *testing.T) {
	blob, cons := blobmem.New(), consmem.New()
	up := testserver.Start(t, testserver.Options{Blob: blob, Consensus: cons})
	c := connect(t, up)
	execAll(t, c, "CREATE TABLE t (a int)", "INSERT INTO t VALUES (1)")
	tail := start(t, testserver.Options{Blob: blob, Consensus: cons,
		Adapter: func(cfg *adapter.Config) { cfg.Upstream = up.Addr }})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newSSEReader(get(t, ctx, "http://"+tail.FeedAddr+"/v1/subscribe/t").Body)
	m := model{}
	waitFor(t, r, m, func(ev event) bool { return ev.Name == "progress" })
	execAll(t, c, "INSERT INTO t VALUES (2)")
	waitFor(t, r, m, func(ev event) bool { return ev.Name == "progress" && len(m) == 2 })
	wantModel(t, m, `{"a":1} x1`, `{"a":2} x1`)
}

// TestLargeSnapshot: a snapshot far over one write (its rows written from
// the shared encoding, not copied per stream) arrives whole and well
// framed over SSE, NDJSON and live=false, to two streams at once.
func TestLargeSnapshot(t *testing.T) {
	const n = 3000
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	values := make([]string, n)
	for i := range values {
		values[i] = fmt.Sprintf("(%d, 'row %d')", i+1, i+1)
	}
	execAll(t, c, "CREATE TABLE t (a int, b text)", "INSERT INTO t VALUES "+strings.Join(values, ", "))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := "http://" + srv.FeedAddr + "/v1/subscribe/t"
	want := model{}
	for i := 1; i <= n; i++ {
		want[fmt.Sprintf(`{"a":%d,"b":"row %d"}`, i, i)] = 1
	}
	for i := range 2 {
		m := model{}
		waitFor(t, newSSEReader(get(t, ctx, base).Body), m, func(ev event) bool { return ev.Name == "progress" })
		if got, want := m.String(), want.String(); got != want {
			t.Fatalf("SSE stream %d: %d rows, want %d", i, len(m), n)
		}
	}
	m := model{}
	lines := bufioLines(get(t, ctx, base, "Accept", "application/x-ndjson").Body)
	for line := range lines {
		if strings.HasPrefix(line, `{"frontier"`) {
			break
		}
		m.apply(t, "["+line+"]")
	}
	if got, want := m.String(), want.String(); got != want {
		t.Fatalf("NDJSON: %d rows, want %d", len(m), n)
	}
	body, err := io.ReadAll(get(t, ctx, base+"?live=false").Body)
	if err != nil {
		t.Fatal(err)
	}
	m = model{}
	m.apply(t, string(body))
	if got, want := m.String(), want.String(); got != want {
		t.Fatalf("live=false: %d rows, want %d", len(m), n)
	}
}

// TestSnapshotBound: a ?live=false answer, held whole until its frontier
// is known, fails with 503 (53200) past Config.MaxSnapshotBytes, for one
// collection and for several, and is answered below it.
func TestSnapshotBound(t *testing.T) {
	srv := start(t, testserver.Options{Feed: feed.Config{MaxSnapshotBytes: 4 << 10}})
	c := connect(t, srv)
	values := make([]string, 200)
	for i := range values {
		values[i] = fmt.Sprintf("(%d, '%s')", i, strings.Repeat("x", 40))
	}
	execAll(t, c, "CREATE TABLE big (a int, b text)", "INSERT INTO big VALUES "+strings.Join(values, ", "),
		"CREATE TABLE small (a int)", "INSERT INTO small VALUES (1)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := "http://" + srv.FeedAddr + "/v1/subscribe"
	for _, tc := range []struct {
		url    string
		status int
		code   string
	}{
		{base + "/big?live=false", 503, "53200"},
		{base + "?collection=big&collection=small&live=false", 503, "53200"},
		{base + "/small?live=false", 200, ""},
	} {
		if got, code, _ := status(t, ctx, http.DefaultClient, tc.url, "", ""); got != tc.status || code != tc.code {
			t.Errorf("%s: status %d code %q, want %d %q", tc.url, got, code, tc.status, tc.code)
		}
	}
}

// TestEscapedCollectionNames: a collection is the one its name, escaped in
// the URL, names: the path segment and the collection parameter are
// unescaped once (p%2541 is "p%41", not the table "pA"), a name with a dot
// is reached qualified, and the index links every readable collection by
// a URL that streams it.
func TestEscapedCollectionNames(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c, `CREATE TABLE "p%41" (a int)`, `INSERT INTO "p%41" VALUES (1)`,
		`CREATE TABLE "pA" (a int)`, `INSERT INTO "pA" VALUES (2)`,
		`CREATE TABLE "a/b" (a int)`, `INSERT INTO "a/b" VALUES (3)`,
		`CREATE TABLE "x.y" (a int)`, `INSERT INTO "x.y" VALUES (4)`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := "http://" + srv.FeedAddr
	snapshot := func(url string) string {
		t.Helper()
		resp := get(t, ctx, url)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", url, resp.StatusCode, body)
		}
		return string(body)
	}
	for _, tc := range []struct{ url, want string }{
		{"/v1/subscribe/p%2541?live=false", `"a":1}`},
		{"/v1/subscribe?collection=p%2541&live=false", `"a":1}`},
		{"/v1/subscribe/pA?live=false", `"a":2}`},
		{"/v1/subscribe/a%2Fb?live=false", `"a":3}`},
		{"/v1/subscribe/materialize.public.x.y?live=false", `"a":4}`},
		{"/v1/subscribe?collection=materialize.public.x.y&live=false", `"a":4}`},
	} {
		if got := snapshot(base + tc.url); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %s, want the row %s", tc.url, got, tc.want)
		}
	}
	index := snapshot(base + "/")
	for _, want := range []string{`"a":1}`, `"a":2}`, `"a":3}`, `"a":4}`} {
		found := false
		for _, m := range regexp.MustCompile(`href="(/v1/subscribe/[^"]*)"`).FindAllStringSubmatch(index, -1) {
			found = found || strings.Contains(snapshot(base+html.UnescapeString(m[1])+"?live=false"), want)
		}
		if !found {
			t.Errorf("no link of the index streams the row %s:\n%s", want, index)
		}
	}
}

// TestHead: a HEAD of a stream gets the head a GET would get, and no body
// (RFC 9110): not the stream, which never ends. One of an unknown
// collection gets GET's status.
func TestHead(t *testing.T) {
	srv := start(t, testserver.Options{})
	execAll(t, connect(t, srv), "CREATE TABLE t (a int)", "INSERT INTO t VALUES (1)")
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/v1/subscribe/t", 200},
		{"/v1/subscribe?collection=t", 200},
		{"/v1/subscribe/nope", 404},
	} {
		nc, err := net.Dial("tcp", srv.FeedAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		fmt.Fprintf(nc, "HEAD %s HTTP/1.1\r\nHost: x\r\n\r\n", tc.path)
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(nc)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodHead})
		if err != nil {
			t.Fatalf("HEAD %s: %v", tc.path, err)
		}
		if resp.StatusCode != tc.status {
			t.Errorf("HEAD %s: status %d, want %d", tc.path, resp.StatusCode, tc.status)
		}
		// Nothing follows the head: a second read gets no byte for a
		// while (a stream would send its retry hint and snapshot at once).
		nc.SetReadDeadline(time.Now().Add(1500 * time.Millisecond))
		if b, err := br.ReadByte(); err == nil {
			rest, _ := br.Peek(br.Buffered())
			t.Errorf("HEAD %s: a body follows the head: %q", tc.path, string(b)+string(rest))
		}
	}
}
