package feed

import (
	"strconv"
	"time"
)

// framing writes one transport's events. Every method appends to buf and
// returns it; the stream writes and flushes buf after each batch.
type framing interface {
	// contentType is the response's Content-Type.
	contentType() string
	// open is what the response starts with.
	open(buf []byte) []byte
	// sep follows each row object (jsonWire); a rows event is
	// rowsOpen, the objects, rowsClose, with the last object's sep left
	// out when trimLast.
	sep() byte
	trimLast() bool
	rowsOpen(buf []byte) []byte
	rowsClose(buf []byte) []byte
	// progress frames a closed timestamp: no more rows below frontier.
	progress(buf []byte, frontier uint64) []byte
	// reset tells the client its position is no longer in history.
	reset(buf []byte, e *errorBody) []byte
	// fail reports an error that ends the stream.
	fail(buf []byte, e *errorBody) []byte
	// end marks completion at UP TO.
	end(buf []byte, frontier uint64) []byte
	// heartbeat keeps an idle connection open through proxies.
	heartbeat(buf []byte) []byte
}

// sseFraming is Server-Sent Events (text/event-stream):
//
//	retry: 1000
//
//	event: rows
//	data: [{"mz_timestamp":"5","mz_diff":1,"a":1}]
//
//	event: progress
//	id: 6
//	data: {"frontier":"6"}
//
// Only progress events carry an id, so the Last-Event-ID a browser
// reconnects with is always a closed timestamp.
type sseFraming struct{ retry time.Duration }

func (sseFraming) contentType() string { return "text/event-stream; charset=utf-8" }

func (f sseFraming) open(buf []byte) []byte {
	buf = append(buf, "retry: "...)
	buf = strconv.AppendInt(buf, f.retry.Milliseconds(), 10)
	return append(buf, "\n\n"...)
}

func (sseFraming) sep() byte                   { return ',' }
func (sseFraming) trimLast() bool              { return true }
func (sseFraming) rowsOpen(buf []byte) []byte  { return append(buf, "event: rows\ndata: ["...) }
func (sseFraming) rowsClose(buf []byte) []byte { return append(buf, "]\n\n"...) }

func (sseFraming) progress(buf []byte, frontier uint64) []byte {
	buf = append(buf, "event: progress\nid: "...)
	buf = strconv.AppendUint(buf, frontier, 10)
	buf = append(buf, "\ndata: "...)
	return append(appendFrontier(buf, frontier), "\n\n"...)
}

func (sseFraming) reset(buf []byte, e *errorBody) []byte {
	buf = append(buf, "event: reset\ndata: "...)
	return append(e.appendJSON(buf), "\n\n"...)
}

func (sseFraming) fail(buf []byte, e *errorBody) []byte {
	buf = append(buf, "event: error\ndata: "...)
	return append(e.appendJSON(buf), "\n\n"...)
}

func (sseFraming) end(buf []byte, frontier uint64) []byte {
	buf = append(buf, "event: end\ndata: "...)
	return append(appendFrontier(buf, frontier), "\n\n"...)
}

func (sseFraming) heartbeat(buf []byte) []byte { return append(buf, ": heartbeat\n\n"...) }

// ndjsonFraming is newline-delimited JSON (application/x-ndjson): a row
// object per line (it has mz_timestamp), {"frontier":"6"} for progress,
// {"reset":true,...} and {"error":...} as the last line when the stream
// ends on one; a stream completed at UP TO just ends. Heartbeats are empty
// lines.
type ndjsonFraming struct{}

func (ndjsonFraming) contentType() string { return "application/x-ndjson" }

func (ndjsonFraming) open(buf []byte) []byte { return buf }

func (ndjsonFraming) sep() byte                   { return '\n' }
func (ndjsonFraming) trimLast() bool              { return false }
func (ndjsonFraming) rowsOpen(buf []byte) []byte  { return buf }
func (ndjsonFraming) rowsClose(buf []byte) []byte { return buf }

func (ndjsonFraming) progress(buf []byte, frontier uint64) []byte {
	return append(appendFrontier(buf, frontier), '\n')
}

func (ndjsonFraming) reset(buf []byte, e *errorBody) []byte {
	buf = append(buf, `{"reset":true,`...)
	return append(e.appendFields(buf), "}\n"...)
}

func (ndjsonFraming) fail(buf []byte, e *errorBody) []byte { return append(e.appendJSON(buf), '\n') }

func (ndjsonFraming) end(buf []byte, _ uint64) []byte { return buf }

func (ndjsonFraming) heartbeat(buf []byte) []byte { return append(buf, '\n') }

// appendFrontier appends {"frontier":"F"}.
func appendFrontier(buf []byte, frontier uint64) []byte {
	buf = append(buf, `{"frontier":"`...)
	buf = strconv.AppendUint(buf, frontier, 10)
	return append(buf, `"}`...)
}
