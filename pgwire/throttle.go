package pgwire

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Defaults for AuthThrottle fields left zero.
const (
	DefaultAuthThrottleFree     = 5
	DefaultAuthThrottleDelay    = 100 * time.Millisecond
	DefaultAuthThrottleMaxDelay = 5 * time.Second
	DefaultAuthThrottleForget   = time.Minute
)

// AuthThrottle slows password guessing from one address (the client's IP).
// Once an address has failed Free password logins, each further attempt
// from it waits before its exchange starts: Delay after Free failures,
// doubling with each further failure up to MaxDelay. The attempts of one
// address are also spaced by those delays, so that parallel connections do
// not multiply the guessing rate, and attempts still running count as
// failures until they end: a burst of parallel guesses is throttled from
// its first attempt past Free. The whole attempt waits, not only a failure's
// answer: a client that saw failures arrive late but successes at once
// would just stop waiting. An address is forgotten once it has had no
// attempt for Forget; a success does not reset it, or one valid account
// would buy an attacker Free more guesses at a time. Throttling one address
// delays no other, and trust logins are never throttled. The first delayed
// attempt of a burst is logged.
type AuthThrottle struct {
	// Free is the failed logins an address may make undelayed.
	// 0 means DefaultAuthThrottleFree.
	Free int
	// Delay is the wait of the first delayed attempt. 0 means
	// DefaultAuthThrottleDelay.
	Delay time.Duration
	// MaxDelay caps the wait of one attempt. 0 means
	// DefaultAuthThrottleMaxDelay.
	MaxDelay time.Duration
	// Forget is the quiet time after which an address starts afresh. 0
	// means DefaultAuthThrottleForget.
	Forget time.Duration
	// Off disables throttling.
	Off bool
}

// withDefaults returns a with zero fields set to their defaults.
func (a AuthThrottle) withDefaults() AuthThrottle {
	if a.Free == 0 {
		a.Free = DefaultAuthThrottleFree
	}
	if a.Delay == 0 {
		a.Delay = DefaultAuthThrottleDelay
	}
	if a.MaxDelay == 0 {
		a.MaxDelay = DefaultAuthThrottleMaxDelay
	}
	if a.Forget == 0 {
		a.Forget = DefaultAuthThrottleForget
	}
	return a
}

// Throttle is the state of AuthThrottle: one entry per address that made a
// password attempt within Forget. One Throttle may serve several
// transports (Config.Throttle; the HTTP feed's Basic logins), so that an
// address guesses no faster over both than over one.
type Throttle struct {
	cfg AuthThrottle
	log *slog.Logger

	mu      sync.Mutex
	addrs   map[string]*addrThrottle // mu
	sweepAt int                      // mu: size of addrs that triggers a sweep of forgotten entries
}

// addrThrottle is the state of one address.
type addrThrottle struct {
	failures int       // failed attempts in this burst
	running  int       // attempts begun and not ended
	last     time.Time // the last attempt's beginning or end
	next     time.Time // the earliest end of the next delayed attempt's wait
	logged   bool      // this burst was logged
}

// minSweep is the size of the address table below which it is not swept.
const minSweep = 1024

// NewThrottle returns the throttle of cfg (zero fields: their defaults),
// logging the first delayed attempt of each burst to log.
func NewThrottle(cfg AuthThrottle, log *slog.Logger) *Throttle {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Throttle{cfg: cfg.withDefaults(), log: log, addrs: make(map[string]*addrThrottle), sweepAt: minSweep}
}

// throttleKey is the address an attempt is throttled under: the IP of a TCP
// client, whatever its port.
func throttleKey(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	return addr.String()
}

// ThrottleKey is the address an attempt from remote (HOST:PORT, as
// http.Request.RemoteAddr) is throttled under: its host, whatever its
// port, as for a pgwire client.
func ThrottleKey(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		if ip := net.ParseIP(host); ip != nil {
			return ip.String()
		}
		return host
	}
	return remote
}

// Attempt waits as the throttle says before a password attempt from addr
// (a ThrottleKey) and returns end, which records the attempt's outcome:
// failed when the password was checked and wrong. It returns
// ErrAuthThrottled, and no end, when the wait would end after deadline,
// and ctx's cause when ctx ends while waiting (end was called).
func (t *Throttle) Attempt(ctx context.Context, addr string, deadline time.Time) (end func(failed bool), err error) {
	wait, allowed := t.begin(addr, time.Now(), deadline)
	if !allowed {
		return nil, ErrAuthThrottled
	}
	end = func(failed bool) { t.end(addr, failed, time.Now()) }
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			end(false)
			return nil, context.Cause(ctx)
		}
	}
	return end, nil
}

// begin registers an attempt from addr at now and returns how long it must
// wait before its exchange. ok false means the wait would end after
// deadline: the attempt is not made (and not registered). Every begin with
// ok true needs an end.
func (t *Throttle) begin(addr string, now, deadline time.Time) (wait time.Duration, ok bool) {
	if t.cfg.Off {
		return 0, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.addrs[addr]
	if st == nil || (st.running == 0 && now.Sub(st.last) >= t.cfg.Forget) {
		t.sweep(now)
		st = &addrThrottle{}
		t.addrs[addr] = st
	}
	// Running attempts count as failures: most attempts of a guesser fail.
	n := st.failures + st.running - t.cfg.Free
	if n >= 0 {
		d := t.cfg.MaxDelay
		if n < 32 {
			d = min(t.cfg.Delay<<n, t.cfg.MaxDelay)
		}
		at := now
		if st.next.After(at) {
			at = st.next
		}
		at = at.Add(d)
		if at.After(deadline) {
			return 0, false
		}
		st.next, wait = at, at.Sub(now)
		if !st.logged {
			st.logged = true
			t.log.Warn("pgwire: throttling authentication attempts from an address after failed logins",
				"addr", addr, "failures", st.failures, "delay", wait)
		}
	}
	st.running++
	st.last = now
	return wait, true
}

// end records the end of an attempt begun at addr: failed means the
// exchange completed and the password was wrong (an exchange cut short
// revealed nothing and does not count).
func (t *Throttle) end(addr string, failed bool, now time.Time) {
	if t.cfg.Off {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.addrs[addr]
	st.running--
	if failed {
		st.failures++
	}
	st.last = now
}

// sweep drops the forgotten addresses once the table has grown to sweepAt,
// so that it stays proportional to the addresses seen within Forget. t.mu
// must be held.
func (t *Throttle) sweep(now time.Time) {
	if len(t.addrs) < t.sweepAt {
		return
	}
	for addr, st := range t.addrs {
		if st.running == 0 && now.Sub(st.last) >= t.cfg.Forget {
			delete(t.addrs, addr)
		}
	}
	t.sweepAt = max(minSweep, 2*len(t.addrs))
}
