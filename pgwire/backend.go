package pgwire

import (
	"context"
	"io"
	"iter"
	"net"
)

// Backend is the rest of the server as pgwire sees it: roles to authenticate
// and sessions for authenticated connections. The adapter implements it. Its
// methods are called concurrently, from every connection's goroutine.
type Backend interface {
	// Role returns how user authenticates. When there is no such role it
	// returns an error wrapping ErrUnknownRole; pgwire then fails the
	// connection with the same error as a wrong password. Any other error is
	// sent to the client (FATAL) and ends the connection.
	Role(ctx context.Context, user string) (Role, error)

	// OpenSession starts the session of an authenticated connection. An error
	// is sent to the client (FATAL, with its SQLSTATE, e.g. 3D000 for an
	// unknown database) and ends the connection. pgwire calls Session.Close
	// exactly once for every session it opened.
	OpenSession(ctx context.Context, info ConnInfo) (Session, error)
}

// Role is what authentication needs to know about a user.
type Role struct {
	// PasswordRequired reports whether the role must present a password.
	// False means trust: the role logs in without one.
	PasswordRequired bool

	// Verifier is the role's SCRAM-SHA-256 secret in Postgres's format, as
	// NewSCRAMVerifier returns it:
	// "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>".
	// Both cleartext and SCRAM authentication check against it, so the
	// password itself is never stored.
	Verifier string
}

// ConnInfo describes an authenticated connection to Backend.OpenSession.
type ConnInfo struct {
	User     string
	Database string // as the client sent it; "" when absent (the session picks its default)

	// Options holds the other startup parameters as the client sent them
	// (application_name, client_encoding, options, DateStyle, ...).
	Options map[string]string

	RemoteAddr net.Addr
	TLS        bool   // the connection is encrypted
	ProcessID  uint32 // the process id reported in BackendKeyData (pg_backend_pid)

	// Password is the password the client authenticated with, when it sent
	// it in clear text (AuthCleartext); "" otherwise. A proxy passes it on
	// to the server behind it.
	Password string
}

// TxStatus is the transaction status a session reports in ReadyForQuery.
type TxStatus byte

// Transaction statuses, as in the ReadyForQuery message.
const (
	TxIdle    TxStatus = 'I' // not in a transaction block
	TxInBlock TxStatus = 'T' // in a transaction block
	TxFailed  TxStatus = 'E' // in a failed transaction block; statements are refused until ROLLBACK
)

// Session is one client connection's SQL state: transactions, session
// variables, cursors. pgwire calls its methods, and those of the Statements,
// Portals and Results it returns, from the connection's single goroutine only,
// never concurrently; a session therefore needs no locking of its own for
// protocol calls. Every ctx passed in is the context of the current protocol
// message: it is canceled by a CancelRequest (cause ErrQueryCanceled), by the
// client disconnecting (cause ErrClientGone) and by Server.Close (cause
// ErrServerClosed). A session must not keep it after the call returns.
type Session interface {
	// Parameters returns the ParameterStatus values to report at connection
	// start. They override pgwire's defaults (server_version 9.5.0, UTF8
	// encodings, DateStyle, TimeZone UTC, ...). Later changes (SET) are
	// reported by putting ParameterStatus messages (AppendParameterStatus)
	// into a Result.
	Parameters() map[string]string

	// TxStatus reports the transaction status for ReadyForQuery.
	TxStatus() TxStatus

	// Query runs a simple-protocol query string, which may hold several
	// statements. It yields one Result per statement, running each only when
	// pgwire asks for it, that is after pgwire has sent the previous Result in
	// full; a statement error is yielded as (nil, err) and ends the query. An
	// empty query string (or one with only comments) yields nothing, and
	// pgwire sends EmptyQueryResponse. Rows must be encoded in text format.
	// yield returns false when the Result just yielded failed while being
	// sent (its Next returned an error) or the client is gone: the session
	// must then stop, without calling yield again, and treat the statement
	// as failed (a transaction block becomes TxFailed). The session ends an
	// implicit transaction itself when the sequence ends, early or not.
	Query(ctx context.Context, sql string) iter.Seq2[Result, error]

	// Prepare parses one statement for the extended protocol (Parse).
	// paramOIDs are the parameter types the client specified, 0 meaning
	// unspecified; there may be fewer than the statement has parameters.
	Prepare(ctx context.Context, sql string, paramOIDs []uint32) (Statement, error)

	// Sync ends an extended-protocol batch (the Sync message): it commits an
	// implicit transaction. failed reports that an error was sent since the
	// previous Sync, including errors pgwire raised itself (an unknown portal,
	// a malformed Bind): the session rolls back an implicit transaction or
	// marks a transaction block failed. A returned error is sent before
	// ReadyForQuery.
	Sync(ctx context.Context, failed bool) error

	// Close ends the session and releases all it holds. pgwire calls it once,
	// after closing every Result, Portal and Statement of the session, when
	// the client terminates or disconnects or the server closes.
	Close() error
}

// QueryStepper is implemented by a Session that can run a simple-protocol
// query a statement at a time, pulled, rather than as Query's sequence,
// which holds the session's frames on the connection's stack for as long as
// a statement's result runs. With it pgwire can leave a result that waits
// for its next batch (see ReadyResult) and park the connection: its
// goroutine ends, and a new one continues the query once the result is
// ready. The statements run, and fail, exactly as Query's would.
type QueryStepper interface {
	// QuerySteps starts the query of Query(ctx, sql).
	QuerySteps(ctx context.Context, sql string) QuerySteps
}

// QuerySteps is one simple-protocol query of a QueryStepper, run statement
// by statement from the connection's goroutine.
type QuerySteps interface {
	// Next runs the next statement and returns its Result, as Query's
	// sequence yields it: a statement error is (nil, err) and ends the
	// query; (nil, nil) means the query is over (an empty query has no
	// statement). pgwire calls Next again only after it has sent the
	// previous Result in full. ctx is the query's.
	Next(ctx context.Context) (Result, error)

	// Stop releases the query. pgwire calls it once, when it leaves the
	// query: after Next reported its end or an error, or early, as
	// Query's yield returning false ends the sequence (the Result just
	// returned failed while being sent, or the client is gone).
	Stop()
}

// ReadyResult is implemented by a Result whose Next may wait long for its
// next batch, as a SUBSCRIBE waits for changes. Instead of blocking in
// Next, deep in the statement, pgwire then parks the connection: no
// goroutine waits for it (see QueryStepper).
type ReadyResult interface {
	Result

	// Ready reports whether Next would not wait long (a batch is ready,
	// or the end, an error, or a short wait such as a snapshot read's).
	// When it would, Ready returns false and calls wake once it would
	// not: once, from any goroutine, perhaps holding the producer's
	// locks (wake never blocks: it only schedules the connection), and
	// never after Close. pgwire calls Ready between Nexts, once the last
	// batch's bytes are written (they may be reused from then on, as
	// after the next Next), and calls Next once woken or once the
	// statement's context is done; a wake early only makes Next wait as
	// it would have.
	Ready(wake func()) bool
}

// Statement is a prepared statement (Parse). pgwire keeps the named and the
// unnamed statements of a connection, replacing and closing them with
// Postgres's rules.
type Statement interface {
	// ParamOIDs returns the type OID of every parameter ($1, $2, ...), with
	// the types the client left unspecified inferred.
	ParamOIDs() []uint32

	// Fields describes the rows the statement returns, or nil when it returns
	// none (NoData). The Format of each field is ignored.
	Fields() []Field

	// Bind creates a portal: the statement with parameter values, ready to
	// run. params holds one value per parameter, nil for NULL;
	// paramFormats and resultFormats are normalized by pgwire to one code per
	// parameter and per field (FormatText or FormatBinary). The values alias
	// the receive buffer: copy what you keep. A Portal must outlive the
	// Statement it came from, which may be closed first.
	Bind(ctx context.Context, params [][]byte, paramFormats, resultFormats []int16) (Portal, error)

	// Close releases the statement.
	Close()
}

// Portal is a bound statement, executed by pgwire at the first Execute.
type Portal interface {
	// Execute runs the portal and returns its Result. pgwire calls it at most
	// once; a suspended portal is resumed by pulling more from its Result.
	// Rows must be encoded in the result formats given to Bind.
	Execute(ctx context.Context) (Result, error)

	// Close releases the portal; pgwire first closes its Result, if any.
	Close()
}

// ResultKind says how pgwire frames a Result.
type ResultKind int

// Result kinds.
const (
	// ResultCommand completes with only a CommandComplete (after any notices).
	ResultCommand ResultKind = iota
	// ResultRows: RowDescription (simple protocol only; the extended protocol
	// describes with Describe), DataRows, CommandComplete.
	ResultRows
	// ResultCopyOut: CopyOutResponse, CopyData..., CopyDone, CommandComplete.
	ResultCopyOut
	// ResultCopyIn: CopyInResponse, then the client's data goes to
	// CopyInResult.CopyIn, then CommandComplete.
	ResultCopyIn
	// ResultEmpty: EmptyQueryResponse, for a statement that was empty.
	ResultEmpty
)

// Description is the shape of a Result.
type Description struct {
	Kind ResultKind

	// Fields describes the rows of ResultRows, or the columns of
	// ResultCopyOut and ResultCopyIn, whose Format is then the COPY format of
	// the column.
	Fields []Field

	// CopyFormat is the overall COPY format (FormatText for text and csv,
	// FormatBinary for binary) of ResultCopyOut and ResultCopyIn.
	CopyFormat int16
}

// Result is one statement's output, pulled by pgwire. Everything a result
// sends between its header and its CommandComplete arrives through Next as
// already-encoded wire messages, so a producer can encode a batch once and
// hand the same bytes to many connections.
type Result interface {
	// Describe returns the result's shape. pgwire calls it once, before Next.
	Describe() Description

	// Next blocks until the next batch of messages is ready and returns it,
	// or io.EOF after the last batch. Each element is one complete protocol
	// message, type byte and length included: DataRow ('D', AppendDataRow)
	// for ResultRows, CopyData ('d', AppendCopyData) for ResultCopyOut, and
	// for any kind NoticeResponse ('N', AppendNotice) and ParameterStatus
	// ('S', AppendParameterStatus). A ResultCopyOut element may also be
	// several CopyData messages back to back (COPY has no row limit to
	// count them against): a run of a shared encoding, which pgwire writes
	// to the socket as it is, without copying it when it is large. pgwire
	// copies the bytes to the client before the next call and neither
	// modifies nor keeps them, nor the batch's list: a result may reuse
	// both. pgwire flushes after every batch, so a
	// long-running result (SUBSCRIBE) streams as fast as its batches
	// arrive. Next must return promptly once ctx is
	// canceled; the error is then reported as the cancellation (57014) or
	// not at all (disconnect, shutdown). ctx may differ between calls: a
	// suspended portal resumes under the next Execute's context.
	Next(ctx context.Context) ([][]byte, error)

	// Tag returns the CommandComplete tag ("SELECT 3", "INSERT 0 1",
	// "COPY 10"). pgwire calls it after Next returned io.EOF.
	Tag() string

	// Close releases the result. pgwire calls it exactly once, also when it
	// abandons the result early (error, portal closed, disconnect).
	Close()
}

// CopyInResult is implemented by Results of kind ResultCopyIn.
type CopyInResult interface {
	Result

	// CopyIn consumes the client's COPY data. r yields the payloads of the
	// client's CopyData messages as one byte stream, then io.EOF at CopyDone;
	// at CopyFail it returns an error in the ErrCopyFailed family, and for an
	// unexpected message a protocol violation. r must not be used after
	// CopyIn returns. If CopyIn returns nil before r reached io.EOF, pgwire
	// discards the rest of the data. After CopyIn returns nil, pgwire pulls
	// Next until io.EOF (for notices) and sends Tag.
	CopyIn(ctx context.Context, r io.Reader) error
}

// Field describes one column of a result (one field of RowDescription).
type Field struct {
	Name      string
	TableOID  uint32 // 0 when the column is not a table column
	TableAttr uint16 // attribute number in TableOID, or 0
	TypeOID   uint32
	TypeSize  int16 // pg_type.typlen; -1 for variable length
	TypeMod   int32 // -1 for none
	Format    int16 // FormatText or FormatBinary
}

// Format codes for Field.Format, Bind and COPY.
const (
	FormatText   int16 = 0
	FormatBinary int16 = 1
)
