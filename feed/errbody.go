package feed

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/pgwire"
	"github.com/shardtail/shardtail/row"
)

// errorBody is the JSON of an error, in a response body or an event:
//
//	{"code":"42501","error":"permission denied for TABLE \"t\""}
//	{"code":"42601","error":"where: syntax error at end of input","position":4}
//
// code is the SQLSTATE a pgwire client would get for the same request;
// position, when the error has one (a where= predicate's syntax error:
// where=a>> above), is the 1-based character position in the where= text.
type errorBody struct {
	status   int
	Code     string
	Msg      string
	Position int // 0: none
}

// appendFields appends "code":...,"error":... and "position":... when
// there is one (no braces).
func (e *errorBody) appendFields(buf []byte) []byte {
	buf = append(buf, `"code":`...)
	buf = pgrepr.AppendJSONValue(buf, row.TypeText, e.Code)
	buf = append(buf, `,"error":`...)
	buf = pgrepr.AppendJSONValue(buf, row.TypeText, e.Msg)
	if e.Position > 0 {
		buf = append(buf, `,"position":`...)
		buf = strconv.AppendInt(buf, int64(e.Position), 10)
	}
	return buf
}

// appendJSON appends the error as a JSON object.
func (e *errorBody) appendJSON(buf []byte) []byte {
	return append(e.appendFields(append(buf, '{')), '}')
}

// toErrorBody gives err its SQLSTATE and HTTP status.
func toErrorBody(err error) *errorBody {
	var coded interface{ SQLState() string }
	switch {
	case errors.Is(err, ErrBadParameter):
		return &errorBody{status: http.StatusBadRequest, Code: "22023", Msg: err.Error()}
	case errors.Is(err, pgwire.ErrAuthThrottled):
		return &errorBody{status: http.StatusTooManyRequests, Code: pgwire.ErrAuthThrottled.SQLState(), Msg: err.Error()}
	case errors.Is(err, ErrSnapshotTooLarge):
		return &errorBody{status: http.StatusServiceUnavailable, Code: "53200", Msg: err.Error()}
	case errors.Is(err, ErrTooManyConnections):
		return &errorBody{status: http.StatusServiceUnavailable, Code: "53300", Msg: err.Error()}
	case errors.As(err, &coded):
		e := &errorBody{status: statusOf(coded.SQLState()), Code: coded.SQLState(), Msg: err.Error()}
		// As pgwire's ErrorResponse takes it (the feed's statement has no
		// text of its own: only a where= predicate is parsed).
		if p, ok := coded.(interface{ Position() int }); ok {
			e.Position = p.Position()
		}
		return e
	}
	// Internal detail goes to the log, not to the client.
	return &errorBody{status: http.StatusInternalServerError, Code: "XX000", Msg: "internal error"}
}

// statusOf maps a SQLSTATE to the HTTP status of a request that failed
// with it before streaming began.
func statusOf(code string) int {
	switch {
	case strings.HasPrefix(code, "28"):
		return http.StatusUnauthorized
	case code == "42501":
		return http.StatusForbidden
	case code == "42P01", code == "42704", code == "3F000", code == "3D000":
		return http.StatusNotFound
	case code == "53300", code == "53200", code == "58000", code == "57P01":
		return http.StatusServiceUnavailable
	case strings.HasPrefix(code, "42"), strings.HasPrefix(code, "22"), strings.HasPrefix(code, "54"), code == "0A000":
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// writeError answers a request with e as its JSON body.
func writeError(w http.ResponseWriter, e *errorBody) {
	w.Header().Set("Content-Type", "application/json")
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="shardtail", charset="UTF-8"`)
	}
	w.WriteHeader(e.status)
	w.Write(append(e.appendJSON(nil), '\n'))
}
