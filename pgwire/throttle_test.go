package pgwire

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestThrottleDelays drives the throttle with made-up times: delays start
// after Free failures, double, cap, space parallel attempts, leave other
// addresses alone, are forgotten after a quiet Forget, and are logged once
// per burst.
func TestThrottleDelays(t *testing.T) {
	var logBuf lockedBuffer
	th := NewThrottle(AuthThrottle{Free: 3, Delay: 100 * time.Millisecond, MaxDelay: time.Second, Forget: time.Minute},
		slog.New(slog.NewTextHandler(&logBuf, nil)))
	now := time.Unix(1000, 0)
	far := now.Add(time.Hour)
	attempt := func(addr string, failed bool) time.Duration {
		t.Helper()
		wait, ok := th.begin(addr, now, far)
		if !ok {
			t.Fatalf("begin at %v refused", now)
		}
		now = now.Add(wait)
		th.end(addr, failed, now)
		return wait
	}

	var got []time.Duration
	for range 9 {
		got = append(got, attempt("a", true))
	}
	want := []time.Duration{0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sequential failures wait %v, want %v", got, want)
	}
	if w := attempt("a", false); w != time.Second {
		t.Errorf("a correct login from a throttled address waits %v, want %v", w, time.Second)
	}
	if w := attempt("b", true); w != 0 {
		t.Errorf("another address waits %v, want 0", w)
	}

	// Parallel attempts are spaced: each waits for the one before it.
	now = now.Add(time.Minute) // forgotten
	for range 3 {
		attempt("c", true)
	}
	var waits []time.Duration
	for range 3 {
		w, ok := th.begin("c", now, far)
		if !ok {
			t.Fatal("parallel begin refused")
		}
		waits = append(waits, w)
	}
	if want := []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 700 * time.Millisecond}; fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Errorf("parallel attempts wait %v, want %v", waits, want)
	}
	// One whose wait would outlast its deadline is refused and not counted.
	if _, ok := th.begin("c", now, now.Add(time.Second)); ok {
		t.Error("an attempt that cannot finish by its deadline was let in")
	}
	for range 3 {
		th.end("c", false, now)
	}
	if st := th.addrs["c"]; st.running != 0 || st.failures != 3 {
		t.Errorf("address c: %d running, %d failures; want 0, 3", st.running, st.failures)
	}

	// A quiet Forget later, the address starts afresh, and a new burst is
	// logged again.
	now = now.Add(2 * time.Minute)
	for range 4 {
		attempt("a", true)
	}
	if n := strings.Count(logBuf.String(), "throttling authentication"); n != 3 {
		t.Errorf("logged %d throttling lines, want 3 (a, c, a again):\n%s", n, logBuf.String())
	}
}

// TestAuthThrottle fails SCRAM logins from 127.0.0.1 until it is throttled,
// on a server with --require-password's shape (every role needs a
// password). The next attempt from 127.0.0.1 waits, even with the right
// password, while logins from 127.0.0.2 go on undelayed, right and wrong
// (up to its own Free failures);
// one line is logged for the burst. A server whose delay outlasts
// AuthTimeout refuses at once with 28000.
func TestAuthThrottle(t *testing.T) {
	var logBuf lockedBuffer
	// Two attempts wait at once, spaced one Delay apart: the second's ends
	// 2 h after the first began, which must be within its AuthTimeout
	// whichever of the two connected first.
	ts := startServer(t, authBackend(), Config{
		AuthTimeout:  3 * time.Hour,
		AuthThrottle: AuthThrottle{Free: 3, Delay: time.Hour, MaxDelay: time.Hour},
		Logger:       slog.New(slog.NewTextHandler(&logBuf, nil)),
	})
	failed := func(user string) string { return `FATAL 28P01 password authentication failed for user "` + user + `"` }
	for _, user := range []string{"bob:wrong", "nobody:secret", "bob:wrong"} {
		_, err := connectFrom(t, ts, "127.0.0.1", user)
		checkPgError(t, err, "FATAL", "28P01", strings.TrimPrefix(failed(strings.Split(user, ":")[0]), "FATAL 28P01 "))
	}

	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	throttled := make(chan error, 2)
	for _, user := range []string{"bob:secret", "nobody:secret"} {
		go func() {
			c, err := connectFromCtx(ctx, ts, "127.0.0.1", user)
			if err == nil {
				c.Close(context.Background())
			}
			throttled <- err
		}()
	}
	waitFor(t, "the throttled attempts to wait", func() bool {
		ts.throttle.mu.Lock()
		defer ts.throttle.mu.Unlock()
		st := ts.throttle.addrs["127.0.0.1"]
		return st != nil && st.running == 2
	})

	c, err := connectFrom(t, ts, "127.0.0.2", "bob:secret")
	if err != nil {
		t.Fatalf("a correct login from another address: %v", err)
	}
	c.Close(testContext(t))
	for range 3 { // its own Free failures
		_, err := connectFrom(t, ts, "127.0.0.2", "bob:wrong")
		checkPgError(t, err, "FATAL", "28P01", `password authentication failed for user "bob"`)
	}
	select {
	case err := <-throttled:
		t.Fatalf("a throttled attempt ended before its delay: %v", err)
	default:
	}
	cancel()
	<-throttled
	<-throttled
	if n := strings.Count(logBuf.String(), "throttling authentication"); n != 1 {
		t.Errorf("logged %d throttling lines, want 1:\n%s", n, logBuf.String())
	}

	t.Run("PastAuthTimeout", func(t *testing.T) {
		ts := startServer(t, authBackend(), Config{AuthThrottle: AuthThrottle{Free: 1, Delay: time.Hour, MaxDelay: time.Hour}})
		_, err := connectFrom(t, ts, "127.0.0.1", "bob:wrong")
		checkPgError(t, err, "FATAL", "28P01", `password authentication failed for user "bob"`)
		_, err = connectFrom(t, ts, "127.0.0.1", "bob:secret")
		checkPgError(t, err, "FATAL", "28000", ErrAuthThrottled.Error())
	})
}

// connectFrom connects as user ("user:password") from the local address ip.
func connectFrom(t *testing.T, ts *testServer, ip, user string) (*pgx.Conn, error) {
	t.Helper()
	c, err := connectFromCtx(testContext(t), ts, ip, user)
	if err == nil {
		t.Cleanup(func() { c.Close(context.Background()) })
	}
	return c, err
}

func connectFromCtx(ctx context.Context, ts *testServer, ip, user string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(ts.url(user, ""))
	if err != nil {
		return nil, err
	}
	cfg.DialFunc = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext
	cfg.ConnectTimeout = 0 // ctx bounds the attempt: a throttled one waits until canceled
	return pgx.ConnectConfig(ctx, cfg)
}

// lockedBuffer is a bytes.Buffer safe for concurrent use (a log sink).
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
