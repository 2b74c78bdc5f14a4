package feed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// stamped is a stream's rows by timestamp: for each timestamp, each row
// object (without mz_timestamp and mz_diff) with its summed diff.
type stamped map[uint64]map[string]int64

// add adds the rows of one rows event.
func (s stamped) add(t *testing.T, data string) { s.addAs(t, data, "") }

// addAs adds the rows of one rows event, naming their collection
// (mz_collection) when collection is set.
func (s stamped) addAs(t *testing.T, data, collection string) {
	t.Helper()
	var rows []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(data), &rows); err != nil {
		t.Errorf("rows data %q: %v", data, err)
		return
	}
	for _, r := range rows {
		var ts string
		var diff int64
		if json.Unmarshal(r["mz_timestamp"], &ts) != nil || json.Unmarshal(r["mz_diff"], &diff) != nil {
			t.Errorf("row %s lacks mz_timestamp or mz_diff", data)
			return
		}
		time, _ := strconv.ParseUint(ts, 10, 64)
		delete(r, "mz_timestamp")
		delete(r, "mz_diff")
		if collection != "" {
			r["mz_collection"], _ = json.Marshal(collection)
		}
		b, _ := json.Marshal(r)
		if s[time] == nil {
			s[time] = map[string]int64{}
		}
		s[time][string(b)] += diff
	}
}

// below returns the rows below frontier, as text for a comparison.
func (s stamped) below(frontier uint64) string {
	out := stamped{}
	for ts, rows := range s {
		if ts < frontier {
			out[ts] = rows
		}
	}
	b, _ := json.Marshal(out) // map keys sorted
	return string(b)
}

// follower reads an SSE stream, reconnecting with Last-Event-ID after
// every break as a browser does, and keeps the rows closed by a progress
// event. rows not yet closed when the connection breaks are dropped.
type follower struct {
	t       *testing.T
	url     string
	rows    stamped
	last    string // the last progress id
	cut     func() int64
	reconns int
	// collection names the rows' collection in rows (a one-collection
	// stream, compared with a stream of several).
	collection string
	// identity asks for the stream uncompressed (else it asks for gzip,
	// as http.Client and browsers do).
	identity bool
}

// identityClient neither asks for nor decodes compression.
var identityClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// follow reads until the stream's frontier reaches until.
func (f *follower) follow(ctx context.Context, until uint64) {
	t := f.t
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", f.url, nil)
		if f.last != "" {
			req.Header.Set("Last-Event-ID", f.last)
		}
		client := http.DefaultClient
		if f.identity {
			client = identityClient
		}
		resp, err := client.Do(req)
		if err != nil {
			// Cut before the headers were whole: retry, as a browser does.
			if ctx.Err() != nil {
				t.Fatalf("reconnect %d: %v", f.reconns, err)
			}
			f.reconns++
			continue
		}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("reconnect %d: status %d: %s", f.reconns, resp.StatusCode, b)
		}
		if enc := resp.Header.Get("Content-Encoding"); f.identity != (enc == "" && !resp.Uncompressed) {
			t.Fatalf("reconnect %d: Content-Encoding %q (decoded: %v), identity asked: %v", f.reconns, enc, resp.Uncompressed, f.identity)
		}
		var body io.Reader = resp.Body
		if f.cut != nil {
			// The client hangs up after a random number of bytes.
			body = io.LimitReader(resp.Body, f.cut())
		}
		r := newSSEReader(body)
		pending := stamped{}
		for {
			ev, err := r.Next()
			if err != nil {
				break // cut: drop what was not closed, reconnect
			}
			switch ev.Name {
			case "rows":
				// A progress event closed every row below it: none may
				// follow it (in a stream of several collections, none of
				// any collection).
				var times []struct {
					MzTimestamp string `json:"mz_timestamp"`
				}
				json.Unmarshal([]byte(ev.Data), &times)
				last, _ := strconv.ParseUint(f.last, 10, 64)
				for _, r := range times {
					if ts, _ := strconv.ParseUint(r.MzTimestamp, 10, 64); ts < last {
						t.Fatalf("a row at %d after progress %d: %s", ts, last, ev.Data)
					}
				}
				pending.addAs(t, ev.Data, f.collection)
			case "progress":
				for ts, rows := range pending {
					if f.rows[ts] == nil {
						f.rows[ts] = map[string]int64{}
					}
					for k, n := range rows {
						f.rows[ts][k] += n
					}
				}
				pending = stamped{}
				f.last = ev.ID
				if n, _ := strconv.ParseUint(ev.ID, 10, 64); n >= until {
					resp.Body.Close()
					return
				}
			case "reset", "error":
				t.Fatalf("event %s: %s", ev.Name, ev.Data)
			}
		}
		resp.Body.Close()
		if ctx.Err() != nil {
			t.Fatalf("frontier %s did not reach %d: %v", f.last, until, ctx.Err())
		}
		f.reconns++
	}
}

// TestResumeProperty cuts SSE connections at random points, on the
// client's side and on the server's (a proxy that closes after a random
// number of bytes), while random writes run; the follower reconnects with
// Last-Event-ID each time. The rows it ends with, timestamp by timestamp,
// must equal those of a stream that was never cut: no gap, no duplicate.
// On both paths; the streams are compressed (gzip, which Go's client asks
// for), but for one cut on the server's side that is not.
func TestResumeProperty(t *testing.T) {
	for _, path := range []struct {
		name string
		fast bool
	}{{"Fast", true}, {"Dataflow", false}} {
		t.Run(path.name, func(t *testing.T) {
			fast := path.fast
			srv := start(t, testserver.Options{FastPath: &fast, Tick: 20 * time.Millisecond})
			for seed := uint64(1); seed <= 3; seed++ {
				t.Run(fmt.Sprintf("Seed%d", seed), func(t *testing.T) { checkResume(t, srv, seed) })
			}
		})
	}
}

func checkResume(t *testing.T, srv *testserver.Server, seed uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, 0xfeed))
	var mu sync.Mutex
	limit := func() int64 { mu.Lock(); defer mu.Unlock(); return 1 + rng.Int64N(600) }
	table := fmt.Sprintf("r%d", seed)
	c := connect(t, srv)
	execAll(t, c, fmt.Sprintf("CREATE TABLE %s (k int NOT NULL, v text)", table),
		// The contract holds while F - 1 >= since.
		fmt.Sprintf("ALTER TABLE %s SET (RETAIN HISTORY FOR '1 minute')", table),
		fmt.Sprintf("INSERT INTO %s VALUES (1, 'a'), (2, 'b'), (2, 'b')", table))
	start := snapshotFrontier(t, ctx, "http://"+srv.FeedAddr+"/v1/subscribe/"+table)
	query := fmt.Sprintf("/v1/subscribe/%s?as_of=%d", table, start-1)

	// Random writes, while the followers read.
	done := make(chan struct{})
	go func() {
		defer close(done)
		wrng := rand.New(rand.NewPCG(seed, 0x317e))
		for i := 0; i < 40; i++ {
			k := wrng.IntN(6)
			var st string
			switch wrng.IntN(3) {
			case 0:
				st = fmt.Sprintf("DELETE FROM %s WHERE k = %d", table, k)
			default:
				st = fmt.Sprintf("INSERT INTO %s VALUES (%d, '%c')", table, k, 'a'+wrng.IntN(26))
			}
			if _, err := c.Exec(ctx, st); err != nil {
				t.Errorf("%s: %v", st, err)
				return
			}
			time.Sleep(time.Duration(wrng.IntN(15)) * time.Millisecond)
		}
	}()
	ref := &follower{t: t, url: "http://" + srv.FeedAddr + query, rows: stamped{}}
	client := &follower{t: t, url: "http://" + srv.FeedAddr + query, rows: stamped{}, cut: limit}
	px := newProxy(t, srv.FeedAddr, limit)
	server := &follower{t: t, url: "http://" + px.Addr() + query, rows: stamped{}}
	identity := &follower{t: t, url: "http://" + px.Addr() + query, rows: stamped{}, identity: true}
	<-done
	end := snapshotFrontier(t, ctx, "http://"+srv.FeedAddr+"/v1/subscribe/"+table)
	for _, f := range []*follower{ref, client, server, identity} {
		f.follow(ctx, end)
	}
	want := ref.rows.below(end)
	if ref.reconns != 0 {
		t.Fatalf("the reference stream broke %d times", ref.reconns)
	}
	if client.reconns == 0 || server.reconns == 0 || identity.reconns == 0 {
		t.Errorf("cut %d times on the client's side and %d and %d (identity) on the server's, want each at least once", client.reconns, server.reconns, identity.reconns)
	}
	for name, f := range map[string]*follower{"client-cut": client, "server-cut": server, "server-cut-identity": identity} {
		if got := f.rows.below(end); got != want {
			t.Errorf("%s stream (%d reconnects) ended with\n%s\nwant\n%s", name, f.reconns, got, want)
		}
	}
}

// snapshotFrontier returns the frontier of a ?live=false snapshot of url.
func snapshotFrontier(t *testing.T, ctx context.Context, url string) uint64 {
	t.Helper()
	resp := get(t, ctx, url+"?live=false")
	io.Copy(io.Discard, resp.Body)
	f, err := strconv.ParseUint(resp.Header.Get("Shardtail-Frontier"), 10, 64)
	if resp.StatusCode != 200 || err != nil {
		t.Fatalf("live=false: status %d, frontier %q", resp.StatusCode, resp.Header.Get("Shardtail-Frontier"))
	}
	return f
}
