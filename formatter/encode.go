package formatter

import (
	"encoding/binary"

	"github.com/shardtail/shardtail/pgrepr"
	"github.com/shardtail/shardtail/row"
)

// OID returns the type OID of an output column type.
func (t ColType) OID() uint32 { return pgrepr.OID(t.RelType()) }

// Size returns pg_type.typlen of the type.
func (t ColType) Size() int16 { return pgrepr.TypeSize(t.RelType()) }

// Typmod returns the column's type modifier as RowDescription reports it
// (row.Column.Typmod): -1 for none and for the metadata columns.
func (t ColType) Typmod() int32 {
	if t.Meta != MetaNone {
		return -1
	}
	return row.Column{Type: t.Rel, Mod: t.Mod}.Typmod()
}

// RelType returns the row.Type that holds the column's datums.
func (t ColType) RelType() row.Type {
	switch t.Meta {
	case MetaTimestamp:
		return row.TypeNumeric
	case MetaProgress:
		return row.TypeBool
	case MetaDiff:
		return row.TypeInt8
	case MetaState:
		return row.TypeText
	}
	return t.Rel
}

// Encoder encodes the output rows of one shape in one set of formats. It
// is immutable and safe to share.
type Encoder struct {
	types   []row.Type // of the tail columns
	formats []pgrepr.Format
	// tsFormat and progFormat are the formats of mz_timestamp and
	// mz_progressed.
	tsFormat, progFormat pgrepr.Format
	progress             bool
	key                  string
}

// NewEncoder returns an encoder for rows of opts with the given per-column
// result formats (one per output column, or one for all, or none for text,
// as Bind normalizes them).
func NewEncoder(opts *Options, formats []int16) *Encoder {
	cols := opts.Columns()
	f := func(i int) pgrepr.Format {
		switch len(formats) {
		case 0:
			return pgrepr.FormatText
		case 1:
			return pgrepr.Format(formats[0])
		}
		return pgrepr.Format(formats[i])
	}
	e := &Encoder{progress: opts.Progress, tsFormat: f(0), key: "D"}
	first := 1
	if opts.Progress {
		e.progFormat = f(1)
		first = 2
	}
	for i := first; i < len(cols); i++ {
		e.types = append(e.types, cols[i].Type.RelType())
		e.formats = append(e.formats, f(i))
	}
	for i := range cols {
		e.key += string(rune('0' + f(i)))
	}
	return e
}

// Key implements Wire.
func (e *Encoder) Key() string { return e.key }

// AppendMessage implements Wire: a DataRow.
func (e *Encoder) AppendMessage(buf []byte, r Row) []byte { return e.AppendDataRow(buf, r) }

// AppendDataRow appends r as a complete DataRow message.
func (e *Encoder) AppendDataRow(buf []byte, r Row) []byte {
	start := len(buf)
	n := 1 + len(e.types)
	if e.progress {
		n++
	}
	buf = append(buf, 'D', 0, 0, 0, 0, byte(n>>8), byte(n))
	buf = e.appendFields(buf, r)
	binary.BigEndian.PutUint32(buf[start+1:], uint32(len(buf)-start-1))
	return buf
}

// appendFields appends the length-prefixed fields of r (DataRow and binary
// COPY share this layout).
func (e *Encoder) appendFields(buf []byte, r Row) []byte {
	buf = appendTimestamp(buf, r.Time, e.tsFormat)
	if e.progress {
		buf = pgrepr.AppendField(buf, row.TypeBool, r.Progressed, e.progFormat)
	}
	if r.Progressed {
		for range e.types {
			buf = append(buf, 0xff, 0xff, 0xff, 0xff)
		}
		return buf
	}
	if c, j, ok := r.columns(); ok {
		buf = pgrepr.AppendField(buf, e.types[0], c.Diff(j), e.formats[0])
		for i := range c.Vecs {
			buf = pgrepr.AppendVecField(buf, &c.Vecs[i], j, e.formats[1+i])
		}
		return buf
	}
	if u := r.update(); u != nil {
		buf = pgrepr.AppendField(buf, e.types[0], u.Diff, e.formats[0])
		return AppendTail(buf, e.types[1:], e.formats[1:], u.Row)
	}
	return AppendTail(buf, e.types, e.formats, r.Tail)
}

// AppendTail appends the length-prefixed fields of datums. It is the part
// of a row's encoding that does not depend on its timestamp.
func AppendTail(buf []byte, types []row.Type, formats []pgrepr.Format, datums row.Row) []byte {
	for i, d := range datums {
		buf = pgrepr.AppendField(buf, types[i], d, formats[i])
	}
	return buf
}

func appendTimestamp(buf []byte, t uint64, f pgrepr.Format) []byte {
	at := len(buf)
	buf = append(buf, 0, 0, 0, 0)
	if f == pgrepr.FormatBinary {
		buf = pgrepr.AppendNumericUint64Binary(buf, t)
	} else {
		buf = pgrepr.AppendNumericUint64Text(buf, t)
	}
	binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
	return buf
}

// CopyFormat is a COPY TO STDOUT format.
type CopyFormat int

// COPY formats.
const (
	CopyText CopyFormat = iota
	CopyCSV
	CopyBinary
)

// CopyEncoder encodes output rows as COPY data rows.
type CopyEncoder struct {
	format   CopyFormat
	progress bool
	types    []row.Type // every output column, metadata included
	names    []string   // their names, for HEADER
	key      string     // Key: the format and any options not the default
	bin      *Encoder
	csv      pgrepr.CSVOptions
	text     pgrepr.TextOptions

	// Reused from row to row (an encoder serves one session): the row of
	// every column, and the last mz_timestamp's text (a snapshot's rows
	// all share one).
	scratch row.Row
	lastT   uint64
	lastTD  row.Datum
	// prefix is, in text format, the encoded columns before mz_diff of a
	// data row at lastT, delimiter included: a snapshot's rows all start
	// with the same bytes, encoded once.
	prefix []byte
}

// NewCopyEncoder returns an encoder of opts's rows in format, with
// PostgreSQL's default text and CSV options.
func NewCopyEncoder(opts *Options, format CopyFormat) *CopyEncoder {
	return NewCopyEncoderOptions(opts, format, pgrepr.DefaultTextOptions(), pgrepr.DefaultCSVOptions())
}

// NewCopyEncoderOptions returns an encoder of opts's rows in format, text
// and csv giving COPY's DELIMITER, NULL, QUOTE, ESCAPE and HEADER for
// those formats.
func NewCopyEncoderOptions(opts *Options, format CopyFormat, text pgrepr.TextOptions, csv pgrepr.CSVOptions) *CopyEncoder {
	e := &CopyEncoder{format: format, progress: opts.Progress, csv: csv, text: text, key: "C" + string(rune('0'+format))}
	for _, c := range opts.Columns() {
		e.types = append(e.types, c.Type.RelType())
		e.names = append(e.names, c.Name)
	}
	switch format {
	case CopyBinary:
		e.bin = NewEncoder(opts, []int16{int16(pgrepr.FormatBinary)})
	case CopyText:
		if text != pgrepr.DefaultTextOptions() {
			// Shared encodings are cached by key: other options, other bytes.
			e.key += string([]byte{0, text.Delimiter}) + text.Null
		}
	case CopyCSV:
		if csv != pgrepr.DefaultCSVOptions() {
			e.key += string([]byte{0, csv.Delimiter, csv.Quote, csv.Escape}) + csv.Null
		}
	}
	return e
}

// AppendHeader appends what precedes the first row: binary's signature,
// or with HEADER the line of column names.
func (e *CopyEncoder) AppendHeader(buf []byte) []byte {
	switch {
	case e.format == CopyBinary:
		return pgrepr.AppendCopyBinaryHeader(buf)
	case e.format == CopyCSV && e.csv.Header:
		return pgrepr.AppendCopyCSVHeader(buf, e.names, e.csv)
	case e.format == CopyText && e.text.Header:
		return pgrepr.AppendCopyTextHeader(buf, e.names, e.text)
	}
	return buf
}

// AppendTrailer appends what follows the last row (binary's -1 trailer).
func (e *CopyEncoder) AppendTrailer(buf []byte) []byte {
	if e.format == CopyBinary {
		return pgrepr.AppendCopyBinaryTrailer(buf)
	}
	return buf
}

// Key implements Wire.
func (e *CopyEncoder) Key() string { return e.key }

// AppendMessage implements Wire: one CopyData message holding the row.
func (e *CopyEncoder) AppendMessage(buf []byte, r Row) []byte {
	start := len(buf)
	buf = append(buf, 'd', 0, 0, 0, 0)
	buf = e.AppendRow(buf, r)
	binary.BigEndian.PutUint32(buf[start+1:], uint32(len(buf)-start-1))
	return buf
}

// AppendRow appends one row's COPY data.
func (e *CopyEncoder) AppendRow(buf []byte, r Row) []byte {
	if e.format == CopyBinary {
		n := len(e.types)
		buf = append(buf, byte(n>>8), byte(n))
		return e.bin.appendFields(buf, r)
	}
	if e.lastTD == nil || e.lastT != r.Time {
		e.lastT, e.lastTD = r.Time, row.Numeric(uintText(r.Time))
		e.prefix = nil
	}
	if e.format == CopyText && !r.Progressed {
		return e.appendTextData(buf, r)
	}
	full := e.flatten(append(e.scratch[:0], e.lastTD), r)
	e.scratch = full
	if e.format == CopyCSV {
		buf = pgrepr.AppendCopyCSVRow(buf, e.types, full, e.csv)
	} else {
		buf = pgrepr.AppendCopyTextRowOptions(buf, e.types, full, e.text)
	}
	clear(full) // hold no row's values until the next
	return buf
}

// appendTextData appends a data row in text format: the prefix its time
// shares with the rows before it, then its tail. Text format has no rule
// that looks at the whole row (CSV quotes `\.` alone in a one-column row),
// so the columns encode the same in two parts as in one.
func (e *CopyEncoder) appendTextData(buf []byte, r Row) []byte {
	if e.prefix == nil {
		meta := append(e.scratch[:0], e.lastTD)
		if e.progress {
			meta = append(meta, false)
		}
		e.prefix = pgrepr.AppendCopyTextRowOptions(nil, e.types[:len(meta)], meta, e.text)
		e.prefix[len(e.prefix)-1] = e.text.Delimiter // for the row's '\n'
		clear(meta)
	}
	buf = append(buf, e.prefix...)
	types := e.types[len(e.types)-e.tailCols():]
	if c, j, ok := r.columns(); ok {
		buf = pgrepr.AppendCopyTextField(buf, types[0], c.Diff(j), e.text)
		for i := range c.Vecs {
			buf = append(buf, e.text.Delimiter)
			buf = pgrepr.AppendVecCopyText(buf, &c.Vecs[i], j, &e.text)
		}
		return append(buf, '\n')
	}
	if u := r.update(); u != nil {
		buf = pgrepr.AppendCopyTextField(buf, types[0], u.Diff, e.text)
		if len(types) == 1 {
			return append(buf, '\n')
		}
		buf = append(buf, e.text.Delimiter)
		return pgrepr.AppendCopyTextRowOptions(buf, types[1:], u.Row, e.text)
	}
	return pgrepr.AppendCopyTextRowOptions(buf, types, r.Tail, e.text)
}

// tailCols is the number of columns after mz_timestamp and mz_progressed.
func (e *CopyEncoder) tailCols() int {
	if e.progress {
		return len(e.types) - 2
	}
	return len(e.types) - 1
}

func (e *CopyEncoder) flatten(full row.Row, r Row) row.Row {
	rest := len(e.types) - 1
	if e.progress {
		full = append(full, r.Progressed)
		rest--
	}
	if r.Progressed {
		for range rest {
			full = append(full, nil)
		}
		return full
	}
	if u := r.update(); u != nil {
		return append(append(full, u.Diff), u.Row...)
	}
	return append(full, r.Tail...)
}

func uintText(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(b[i:])
}
