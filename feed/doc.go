// Package feed serves SUBSCRIBE over HTTP: Server-Sent Events for
// browsers (new EventSource(url)), NDJSON for programs, and a one-shot
// JSON snapshot, on their own port (`shardtail serve --feed-listen`,
// default 127.0.0.1:6877).
//
// # Endpoints
//
//	GET /v1/subscribe/{collection}   the stream (parameters below)
//	GET /v1/subscribe?collection=a&collection=b
//	                                 several collections at one consistent cut
//	GET /                            the collections the role may read
//	GET /ui/{collection}             a live table of one (HTML + feed.js)
//
// The query parameters mirror SUBSCRIBE's options: snapshot=true|false,
// envelope=upsert|debezium with key=col,..., columns=a,b, where=<SQL
// predicate> (parsed with the SQL parser; a filter only), as_of=, up_to=,
// after= (a resume point, as Last-Event-ID), live=false (the snapshot
// alone). A request becomes the statement a pgwire client would send,
//
//	SUBSCRIBE (SELECT a, b FROM coll WHERE pred) ENVELOPE ... WITH (SNAPSHOT = ..., PROGRESS) AS OF ... UP TO ...
//
// (or SUBSCRIBE coll without columns and where), and is planned, checked,
// routed to the fast or dataflow path and accounted by the adapter
// exactly as that statement would be (adapter.Coordinator.Subscribe), in
// a session of the request's role. PROGRESS is always on: its progress
// rows are the stream's progress events.
//
// A stream of several collections opens one subscription per collection
// at one AS OF (the request's, the resume point's, or the latest time any
// of them would start at alone, the others restarted at it), holds each
// collection's rows until every collection's frontier passes them, and
// announces progress at the least frontier: a progress event at F closes
// every collection below F. Its rows name their collection
// ("mz_collection":"a"); it takes no shape parameters. A collection far
// ahead of a lagging one is held in the stream's memory (holder "feed"),
// up to Config.MaxHeldBytes (128 MiB, as subscribe_max_buffered_bytes):
// past it the stream ends with event: reset (53200), a ?live=false answer
// with 503.
//
// # Events
//
// Server-Sent Events (text/event-stream):
//
//	retry: 1000
//
//	event: rows
//	data: [{"mz_timestamp":"1700000000123","mz_diff":1,"id":"42","name":"x"}]
//
//	event: progress
//	id: 1700000000124
//	data: {"frontier":"1700000000124"}
//
//	event: reset     data: {"code":"53200","error":"..."}  the position is gone
//	event: error     data: {"code":"42704","error":"..."}  the stream failed
//	event: end       data: {"frontier":"..."}              UP TO reached
//	: heartbeat                                            every 15 s when idle
//
// A row is a JSON object: mz_timestamp as a string, mz_diff as a number
// (or mz_state and the envelope's columns), and each column as
// pgrepr.AppendJSONValue encodes it (int8 and numeric as strings, NaN and
// infinities as null, timestamps as Postgres text). A stream whose rows
// would have two fields of one name (a column named mz_diff, or
// columns=a,a), of which a JSON parser keeps one, is refused (400,
// 42701): choose columns= without it. Rows are JSON-encoded
// once per output shape and the bytes shared by every subscriber of it
// (formatter.Wire over the fast path's shared rows), as pgwire's DataRows
// are, each followed by its separator (',' or a newline), so that a shared
// snapshot piece is written to every stream from those bytes
// (formatter.Runs), not framed again per subscriber.
//
// Only progress events carry an id, and a progress event at F means every
// row below F was sent. A client applies rows when the progress event
// that closes them arrives and drops rows not yet closed when the
// connection breaks; the browser then reconnects with Last-Event-ID: F
// and the stream goes on exactly after F, as AS OF F-1 WITH (SNAPSHOT =
// false), rows below F dropped: no gap and no duplicate. The progress
// event at AS OF itself is not sent, since the snapshot's rows are at AS
// OF: a resume from it would skip them. When F-1 is no longer in the
// collection's history (below since), or the client fell behind past
// what the shard retains, the stream sends event: reset and ends: the
// client drops its state and reconnects without Last-Event-ID (feed.js
// also drops an ?after= it was opened with). An as_of of the request's own
// below since is no resume point but the request's error: 400 with
// pgwire's XX000, since starting over would ask for it again. A stream
// that reached UP TO sends event: end; a reconnect after it gets 204,
// which stops an EventSource. One whose as_of is its up_to completes with
// no rows and event: end alone (at UP TO, no progress event, so no id): a
// client closes on end (feed.js does), since a bare EventSource would
// open it afresh.
//
// NDJSON (Accept: application/x-ndjson) sends the same as one JSON value
// per line: row objects (they have mz_timestamp), {"frontier":"F"},
// {"reset":true,"code":...,"error":...} and {"code":...,"error":...}.
// ?live=false answers with the snapshot as one JSON array and its
// frontier in the Shardtail-Frontier header; ?after=<it> streams the
// rest. Since the header comes first, the answer is held whole: past
// Config.MaxSnapshotBytes (128 MiB), or growing while the memory budget is
// over its limit, it fails with 503 (53200) and the client streams
// instead. Streams and ?live=false answers alike are Cache-Control:
// no-store: what they hold is the role's to see, and of their time.
//
// # Compression
//
// A request that accepts gzip (Accept-Encoding: gzip, as EventSource and
// Go's http.Client send) gets Content-Encoding: gzip, unless
// Config.Compression is CompressionNone. The stream is one gzip member
// spliced from pieces (gzip.go): each Shared run of row objects is
// compressed once per shape and encoding on its own (a fresh dictionary,
// ended by a sync flush, no final block), kept with the rows as their
// other encodings are (formatter.Derived, charged to the memory budget),
// and its bytes written to every stream of the shape, as the
// uncompressed runs are; a stream's own bytes (framing, progress events,
// heartbeats, rows nobody shares) go in as stored blocks, or
// flate.StatelessDeflate's when long. Every batch ends with a sync
// marker, so a client decodes it whole once it is written; the CRC-32 of
// the whole is combined from the pieces' (no piece is read per stream),
// and a stream that ends cleanly (UP TO, reset, error, the server's
// shutdown) ends the member with its trailer. A ?live=false answer is
// held compressed.
//
// # Authentication and limits
//
// HTTP Basic, checked against the role's SCRAM verifier (the catalog's,
// as pgwire checks it), over TLS when the server has --tls-cert (HTTP/2
// then, so that a page holds many streams on one connection). A request
// without credentials is the default role, which needs no password unless
// the server requires them. Failed password logins are throttled by
// address with pgwire's throttle (pgwire.AuthThrottle; one per process,
// so an address guesses no faster over both transports): an attempt that
// would wait past 10 s gets 429 (28000). Privileges are those of SUBSCRIBE. Errors
// before streaming are JSON bodies naming the SQLSTATE with a fitting
// status (401, 403, 404, 400, 503):
//
//	{"code":"42501","error":"permission denied for TABLE \"t\""}
//	{"code":"42601","error":"where: syntax error at end of input","position":4}   (where=a>>)
//
// A where= predicate that does not parse gets the parser's SQLSTATE (42601
// for a syntax error, as the statement over pgwire) and "position", the
// 1-based character position of the error in the where= text (where
// pgwire's ErrorResponse counts in the statement). Past
// Config.MaxConnections streams a request gets 503 (53300).
// Config.CORSOrigins lists the origins whose pages may read the feed.
// With origins listed, every response carries Vary: Origin, an allowed
// origin's or not, since its headers depend on the request's Origin; "*"
// alone gives every response Access-Control-Allow-Origin: *, Origin or
// not, and so needs no Vary.
//
// # Backpressure and memory
//
// A stream writes each batch and flushes it, in one write system call:
// over HTTP/1.1 a stream takes its connection from net/http (Hijack) and
// its body runs to the connection's close rather than in chunks (whose
// framing net/http writes around each write); a batch is one writev of
// its framing and its runs of shared rows from where they lie (from 1
// KiB; shorter runs are copied), and the response's head goes out with
// the first batch when one is ready at once. Its write buffer is pooled
// between batches, and neither it nor the batch's rows are held once the
// batch is written. A goroutine watches the connection for the client
// leaving from when the stream first waits for its subscription, or a
// Next of it takes over 50 ms (a snapshot or catch-up read from storage,
// whose share and slot a client that left would hold until the next
// write); a resume or snapshot ready at once that ends at UP TO is never
// watched. A stream through a ResponseWriter sends its head before it
// first waits, as one that took its connection over does. Through a
// ResponseWriter (HTTP/2), runs from 64 KiB are written where they lie.
// A slow client blocks only its own stream, while the subscription's own budget (detach and resume on
// the fast path, 53200 on the dataflow path, event: reset when history is
// lost) applies unchanged. A write that takes longer than
// Config.WriteTimeout closes the connection. The streams' buffers are the
// memory budget's holder "feed".
//
// Server.Close (Handler.Close) ends every stream, with the end of its
// body (the gzip trailer, an HTTP/2 stream's end) on its connection still
// open, within a second for a client that reads (as pgwire's last
// error); the connections still open after two are closed.
//
// The canonical use, from package server:
//
//	h, err := feed.NewHandler(coord, feed.Config{Budget: budget, Registerer: reg})
//	if err != nil {
//		return err
//	}
//	srv := feed.Serve(h, ln) // serving when it returns
//	defer srv.Close()        // before the coordinator closes
package feed
