package feed_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/feed"
	"github.com/shardtail/shardtail/internal/testsupport/testcert"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/pgwire"
)

// status sends a GET with Basic credentials (user "" for none) and
// returns the status and the error body's SQLSTATE.
func status(t *testing.T, ctx context.Context, client *http.Client, url, user, password string, headers ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Code string }
	if resp.Header.Get("Content-Type") == "application/json" {
		json.NewDecoder(resp.Body).Decode(&body)
	}
	return resp.StatusCode, body.Code, resp.Header
}

// TestAuth: HTTP Basic is checked against the roles' SCRAM verifiers,
// privileges are SUBSCRIBE's, and errors name the SQLSTATE: 401 for a
// wrong or missing password, 403 without SELECT.
func TestAuth(t *testing.T) {
	for _, require := range []bool{false, true} {
		name := "DefaultTrusted"
		if require {
			name = "RequirePassword"
		}
		t.Run(name, func(t *testing.T) {
			// Set up as the default role on a trusting server (the only
			// way to give the first roles passwords), then serve the same
			// storage with the setting under test.
			blob, cons := blobmem.New(), consmem.New()
			boot := testserver.Start(t, testserver.Options{Blob: blob, Consensus: cons})
			execAll(t, connect(t, boot), "CREATE TABLE t (a int)", "CREATE ROLE alice LOGIN PASSWORD 'secret'",
				"CREATE ROLE bob LOGIN PASSWORD 'pw'", "GRANT SELECT ON t TO alice", "CREATE TABLE u (a int)")
			boot.Stop()
			srv := start(t, testserver.Options{Blob: blob, Consensus: cons, Adapter: func(c *adapter.Config) { c.RequirePassword = require }})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			url := "http://" + srv.FeedAddr + "/v1/subscribe/t?live=false"
			wantNoCreds := 200
			if require {
				wantNoCreds = 401 // the default role has no password
			}
			for _, tc := range []struct {
				name, user, password string
				status               int
				code                 string
			}{
				{"NoCredentials", "", "", wantNoCreds, map[bool]string{false: "", true: "28P01"}[require]},
				{"RightPassword", "alice", "secret", 200, ""},
				{"WrongPassword", "alice", "nope", 401, "28P01"},
				{"UnknownRole", "mallory", "secret", 401, "28P01"},
				{"NoPrivilege", "bob", "pw", 403, "42501"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					got, code, h := status(t, ctx, http.DefaultClient, url, tc.user, tc.password)
					if got != tc.status || code != tc.code {
						t.Errorf("status %d code %q, want %d %q", got, code, tc.status, tc.code)
					}
					if got == 401 && h.Get("WWW-Authenticate") == "" {
						t.Errorf("401 without WWW-Authenticate")
					}
				})
			}
			t.Run("Index", func(t *testing.T) {
				// GET / lists what the role may read: t for alice, not u.
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+srv.FeedAddr+"/", nil)
				req.SetBasicAuth("alice", "secret")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if !strings.Contains(string(b), `href="/ui/t"`) || strings.Contains(string(b), `/ui/u"`) {
					t.Errorf("index for alice:\n%s\nwant t and not u", b)
				}
			})
		})
	}
}

// TestLimitsAndCORS: past MaxConnections a request gets 503 (53300); only
// the configured origins get CORS headers, preflights included.
func TestLimitsAndCORS(t *testing.T) {
	srv := start(t, testserver.Options{Feed: feed.Config{MaxConnections: 1, CORSOrigins: []string{"http://page.test"}}})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := "http://" + srv.FeedAddr + "/v1/subscribe/t"
	first := get(t, ctx, url)
	if first.StatusCode != 200 {
		t.Fatalf("first stream: %d", first.StatusCode)
	}
	if got, code, _ := status(t, ctx, http.DefaultClient, url, "", ""); got != 503 || code != "53300" {
		t.Errorf("second stream: %d %q, want 503 53300", got, code)
	}
	first.Body.Close()

	_, _, h := status(t, ctx, http.DefaultClient, url+"?live=false", "", "", "Origin", "http://page.test")
	if h.Get("Access-Control-Allow-Origin") != "http://page.test" {
		t.Errorf("allowed origin: headers %v", h)
	}
	if h.Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("listed origin without credentials: headers %v", h)
	}
	_, _, h = status(t, ctx, http.DefaultClient, url+"?live=false", "", "", "Origin", "http://evil.test")
	if h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin got Access-Control-Allow-Origin %q", h.Get("Access-Control-Allow-Origin"))
	}
	req, _ := http.NewRequestWithContext(ctx, "OPTIONS", url, nil)
	req.Header.Set("Origin", "http://page.test")
	req.Header.Set("Access-Control-Request-Method", "GET")
	req.Header.Set("Access-Control-Request-Headers", "last-event-id")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Headers") == "" {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestCORSVary: with origins listed, every response says it varies with
// Origin (Vary: Origin), the allowed origin's and the others' alike,
// errors and preflights included, so that a shared cache does not give
// one origin's answer to another; with "*" alone every response is the
// same, Origin or not, and needs none.
func TestCORSVary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hasVaryOrigin := func(h http.Header) bool {
		for _, v := range h.Values("Vary") {
			for _, f := range strings.Split(v, ",") {
				if strings.EqualFold(strings.TrimSpace(f), "Origin") {
					return true
				}
			}
		}
		return false
	}
	for _, tc := range []struct {
		name    string
		origins []string
		vary    bool
	}{
		{"Listed", []string{"http://page.test"}, true},
		{"ListedAndAny", []string{"http://page.test", "*"}, true},
		{"AnyAlone", []string{"*"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := start(t, testserver.Options{Feed: feed.Config{CORSOrigins: tc.origins}})
			c := connect(t, srv)
			execAll(t, c, "CREATE TABLE t (a int)")
			base := "http://" + srv.FeedAddr
			var allowOrigins []string
			for _, path := range []string{"/v1/subscribe/t?live=false", "/v1/subscribe/nope?live=false", "/"} {
				for _, origin := range []string{"http://page.test", "http://evil.test", ""} {
					var hs []string
					if origin != "" {
						hs = []string{"Origin", origin}
					}
					_, _, h := status(t, ctx, http.DefaultClient, base+path, "", "", hs...)
					if got := hasVaryOrigin(h); got != tc.vary {
						t.Errorf("%s from %q: Vary %q, want Origin in it: %v", path, origin, h.Values("Vary"), tc.vary)
					}
					allowOrigins = append(allowOrigins, h.Get("Access-Control-Allow-Origin"))
				}
			}
			if !tc.vary {
				// What does not vary is the same for every origin.
				for _, got := range allowOrigins {
					if got != "*" {
						t.Errorf("Access-Control-Allow-Origin %q, want * on every response", got)
					}
				}
			}
			for _, origin := range []string{"http://page.test", "http://evil.test"} {
				req, _ := http.NewRequestWithContext(ctx, "OPTIONS", base+"/v1/subscribe/t", nil)
				req.Header.Set("Origin", origin)
				req.Header.Set("Access-Control-Request-Method", "GET")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if got := hasVaryOrigin(resp.Header); got != tc.vary {
					t.Errorf("preflight from %q: Vary %q, want Origin in it: %v", origin, resp.Header.Values("Vary"), tc.vary)
				}
			}
		})
	}
}

// TestHTTP2OverTLS: with a TLS certificate the feed speaks HTTP/2, and
// several streams share one connection.
func TestHTTP2OverTLS(t *testing.T) {
	cfg, pool := testcert.SelfSigned(t)
	srv := start(t, testserver.Options{PGWire: pgwire.Config{TLSConfig: cfg}})
	c := connect(t, srv)
	execAll(t, c, "CREATE TABLE t (a int)", "INSERT INTO t VALUES (7)")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conns := 0
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conns++
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	defer client.CloseIdleConnections()
	var bodies []io.Closer
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+srv.FeedAddr+"/v1/subscribe/t", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, resp.Body)
		if resp.ProtoMajor != 2 {
			t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
		}
		m := model{}
		waitFor(t, newSSEReader(resp.Body), m, func(ev event) bool { return ev.Name == "progress" })
		wantModel(t, m, `{"a":7} x1`)
	}
	if conns != 1 {
		t.Errorf("%d connections for 3 open streams, want 1", conns)
	}
	for _, b := range bodies {
		b.Close()
	}
}

// TestAuthThrottleShared: failed HTTP Basic logins are throttled by
// address with the same throttle as pgwire's: after pgwire's free
// failures, a burst of wrong feed passwords from the same address waits,
// and the part of it that would wait too long gets 429 (28000) at once.
// With a throttle of the feed's own, the burst's first five would be free
// and none would get 429.
func TestAuthThrottleShared(t *testing.T) {
	blob, cons := blobmem.New(), consmem.New()
	boot := testserver.Start(t, testserver.Options{Blob: blob, Consensus: cons})
	execAll(t, connect(t, boot), "CREATE TABLE t (a int)", "CREATE ROLE alice LOGIN PASSWORD 'secret'", "GRANT SELECT ON t TO alice")
	boot.Stop()
	srv := start(t, testserver.Options{Blob: blob, Consensus: cons, Adapter: func(c *adapter.Config) { c.RequirePassword = true }})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range pgwire.DefaultAuthThrottleFree {
		c, err := pgconn.Connect(ctx, "postgres://alice:wrong@"+srv.Addr+"/materialize?sslmode=disable")
		if err == nil {
			c.Close(ctx)
			t.Fatal("pgwire login with a wrong password succeeded")
		}
	}
	// Delays 100 ms, 200 ms, ... 5 s queue up: the seventh attempt would
	// wait past the feed's 10 s and is refused at once.
	burst, cut := context.WithCancel(ctx)
	defer cut()
	url := "http://" + srv.FeedAddr + "/v1/subscribe/t?live=false"
	type answer struct {
		status int
		code   string
	}
	answers := make(chan answer, 8)
	for range 8 {
		go func() {
			req, _ := http.NewRequestWithContext(burst, "GET", url, nil)
			req.SetBasicAuth("alice", "wrong")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{} // cancelled while waiting
				return
			}
			defer resp.Body.Close()
			var body struct{ Code string }
			json.NewDecoder(resp.Body).Decode(&body)
			answers <- answer{resp.StatusCode, body.Code}
		}()
	}
	var got []answer
	for range 8 {
		a := <-answers
		got = append(got, a)
		if a.status == http.StatusTooManyRequests {
			cut() // the rest need not wait out their delays
		}
	}
	if !slices.Contains(got, answer{http.StatusTooManyRequests, "28000"}) {
		t.Errorf("answers %v, want a 429 with 28000 among them", got)
	}
	for _, a := range got {
		if a.status == http.StatusOK {
			t.Errorf("answers %v: a wrong password was accepted", got)
		}
	}
}

// TestDNSRebinding: a page's request to its own host that no password
// authenticates (the embedded default's trusted superuser) must name the
// server by IP address or localhost: a page whose DNS name points at
// 127.0.0.1 names its own host and is refused (403, 42501); with a
// password, from a program (no Sec-Fetch-Site or Origin), or from a page of
// another origin (the CORS rules'), any name will do.
func TestDNSRebinding(t *testing.T) {
	srv := start(t, testserver.Options{})
	execAll(t, connect(t, srv), "CREATE TABLE t (a int)", "CREATE ROLE pw LOGIN PASSWORD 'secret'", "GRANT SELECT ON t TO pw")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, port, _ := net.SplitHostPort(srv.FeedAddr)
	for _, tc := range []struct {
		host, user, browser string
		status              int
	}{
		{"127.0.0.1:" + port, "", "Sec-Fetch-Site", 200},
		{"localhost:" + port, "", "Sec-Fetch-Site", 200},
		{"app.localhost:" + port, "", "Origin", 200},
		{"[::1]:" + port, "", "Sec-Fetch-Site", 200},
		{"attacker.example:" + port, "", "Sec-Fetch-Site", 403},
		{"attacker.example", "", "Origin", 403},
		{"attacker.example:" + port, "pw", "Sec-Fetch-Site", 200},
		{"attacker.example:" + port, "", "", 200},
		{"feed.example:" + port, "", "Other-Origin", 200},
	} {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+srv.FeedAddr+"/v1/subscribe/t?live=false", nil)
		req.Host = tc.host
		switch tc.browser {
		case "Sec-Fetch-Site":
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		case "Origin":
			req.Header.Set("Origin", "http://"+tc.host)
		case "Other-Origin":
			req.Header.Set("Origin", "http://page.example")
			req.Header.Set("Sec-Fetch-Site", "cross-site")
		}
		if tc.user != "" {
			req.SetBasicAuth(tc.user, "secret")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || (tc.status == 403 && body.Code != "42501") {
			t.Errorf("Host %s, user %q: status %d code %q, want %d", tc.host, tc.user, resp.StatusCode, body.Code, tc.status)
		}
	}
}
