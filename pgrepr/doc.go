// Package pgrepr is the Postgres wire representation of shardtail's values,
// as Materialize's pgrepr crate is for Materialize: type OIDs and sizes for
// RowDescription, the text and binary formats of every row.Type in both
// directions, and the COPY text, CSV and binary formats. pgwire, SUBSCRIBE
// and COPY use it; it holds no connection state and does no I/O except
// through the io.Reader a CopyReader is given.
//
// # Values
//
// A value is a row.Datum whose Go type matches its row.Type (see package
// row); NULL is nil and never reaches the value functions: the caller
// writes a NULL field (-1 length, `\N`, an empty CSV field) itself, or lets
// AppendField and the COPY writers do it.
//
//	AppendText(buf, t, d)    text format, as Postgres prints it
//	ParseText(t, s)          text input, as Postgres' input functions parse it
//	AppendBinary(buf, t, d)  binary format (Postgres' send functions)
//	ParseBinary(t, b)        binary input (Postgres' receive functions)
//	AppendField(buf, t, d, f) one length-prefixed DataRow / binary COPY field
//
// Text output is exactly Postgres 15's with DateStyle ISO, TimeZone UTC,
// extra_float_digits >= 1 (shortest round-trip floats: "1e+20", "1.5e-07",
// "-0", "NaN", "Infinity") and bytea_output hex ("\x0a1b"). Timestamps print
// as "2024-01-02 03:04:05.12", timestamptz with "+00", years before 1 AD with
// " BC" at the end; numeric and jsonb print their canonical text.
//
// Input accepts what Postgres accepts for the common cases, and fails with
// an *Error carrying Postgres' SQLSTATE and message (22P02 `invalid input
// syntax for type integer: "x"`, 22003 `value "99999" is out of range for
// type smallint`, 22007/22008/22009 for dates and times, 22P02 with Postgres'
// detail line for JSON). Every error belongs to one family (ErrSyntax,
// ErrOutOfRange, ErrBinary, ErrEncoding, ErrCopy) for errors.Is.
//
// # Canonical forms and conventions
//
// Two values that Postgres considers equal must be equal datums, because
// persist consolidates by datum equality. So numeric is parsed into
// row.Numeric's canonical text (no trailing fractional zeros, "1.50" is
// "1.5"), and jsonb into Postgres' jsonb output (keys sorted by length then
// bytes, duplicates resolved last-wins, ", " and ": " separators, strings
// re-escaped as Postgres does) with numbers in the same canonical form.
// Where Postgres would print a numeric's display scale ("1.50"), pgrepr
// prints the canonical text; the binary format's dscale is likewise the
// canonical text's number of fractional digits. This matches Materialize,
// whose numerics carry no trailing zeros.
//
// Timestamps are microseconds since 1970 in row, since 2000 on the wire;
// dates likewise in days. Postgres' 'infinity' and '-infinity' are the
// extreme int64 (int32 for dates), here as there: TimestampInfinity,
// DateInfinity and their negatives. Postgres' valid range starts at
// 4714-11-24 BC; it ends in 294276 AD, of which row's int64 microseconds
// since 1970 reach only 294247-01-10, so later timestamps are out of range.
//
// # COPY
//
// The writers append one row per call: AppendCopyTextRow (tab-separated,
// `\N`, backslash escapes), AppendCopyCSVRow (quoting only when needed,
// "" for the empty string, unquoted empty for NULL), and
// AppendCopyBinaryHeader, AppendCopyBinaryRow, AppendCopyBinaryTrailer for
// the PGCOPY format. A COPY TO STDOUT sends each row in its own CopyData:
//
//	buf = buf[:0]
//	if first && binary {
//		buf = pgrepr.AppendCopyBinaryHeader(buf)
//	}
//	buf = pgrepr.AppendCopyTextRow(buf, types, r) // or CSV, or binary
//	send(CopyData(buf))
//	...
//	if binary {
//		send(CopyData(pgrepr.AppendCopyBinaryTrailer(buf[:0])))
//	}
//
// A CopyReader parses the client's COPY FROM STDIN stream (the CopyData
// payloads concatenated, ending at CopyDone) the way Postgres' COPY FROM
// does, including its error messages: line endings fixed by the first line,
// the `\.` end marker, HEADER, CSV quotes spanning lines, the binary header
// and trailer.
//
//	cr, err := pgrepr.NewCopyCSVReader(stream, opts) // opts.Validate()d
//	cr.Describe("t", columnNames)
//	var r row.Row
//	for {
//		r, err = cr.ReadRow(types, r)
//		if err == io.EOF {
//			break
//		}
//		if err != nil {
//			return err // *Error with SQLSTATE and a CONTEXT line (Where)
//		}
//		insert(slices.Clone(r))
//	}
//
// # Performance
//
// The output side runs once per value on the hot path of streaming
// millions of rows, so it appends into the caller's buffer and allocates
// nothing per value: AppendText, AppendBinary, AppendField and the COPY
// writers are allocation-free (tests assert this), floats are formatted
// from strconv's shortest digits in a stack buffer, COPY escaping and CSV
// quoting rewrite the appended bytes in place, and only text, bytea and
// jsonb are scanned for bytes to escape. SUBSCRIBE's mz_timestamp column, a
// uint64 sent as numeric, has AppendNumericUint64Text and
// AppendNumericUint64Binary fast paths. The input side allocates the datum
// (a Datum is an interface) and, in CopyReader, one string per row whose
// substrings are the fields; lines that lie whole in the read buffer are
// split without copying.
package pgrepr
