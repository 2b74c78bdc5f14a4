package feed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/membudget"
	"github.com/shardtail/shardtail/pgwire"
)

// FrontierHeader carries the frontier of a ?live=false snapshot: every
// update below it is in the document; stream ?after=<it> for the rest.
const FrontierHeader = "Shardtail-Frontier"

// defaultRole is who a request without credentials is: the server's
// default superuser, which logs in without a password unless the server
// requires passwords (as over pgwire).
const defaultRole = "materialize"

// Handler serves the feed's endpoints (see the package doc). Close ends
// every stream and waits for their handlers.
type Handler struct {
	coord   *adapter.Coordinator
	cfg     Config
	mux     *http.ServeMux
	mem     *membudget.Holder
	metrics *metrics

	active atomic.Int64
	// ctx ends every stream when Close cancels it; wg counts the handlers
	// of running requests, entered under mu while not closed (a WaitGroup
	// must not grow from zero while Close waits on it).
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool // mu
	wg     sync.WaitGroup
	// closeBy is when the streams' last writes end once Close began
	// (UnixNano; 0 before): set before ctx ends.
	closeBy atomic.Int64
}

// closeGrace is how long a stream may still write once the handler
// closes, to end its body cleanly (a gzip member's trailer) for a client
// that reads: as pgwire's closeGrace for a connection's last error.
const closeGrace = time.Second

// NewHandler returns the feed of coord's collections.
func NewHandler(coord *adapter.Coordinator, cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	h := &Handler{coord: coord, cfg: cfg.withDefaults(), mux: http.NewServeMux(), metrics: m,
		mem: cfg.Budget.Holder(membudget.HolderFeed)}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.mux.HandleFunc("GET /v1/subscribe/{collection}", h.serveSubscribe)
	h.mux.HandleFunc("GET /v1/subscribe", h.serveSubscribe)
	h.mux.HandleFunc("GET /{$}", h.serveIndex)
	h.mux.HandleFunc("GET /ui/{collection}", h.serveUI)
	h.mux.HandleFunc("GET /ui/feed.js", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, uiFiles, "ui/feed.js")
	})
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.enter() {
		writeError(w, &errorBody{status: http.StatusServiceUnavailable, Code: "57P01", Msg: "terminating connection due to administrator command"})
		return
	}
	defer h.wg.Done()
	if !h.cors(w, r) {
		return
	}
	h.mux.ServeHTTP(w, r)
}

// Close ends every stream and waits for their handlers to return. A
// stream ends its body cleanly (a gzip member with its trailer), with
// closeGrace for its last write. The coordinator must be closed after it,
// so that no subscription outlives its coordinator.
func (h *Handler) Close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		h.closeBy.Store(time.Now().Add(closeGrace).UnixNano())
	}
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}

// writeDeadline is the deadline of a stream's write starting now:
// Config.WriteTimeout, or the handler's closing deadline once it closes.
func (h *Handler) writeDeadline() time.Time {
	d := time.Now().Add(h.cfg.WriteTimeout)
	if by := h.closeBy.Load(); by != 0 && by < d.UnixNano() {
		d = time.Unix(0, by)
	}
	return d
}

// closing reports whether Close began.
func (h *Handler) closing() bool { return h.closeBy.Load() != 0 }

// enter counts a request in, unless the handler is closed.
func (h *Handler) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.wg.Add(1)
	return true
}

// cors applies Config.CORSOrigins. It answers a preflight itself and
// returns false then.
//
// With origins listed, every response varies with the request's Origin
// (a listed one gets headers that another, or none, does not), and says
// so (Vary: Origin), whether that origin is allowed or not: else a shared
// cache could give one origin the answer meant for another. "*" alone
// answers every request alike, Origin or not, and needs no Vary.
func (h *Handler) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	wildcard := slices.Contains(h.cfg.CORSOrigins, "*")
	listed := origin != "" && origin != "*" && slices.Contains(h.cfg.CORSOrigins, origin)
	allowed := listed || wildcard
	if slices.ContainsFunc(h.cfg.CORSOrigins, func(o string) bool { return o != "*" }) {
		w.Header().Add("Vary", "Origin")
	}
	switch {
	case listed:
		// A listed origin's pages may send the browser's credentials.
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Set("Access-Control-Allow-Credentials", "true")
	case allowed:
		// "*": any page, but without the browser's credentials, so that
		// a page elsewhere cannot read what a logged-in user may.
		w.Header().Set("Access-Control-Allow-Origin", "*")
	}
	if allowed {
		w.Header().Set("Access-Control-Expose-Headers", FrontierHeader)
	}
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		if allowed {
			w.Header().Set("Access-Control-Allow-Methods", "GET")
			w.Header().Set("Access-Control-Allow-Headers", "Authorization, Last-Event-ID, Accept")
			w.Header().Set("Access-Control-Max-Age", "600")
		}
		w.WriteHeader(http.StatusNoContent)
		return false
	}
	return true
}

// authThrottleWait is the longest a password attempt waits for the
// throttle; one that would wait longer gets 429 at once.
const authThrottleWait = 10 * time.Second

// errPasswordFailed is the answer to a missing or wrong password, and to
// an unknown role.
func errPasswordFailed(user string) error {
	return pgwire.Errorf("28P01", "password authentication failed for user \"%s\"", user)
}

// authenticate returns the request's role: HTTP Basic, checked against
// the role's SCRAM verifier when it has a password (Role says so) and the
// feed does not trust, or the default role without credentials.
func (h *Handler) authenticate(r *http.Request) (string, error) {
	user, password, basic := r.BasicAuth()
	if !basic {
		user = defaultRole
	}
	role, err := h.coord.Role(r.Context(), user)
	unknown := errors.Is(err, pgwire.ErrUnknownRole)
	if err != nil && !unknown {
		return "", err
	}
	if h.cfg.Trust || (!unknown && !role.PasswordRequired) {
		if unknown {
			return "", pgwire.Errorf("28000", "role \"%s\" does not exist", user)
		}
		if !localHost(r.Host) && ownPage(r) {
			return "", pgwire.Errorf("42501", "a browser's request that no password authenticates must name the server by IP address or localhost, not %q", r.Host)
		}
		return user, nil
	}
	if !basic {
		return "", errPasswordFailed(user)
	}
	// Password attempts are throttled by address, as over pgwire (with
	// which the server shares the throttle).
	end, err := h.cfg.Throttle.Attempt(r.Context(), pgwire.ThrottleKey(r.RemoteAddr), time.Now().Add(authThrottleWait))
	if err != nil {
		return "", err
	}
	// The same answer for an unknown role and a wrong password: the
	// client learns nothing about which roles exist.
	ok := !unknown && pgwire.VerifyPassword(role.Verifier, password)
	end(!ok)
	if !ok {
		return "", errPasswordFailed(user)
	}
	return user, nil
}

// localHost reports whether a request's Host names the server as a client
// that reaches it directly does: by an IP address or localhost. A web page
// of another site whose DNS name its owner points at 127.0.0.1 (DNS
// rebinding) names its own host, and must not read the feed as a role that
// logs in without a password (the embedded default's superuser): such a
// request from a page of that host (ownPage) is refused. Give roles
// passwords to serve browsers the feed under a name.
func localHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || net.ParseIP(host) != nil
}

// ownPage reports whether a request comes from a web page of the host the
// request names: browsers say so in Sec-Fetch-Site (all current ones), or
// send an Origin of that host. Programs (curl) send neither; a page of
// another origin is the CORS rules' (--feed-cors-origins).
func ownPage(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return true
	}
	u, err := url.Parse(r.Header.Get("Origin"))
	return err == nil && u.Host != "" && u.Host == r.Host
}

// serveSubscribe serves GET /v1/subscribe/{collection}.
func (h *Handler) serveSubscribe(w http.ResponseWriter, r *http.Request) {
	req, err := parseRequest(r, r.PathValue("collection"))
	tr := transportSSE
	if req != nil {
		tr = req.transport
	}
	status := http.StatusOK
	defer func() { h.metrics.requests.WithLabelValues(tr.String(), strconv.Itoa(status)).Inc() }()
	failBody := func(e *errorBody) {
		if e.status == http.StatusInternalServerError {
			h.cfg.Log.Warn("feed: subscribe", "collection", r.PathValue("collection"), "err", err)
		}
		status = e.status
		writeError(w, e)
	}
	fail := func(err error) { failBody(toErrorBody(err)) }
	if err != nil {
		fail(err)
		return
	}
	if n := h.active.Add(1); n > int64(h.cfg.MaxConnections) {
		h.active.Add(-1)
		fail(fmt.Errorf("%w: %d at once", ErrTooManyConnections, h.cfg.MaxConnections))
		return
	}
	// What the request's end undoes, in reverse order: when the handler
	// returns, or when a live stream that took the connection over ends
	// (stream.live).
	var undo cleanups
	defer func() { undo.run() }()
	undo.add(func() { h.active.Add(-1) })
	user, err := h.authenticate(r)
	if err != nil {
		fail(err)
		return
	}
	if req.after != nil && req.upTo != nil && *req.after >= *req.upTo {
		// Resumed after completion (a browser reconnecting after the end
		// event): 204 tells an EventSource to stop.
		status = http.StatusNoContent
		w.WriteHeader(status)
		return
	}
	// The stream's context ends with the handler's Close, and with the
	// request's while the handler serves it (net/http ends that when the
	// client leaves); a stream that took the connection over watches it
	// itself.
	var f framing = sseFraming{retry: h.cfg.Retry}
	if tr == transportNDJSON {
		f = ndjsonFraming{}
	}
	s := &stream{h: h, w: w, rc: http.NewResponseController(w), f: f, pos: newPosition(req.after)}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	undo.add(cancel)
	stopClose := context.AfterFunc(h.ctx, func() {
		cancel()
		s.interrupt()
	})
	undo.add(func() { stopClose() })
	stopReq := context.AfterFunc(r.Context(), cancel)
	undo.add(func() { stopReq() })
	if h.cfg.Compression != CompressionNone {
		// The answer depends on the request's Accept-Encoding, whatever
		// it is: a cache must not give one client's to another.
		w.Header().Add("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			s.gz = &gzipStream{}
		}
	}
	if req.upTo != nil {
		s.upTo = *req.upTo
	}
	undo.add(func() { h.metrics.bytes.WithLabelValues(tr.String()).Add(float64(s.sent)) })
	if req.collections != nil {
		err = s.openSources(ctx, user, tr, req)
		undo.add(s.closeSources)
	} else {
		err = s.open(ctx, user, tr, req)
	}
	if err != nil {
		switch {
		case !adapter.HistoryLost(err):
		case req.after == nil:
			// The request's own as_of is below since: starting over
			// would ask for it again (an EventSource, or feed.js told to
			// reset, reconnecting in a loop), so it is the request's
			// error, with pgwire's SQLSTATE for an AS OF below since.
			e := toErrorBody(err)
			e.status = http.StatusBadRequest
			failBody(e)
			return
		default:
			// The resume point is gone: tell the client to start over,
			// in a response an EventSource accepts. (live=false takes
			// no resume point.)
			h.metrics.resets.Inc()
			startStream(w, r, f)
			// 53200, as a position lost while streaming is: over pgwire
			// an AS OF below since is Materialize's XX000, but here the
			// position is the client's resume point (SUBSCRIBE-SPEC.md,
			// "history lost").
			e := toErrorBody(err)
			e.Code = "53200"
			w.Write(f.reset(nil, e))
			return
		}
		fail(err)
		return
	}
	h.metrics.streams.WithLabelValues(tr.String()).Inc()
	undo.add(func() { h.metrics.streams.WithLabelValues(tr.String()).Dec() })
	if req.collections == nil {
		undo.add(s.sub.Close)
	}
	switch {
	case r.Method == http.MethodHead && tr != transportSnapshot:
		// GET's head alone: a HEAD has no body (net/http drops what is
		// written through w, but a live stream takes the connection
		// over), and a stream's never ends.
		startStream(w, r, f)
	case req.collections != nil && tr == transportSnapshot:
		err = s.runMerged(ctx, true)
	case req.collections != nil:
		s.live(w, r, ctx, cancel, stopReq, &undo, func(ctx context.Context) { s.runMerged(ctx, false) })
	case tr == transportSnapshot:
		err = s.snapshot(ctx)
	default:
		s.live(w, r, ctx, cancel, stopReq, &undo, s.run)
	}
	if err != nil {
		fail(err)
	}
}

// cleanups are functions to run in reverse order of their adding.
type cleanups []func()

func (c *cleanups) add(f func()) { *c = append(*c, f) }

func (c cleanups) run() {
	for i := len(c) - 1; i >= 0; i-- {
		c[i]()
	}
}

// live runs a live stream (run). Over HTTP/1.1 it takes the connection
// from net/http (Hijack) and streams on it from a goroutine of its own,
// counted in the handler's wg, while the handler returns: the request's
// net/http state (the connection's 4 KiB read and write buffers, the
// response's buffer, the request, the goroutine that watches the
// connection) is not held for the stream's life, and a batch is one
// writev of its pieces, shared rows included, where net/http's buffers
// made a large run three writes. The stream watches the connection for
// its client leaving itself (startWatch). The goroutine then runs what
// the request's end undoes (undo, which it empties); stopReq detaches ctx
// from the request's context, which ends with the handler. Elsewhere
// (HTTP/2, a ResponseWriter that cannot hijack) the stream runs in the
// handler through w.
func (s *stream) live(w http.ResponseWriter, r *http.Request, ctx context.Context, cancel context.CancelFunc, stopReq func() bool,
	undo *cleanups, run func(context.Context)) {
	streamHeaders(w, r, s.f)
	if s.gz != nil {
		w.Header().Set("Content-Encoding", CompressionGzip)
	}
	conn := s.hijack(w, r)
	if conn == nil {
		w.WriteHeader(http.StatusOK)
		run(ctx)
		return
	}
	stopReq()
	s.cancel = cancel
	done := *undo
	*undo = nil
	s.h.wg.Add(1) // the handler's own count is still held: wg is not at zero
	go func() {
		defer s.h.wg.Done()
		defer done.run()
		run(ctx)
		s.closeConn()
	}()
}

// startWatch starts, once, the goroutine that watches a connection the
// stream took over for its client leaving, which ends the stream's
// context: the client sends nothing after its request, so a read that
// ends means it left (or closeConn closed the connection). A stream
// starts it before it first waits for its subscription (run: WouldWait),
// or when a Next takes longer than watchDelay (a read from storage: next,
// from the timer's goroutine), and not at all when neither happens, as a
// resume or snapshot ready at once that ends at UP TO: meanwhile a client
// that left shows in the next write, which fails. A no-op through w
// (net/http watches the connection then), and once closeConn began.
func (s *stream) startWatch() {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.conn == nil || s.watching || s.unwatched {
		return
	}
	s.watching = true
	conn, cancel := s.conn, s.cancel
	s.watch.Go(func() {
		var b [1]byte
		for {
			if _, err := conn.Read(b[:]); err != nil {
				cancel()
				return
			}
		}
	})
}

// closeConn ends the connection the stream took over. It first sends the
// end of the response after its bytes (CloseWrite) and waits, up to
// Config.WriteTimeout, for the client to close its side (the watching
// goroutine's read ends; without one, the stream reads itself): a closed
// socket whose bytes the client has not read yet is the kernel's to
// finish sending, and under memory pressure it resets them (a storm's
// thousands of streams end with megabytes each in flight), where the
// client would have read them to the end. net/http closes so too
// (closeWriteAndWait). When the handler closes, it closes at once.
func (s *stream) closeConn() {
	conn := s.conn
	s.watchMu.Lock()
	s.unwatched = true // a late watch timer starts none
	watching := s.watching
	s.watchMu.Unlock()
	if cw, ok := conn.(interface{ CloseWrite() error }); ok && s.h.ctx.Err() == nil && cw.CloseWrite() == nil {
		_ = conn.SetReadDeadline(time.Now().Add(s.h.cfg.WriteTimeout))
		stop := context.AfterFunc(s.h.ctx, func() { _ = conn.SetReadDeadline(time.Now()) })
		if watching {
			s.watch.Wait()
		} else {
			var b [64]byte
			for {
				if _, err := conn.Read(b[:]); err != nil {
					break
				}
			}
		}
		stop()
	}
	conn.Close()
	s.watch.Wait()
}

// headOwn are the headers hijack writes itself (Connection, Date) or
// leaves out (Transfer-Encoding): the body runs to the connection's close.
var headOwn = map[string]bool{"Transfer-Encoding": true, "Connection": true, "Date": true}

// hijack takes an HTTP/1.1 connection from net/http for a stream and puts
// the response's head in buf, to go out with the stream's first bytes; nil
// when it cannot (HTTP/2, or w does not support it). The head is written
// from w's header map before the Hijack, after which w is not used.
func (s *stream) hijack(w http.ResponseWriter, r *http.Request) net.Conn {
	if r.ProtoMajor != 1 {
		return nil
	}
	out := s.output()
	mark := len(*out)
	b := bytes.NewBuffer(*out)
	b.WriteString("HTTP/1.1 200 OK\r\n")
	_ = w.Header().WriteSubset(b, headOwn) // a bytes.Buffer takes every write
	b.WriteString("Connection: close\r\nDate: ")
	b.Write(time.Now().UTC().AppendFormat(b.AvailableBuffer(), http.TimeFormat))
	b.WriteString("\r\n\r\n")
	*out = b.Bytes()
	conn, _, err := s.rc.Hijack()
	if err != nil {
		*out = (*out)[:mark]
		return nil
	}
	s.watchMu.Lock()
	s.conn = conn
	s.watchMu.Unlock()
	return conn
}

// open starts the subscription of a one-collection stream.
func (s *stream) open(ctx context.Context, user string, tr transport, req *request) error {
	st, err := req.statement()
	if err != nil {
		return err
	}
	sub, err := s.h.coord.Subscribe(ctx, user, tr.String(), st)
	if err != nil {
		return err
	}
	if err := checkKeys(sub.Columns(), ""); err != nil {
		sub.Close()
		return err
	}
	s.sub, s.wire = sub, newJSONWire(sub.Columns(), "", s.f.sep())
	return nil
}

// startSnapshot starts a ?live=false answer's array.
func (s *stream) startSnapshot() {
	s.whole = true
	if s.gz != nil {
		s.zbuf = s.gz.header(s.zbuf)
	}
	s.buf = append(s.buf, '[')
}

// finishSnapshot answers ?live=false with the array in buf (and zbuf
// before it when compressed), closed at frontier.
func (s *stream) finishSnapshot(frontier uint64) {
	// Every object is followed by a comma: the last one's is the end.
	// (It is always in buf: a compressed shared piece leaves its last
	// separator there.)
	if n := len(s.buf); n > 0 && s.buf[n-1] == ',' {
		s.buf = s.buf[:n-1]
	}
	s.buf = append(s.buf, "]\n"...)
	s.w.Header().Set("Content-Type", "application/json")
	// As a stream's: the answer is the role's to see (its privileges),
	// and a later one differs.
	s.w.Header().Set("Cache-Control", "no-store")
	s.w.Header().Set(FrontierHeader, strconv.FormatUint(frontier, 10))
	body := s.buf
	if s.gz != nil {
		s.compress()
		s.zbuf = s.gz.close(s.zbuf)
		s.w.Header().Set("Content-Encoding", CompressionGzip)
		body = s.zbuf
	}
	s.charge(false)
	n, _ := s.w.Write(body)
	s.sent += int64(n)
}

// snapshotLen is the length of a ?live=false answer's JSON so far.
func (s *stream) snapshotLen() int64 {
	if s.gz != nil {
		return s.gz.size + int64(len(s.buf))
	}
	return int64(len(s.buf))
}

// chargeSnapshot charges a ?live=false answer's buffer and fails it once
// it passes Config.MaxSnapshotBytes, or grows while the memory budget is
// over its limit: it is held whole, and a stream would not be.
func (s *stream) chargeSnapshot() error {
	if s.gz != nil && len(s.buf) > directWrite {
		// Compressed, the answer is held compressed: all of buf but the
		// last comma (finishSnapshot's to drop).
		last := s.buf[len(s.buf)-1]
		s.buf = s.buf[:len(s.buf)-1]
		s.compress()
		s.buf = append(s.buf, last)
	}
	s.charge(false)
	if s.snapshotLen() > s.h.cfg.MaxSnapshotBytes {
		return fmt.Errorf("%w: over %d bytes", ErrSnapshotTooLarge, s.h.cfg.MaxSnapshotBytes)
	}
	if s.h.cfg.Budget.Over() {
		return fmt.Errorf("%w: the server's memory budget is over its limit", ErrSnapshotTooLarge)
	}
	return nil
}

// startStream sends a stream's headers.
func startStream(w http.ResponseWriter, r *http.Request, f framing) {
	streamHeaders(w, r, f)
	w.WriteHeader(http.StatusOK)
}

// streamHeaders sets a stream's headers.
func streamHeaders(w http.ResponseWriter, r *http.Request, f framing) {
	w.Header().Set("Content-Type", f.contentType())
	w.Header().Set("Cache-Control", "no-store")
	// Proxies that buffer (nginx) would hold the events back.
	w.Header().Set("X-Accel-Buffering", "no")
	if r.ProtoMajor == 1 {
		// Over HTTP/1.1 the body runs to the connection's close instead
		// of in chunks, as the SSE specification suggests: net/http
		// writes a chunk's header and trailer around its bytes through
		// its 4 KiB buffer, which made every batch three write system
		// calls instead of one. A stream ends only when its client or
		// UP TO ends it, and a client then reconnects anyway. (HTTP/2
		// has frames of its own.)
		w.Header().Set("Transfer-Encoding", "identity")
	}
}

// snapshot answers ?live=false: the rows up to the first frontier after AS
// OF, as one JSON array, with that frontier in FrontierHeader.
func (s *stream) snapshot(ctx context.Context) error {
	defer s.charge(true)
	s.startSnapshot()
	var steps []step
	for {
		rows, err := s.sub.Next(ctx, 0)
		if err != nil {
			return err
		}
		steps = s.pos.split(rows, steps[:0])
		for _, st := range steps {
			if st.rows == nil {
				s.finishSnapshot(st.progress)
				return nil
			}
			s.snapshotRows(s.wire, st.rows)
		}
		if err := s.chargeSnapshot(); err != nil {
			return err
		}
	}
}
