package feed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardtail/shardtail/feed"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// TestMultiCollection: a stream of two collections is one consistent
// cut: its rows of each collection, timestamp by timestamp, are those of
// that collection's own stream from the same point, every progress event
// closing both; ?live=false gives both snapshots at one frontier; and the
// stream resumes exactly across random cuts.
func TestMultiCollection(t *testing.T) {
	srv := start(t, testserver.Options{Tick: 20 * time.Millisecond})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE a (k int)", "CREATE TABLE b (k int, s text)",
		"ALTER TABLE a SET (RETAIN HISTORY FOR '1 minute')", "ALTER TABLE b SET (RETAIN HISTORY FOR '1 minute')",
		"INSERT INTO a VALUES (1), (2)", "INSERT INTO b VALUES (10, 'x')")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := "http://" + srv.FeedAddr + "/v1/subscribe?collection=a&collection=b"

	resp := get(t, ctx, base+"&live=false")
	body, _ := io.ReadAll(resp.Body)
	f0 := resp.Header.Get("Shardtail-Frontier")
	want := `[{"mz_collection":"a","mz_timestamp":"T","mz_diff":1,"k":1},{"mz_collection":"a","mz_timestamp":"T","mz_diff":1,"k":2},` +
		`{"mz_collection":"b","mz_timestamp":"T","mz_diff":1,"k":10,"s":"x"}]` + "\n"
	if got := replaceTimestamp(t, string(body), f0); resp.StatusCode != 200 || got != want {
		t.Fatalf("live=false: %d %s\nwant %s", resp.StatusCode, got, want)
	}

	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	limit := func() int64 { mu.Lock(); defer mu.Unlock(); return 1 + rng.Int64N(600) }
	merged := &follower{t: t, url: base + "&after=" + f0, rows: stamped{}}
	cut := &follower{t: t, url: "http://" + newProxy(t, srv.FeedAddr, limit).Addr() + "/v1/subscribe?collection=a&collection=b&after=" + f0, rows: stamped{}}
	single := stamped{}
	singles := []*follower{
		{t: t, url: "http://" + srv.FeedAddr + "/v1/subscribe/a?after=" + f0, rows: single, collection: "a"},
		{t: t, url: "http://" + srv.FeedAddr + "/v1/subscribe/b?after=" + f0, rows: single, collection: "b"},
	}
	for i := 0; i < 30; i++ {
		st := fmt.Sprintf("INSERT INTO a VALUES (%d)", i)
		switch i % 3 {
		case 1:
			st = fmt.Sprintf("INSERT INTO b VALUES (%d, 'v%d')", i, i)
		case 2:
			st = fmt.Sprintf("DELETE FROM a WHERE k = %d", i-2)
		}
		execAll(t, c, st)
	}
	resp = get(t, ctx, base+"&live=false")
	io.Copy(io.Discard, resp.Body)
	end, _ := strconv.ParseUint(resp.Header.Get("Shardtail-Frontier"), 10, 64)
	for _, f := range append([]*follower{merged, cut}, singles...) {
		f.follow(ctx, end)
	}
	got, wantRows := merged.rows.below(end), single.below(end)
	if got != wantRows {
		t.Errorf("the stream of a and b\n%s\nwant the streams of each\n%s", got, wantRows)
	}
	if !strings.Contains(got, `\"mz_collection\":\"b\"`) {
		t.Errorf("no row of b in %s", got)
	}
	if c := cut.rows.below(end); c != got || cut.reconns == 0 {
		t.Errorf("cut %d times, the stream ended with\n%s\nwant\n%s", cut.reconns, c, got)
	}
	var doc []map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
}

// TestMultiCollectionErrors: shape parameters are for one collection, and
// an unknown collection fails the whole stream.
func TestMultiCollectionErrors(t *testing.T) {
	srv := start(t, testserver.Options{})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE a (k int)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		query  string
		status int
		code   string
	}{
		{"collection=a&collection=nope", 404, "42P01"},
		{"collection=a&where=k%3D1", 400, "22023"},
		{"collection=a&collection=a", 400, "22023"},
		{"", 400, "22023"},
	} {
		resp := get(t, ctx, "http://"+srv.FeedAddr+"/v1/subscribe?"+tc.query)
		var body struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&body)
		if resp.StatusCode != tc.status || body.Code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.query, resp.StatusCode, body.Code, tc.status, tc.code)
		}
	}
}

// TestMultiHeldBound: a stream of several collections holds rows until
// every collection's frontier passes them, up to Config.MaxHeldBytes:
// past it the stream ends with event: reset (53200), and a ?live=false
// answer with 503 (53200). (A bound of one byte is passed by any row.)
func TestMultiHeldBound(t *testing.T) {
	srv := start(t, testserver.Options{Feed: feed.Config{MaxHeldBytes: 1}})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE a (k int)", "CREATE TABLE b (k int)", "INSERT INTO a VALUES (1)", "INSERT INTO b VALUES (2)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := "http://" + srv.FeedAddr + "/v1/subscribe?collection=a&collection=b"
	ev := waitFor(t, newSSEReader(get(t, ctx, base).Body), nil, func(ev event) bool { return ev.Name == "reset" || ev.Name == "rows" })
	var body struct{ Code string }
	if err := json.Unmarshal([]byte(ev.Data), &body); ev.Name != "reset" || err != nil || body.Code != "53200" {
		t.Errorf("got event %q %s, want reset with 53200", ev.Name, ev.Data)
	}
	if got, code, _ := status(t, ctx, http.DefaultClient, base+"&live=false", "", ""); got != 503 || code != "53200" {
		t.Errorf("live=false: status %d code %q, want 503 53200", got, code)
	}
	// One collection holds nothing: the bound does not apply.
	if got, code, _ := status(t, ctx, http.DefaultClient, "http://"+srv.FeedAddr+"/v1/subscribe/a?live=false", "", ""); got != 200 {
		t.Errorf("one collection, live=false: status %d code %q, want 200", got, code)
	}
}
