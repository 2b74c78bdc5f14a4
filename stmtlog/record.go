package stmtlog

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/shardtail/shardtail/row"
)

// Finished statuses, Materialize's values of finished_status.
const (
	// StatusSuccess: the statement completed (a SUBSCRIBE: it reached UP
	// TO, or its client closed it).
	StatusSuccess = "success"
	// StatusError: the statement failed with an error.
	StatusError = "error"
	// StatusCanceled: a CancelRequest or pg_cancel_backend ended it (57014).
	StatusCanceled = "canceled"
	// StatusAborted: the client disconnected (or the server shut down)
	// before the statement finished.
	StatusAborted = "aborted"
)

// Record is one statement execution.
type Record struct {
	// ID is the execution's id, unique across processes.
	ID uuid.UUID
	// SessionID is the session's id, unique across processes;
	// ConnectionID is its pg_backend_pid in the process that ran it.
	SessionID    uuid.UUID
	ConnectionID uint32
	// ApplicationName is application_name when the statement ran; User the
	// role the session authenticated as.
	ApplicationName string
	User            string
	// SQL is the statement's text; StatementType its kind in lower case
	// with underscores ("select", "subscribe", "create_table").
	SQL           string
	StatementType string
	// SampleRate is the rate the statement was sampled at.
	SampleRate float64
	// MzVersion is the server's version.
	MzVersion string
	// BeganAt and FinishedAt are wall-clock times.
	BeganAt, FinishedAt time.Time
	// Status is one of the Status constants; ErrorMessage the client's
	// error message ("" for none).
	Status       string
	ErrorMessage string
	// Returned reports that the statement returns rows: RowsReturned rows
	// in ResultSize bytes of wire messages. Otherwise both are NULL.
	Returned     bool
	RowsReturned int64
	ResultSize   int64
	// ExecutionStrategy is how a query was executed ("persist-fast-path",
	// "standard", "constant"), "" for statements that are not queries.
	ExecutionStrategy string
	// Subscribe is set for a SUBSCRIBE (bare, COPY, or a cursor's).
	Subscribe *Subscribe
}

// Subscribe describes a SUBSCRIBE's run.
type Subscribe struct {
	// Path is "fast" or "dataflow"; Collection the relation subscribed to;
	// AsOf the time its snapshot was taken at.
	Path       string
	Collection string
	AsOf       uint64
	// Frontier is the progress delivered when it ended.
	Frontier uint64
	// EndReason is why it ended (subscribe's End constants).
	EndReason string
	// Detaches and Resumes count the times the fast path detached the
	// subscriber over its budget and resumed it.
	Detaches, Resumes int64
}

// Columns are the log's columns: the shard's schema and the columns of
// mz_internal.mz_statement_execution_history. Materialize's names where it
// has them; path to resumes describe a SUBSCRIBE (as in mz_subscriptions).
var Columns = []row.Column{
	{Name: "id", Type: row.TypeUUID},
	{Name: "session_id", Type: row.TypeUUID},
	{Name: "connection_id", Type: row.TypeInt8},
	{Name: "application_name", Type: row.TypeText},
	{Name: "authenticated_user", Type: row.TypeText},
	{Name: "sql", Type: row.TypeText},
	{Name: "statement_type", Type: row.TypeText, Nullable: true},
	{Name: "sample_rate", Type: row.TypeFloat8},
	{Name: "mz_version", Type: row.TypeText},
	{Name: "began_at", Type: row.TypeTimestampTZ},
	{Name: "finished_at", Type: row.TypeTimestampTZ},
	{Name: "finished_status", Type: row.TypeText},
	{Name: "error_message", Type: row.TypeText, Nullable: true},
	{Name: "rows_returned", Type: row.TypeInt8, Nullable: true},
	{Name: "result_size", Type: row.TypeInt8, Nullable: true},
	{Name: "execution_strategy", Type: row.TypeText, Nullable: true},
	{Name: "path", Type: row.TypeText, Nullable: true},
	{Name: "collection", Type: row.TypeText, Nullable: true},
	{Name: "as_of", Type: row.TypeNumeric, Nullable: true},
	{Name: "delivered_frontier", Type: row.TypeNumeric, Nullable: true},
	{Name: "end_reason", Type: row.TypeText, Nullable: true},
	{Name: "detaches", Type: row.TypeInt8, Nullable: true},
	{Name: "resumes", Type: row.TypeInt8, Nullable: true},
}

// Schema is the shard's schema.
var Schema = row.Schema{Columns: Columns}

// Column positions in Columns that decoding and filtering use.
const (
	colID = iota
	colSession
	colConn
	colApp
	colUser
	colSQL
	colType
	colRate
	colVersion
	colBegan
	colFinished
	colStatus
	colError
	colRows
	colSize
	colStrategy
	colPath
	colCollection
	colAsOf
	colFrontier
	colReason
	colDetaches
	colResumes
)

func nullText(s string) row.Datum {
	if s == "" {
		return nil
	}
	return s
}

func numeric(t uint64) row.Numeric { return row.Numeric(strconv.FormatUint(t, 10)) }

// validText replaces what is not UTF-8 in r's text with U+FFFD. Text
// columns hold UTF-8 only, and a record the shard refuses would hold up
// every record behind it: pgwire refuses such startup parameters and
// query text, but the log does not rely on every producer doing so.
func (r *Record) validText() {
	for _, s := range []*string{&r.ApplicationName, &r.User, &r.SQL, &r.StatementType, &r.MzVersion, &r.Status, &r.ErrorMessage, &r.ExecutionStrategy} {
		*s = validUTF8(*s)
	}
	if r.Subscribe != nil {
		sub := *r.Subscribe
		sub.Path, sub.Collection, sub.EndReason = validUTF8(sub.Path), validUTF8(sub.Collection), validUTF8(sub.EndReason)
		r.Subscribe = &sub
	}
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// Row encodes r as a row of Columns.
func (r *Record) Row() row.Row {
	out := row.Row{
		row.UUID(r.ID), row.UUID(r.SessionID), int64(r.ConnectionID), r.ApplicationName, r.User, r.SQL,
		nullText(r.StatementType), r.SampleRate, r.MzVersion,
		row.TimestampTZ(r.BeganAt.UnixMicro()), row.TimestampTZ(r.FinishedAt.UnixMicro()), r.Status,
		nullText(r.ErrorMessage), nil, nil, nullText(r.ExecutionStrategy),
		nil, nil, nil, nil, nil, nil, nil,
	}
	if r.Returned {
		out[colRows], out[colSize] = r.RowsReturned, r.ResultSize
	}
	if sub := r.Subscribe; sub != nil {
		out[colPath], out[colCollection] = sub.Path, nullText(sub.Collection)
		out[colAsOf], out[colFrontier] = numeric(sub.AsOf), numeric(sub.Frontier)
		out[colReason], out[colDetaches], out[colResumes] = nullText(sub.EndReason), sub.Detaches, sub.Resumes
	}
	return out
}

// decode is Row's inverse, for rows read from the shard.
func decode(r row.Row) (Record, error) {
	if err := row.CheckRow(Schema, r); err != nil {
		return Record{}, fmt.Errorf("statement log row: %w", err)
	}
	text := func(i int) string {
		s, _ := r[i].(string)
		return s
	}
	num := func(i int) uint64 {
		n, _ := r[i].(row.Numeric)
		v, _ := strconv.ParseUint(string(n), 10, 64)
		return v
	}
	i64 := func(i int) int64 {
		n, _ := r[i].(int64)
		return n
	}
	rec := Record{
		ID: uuid.UUID(r[colID].(row.UUID)), SessionID: uuid.UUID(r[colSession].(row.UUID)),
		ConnectionID: uint32(i64(colConn)), ApplicationName: text(colApp), User: text(colUser),
		SQL: text(colSQL), StatementType: text(colType), SampleRate: r[colRate].(float64), MzVersion: text(colVersion),
		BeganAt:    time.UnixMicro(int64(r[colBegan].(row.TimestampTZ))),
		FinishedAt: time.UnixMicro(int64(r[colFinished].(row.TimestampTZ))),
		Status:     text(colStatus), ErrorMessage: text(colError), ExecutionStrategy: text(colStrategy),
		Returned: r[colRows] != nil, RowsReturned: i64(colRows), ResultSize: i64(colSize),
	}
	if r[colPath] != nil {
		rec.Subscribe = &Subscribe{Path: text(colPath), Collection: text(colCollection), AsOf: num(colAsOf),
			Frontier: num(colFrontier), EndReason: text(colReason), Detaches: i64(colDetaches), Resumes: i64(colResumes)}
	}
	return rec, nil
}
