package pgwire

import "time"

// Connection admission (Config.MaxConnections). A connection past the limit
// is not left in the kernel's accept queue, where its client would hang:
// it is accepted, read up to its startup message and refused with FATAL
// 53300, as Postgres does. Refusing still costs a descriptor for up to
// refuseTimeout, so the refusals in progress are bounded as well; past that
// bound a connection is closed without a word. Either way the descriptors
// the server uses for clients stay below MaxConnections + maxRefusing, and
// the rest of the process (storage files, upstream sockets) keeps its share.
const (
	// maxRefusing bounds the connections being refused at once.
	maxRefusing = 64

	// refuseTimeout bounds how long a refused connection may take to send
	// its startup message (and finish a TLS handshake).
	refuseTimeout = time.Second

	// refusalLogInterval is the least time between two log lines about
	// refused connections: a flood of clients must not flood the log.
	refusalLogInterval = 10 * time.Second
)

// admission is what startConn does with a new connection.
type admission int

const (
	admitServe  admission = iota // under the limit: serve it
	admitRefuse                  // over the limit: FATAL 53300 after the startup message
	admitDrop                    // over the limit and refusing too many already: close it
)

// admit decides the fate of a new connection and logs refusals, at most
// once per refusalLogInterval. s.mu must be held.
func (s *Server) admit() admission {
	max := s.cfg.MaxConnections
	if max == 0 || s.admitted < max {
		return admitServe
	}
	verdict := admitRefuse
	if s.refusing >= maxRefusing {
		verdict = admitDrop
	}
	if n, ok := s.refusals.add(time.Now()); ok {
		s.log.Warn("pgwire: too many connections; refusing new ones",
			"max_connections", max, "refused_since_last_log", n)
	}
	return verdict
}

// refusalLog counts refused connections between two log lines.
type refusalLog struct {
	last  time.Time // when the last line was logged
	count int       // refusals since then
}

// add counts a refusal at now. It reports whether to log now, and the
// refusals to report (this one included).
func (l *refusalLog) add(now time.Time) (int, bool) {
	l.count++
	if !l.last.IsZero() && now.Sub(l.last) < refusalLogInterval {
		return 0, false
	}
	n := l.count
	l.last, l.count = now, 0
	return n, true
}
