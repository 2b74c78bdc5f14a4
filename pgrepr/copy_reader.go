package pgrepr

import (
	"bytes"
	"encoding/binary"
	"io"
	"strconv"

	"github.com/shardtail/shardtail/row"
)

// CopyField is one field of a COPY FROM row: its text (text and CSV
// formats, backslash escapes and quotes already undone) or raw bytes
// (binary format), unless Null.
type CopyField struct {
	Value string
	Null  bool
}

type copyFormat uint8

const (
	copyText copyFormat = iota
	copyCSV
	copyBinary
)

// eolStyle is the line ending of a text or CSV stream. Postgres fixes it
// from the first line and rejects a stream that mixes styles.
type eolStyle uint8

const (
	eolUnknown eolStyle = iota
	eolNL
	eolCR
	eolCRNL
)

// copyReadSize is how much CopyReader asks its io.Reader for at a time.
const copyReadSize = 64 << 10

// CopyReader parses a COPY FROM STDIN data stream (the concatenated payloads
// of the client's CopyData messages) into rows of fields, as Postgres'
// COPY FROM does for the text, CSV and binary formats: line endings fixed
// by the first line, the `\.` end-of-data marker, backslash escapes (text),
// quoted fields that span lines (CSV), HEADER, and the binary signature,
// header and trailer.
//
// Read returns the next row's fields; ReadRow also converts them to a
// row.Row. The slice Read returns is only valid until the next call. At
// the end of the data both return io.EOF; after the end-of-data marker the
// CopyReader reads and discards the rest of the stream, as Postgres
// ignores data after `\.`. A CopyReader is not safe for concurrent use.
type CopyReader struct {
	r      io.Reader
	format copyFormat
	text   TextOptions
	csv    CSVOptions

	buf      []byte // read buffer: unconsumed bytes are buf[pos:end]
	pos, end int
	srcEOF   bool  // r returned io.EOF
	ended    bool  // the data ended; the next Read returns io.EOF
	err      error // sticky error, io.EOF at the end

	eol     eolStyle
	lineNo  int
	line    []byte // raw current line, without terminator
	lineOwn []byte // storage for lines that do not lie whole in buf
	out     []byte // unescaped field bytes of the current row
	bounds  []int  // field i is out[bounds[2i]:bounds[2i+1]], or NULL if bounds[2i] < 0
	fields  []CopyField

	headerRead bool // binary: header consumed

	table   string
	columns []string
}

// NewCopyTextReader returns a CopyReader for FORMAT text.
func NewCopyTextReader(r io.Reader, opts TextOptions) (*CopyReader, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &CopyReader{r: r, format: copyText, text: opts}, nil
}

// NewCopyCSVReader returns a CopyReader for FORMAT csv.
func NewCopyCSVReader(r io.Reader, opts CSVOptions) (*CopyReader, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &CopyReader{r: r, format: copyCSV, csv: opts}, nil
}

// NewCopyBinaryReader returns a CopyReader for FORMAT binary. Fields hold
// each value's binary format.
func NewCopyBinaryReader(r io.Reader) *CopyReader {
	return &CopyReader{r: r, format: copyBinary}
}

// Describe names the target table and its columns for error messages and
// their CONTEXT lines (`missing data for column "b"`, `COPY t, line 3,
// column b: "x"`); without it columns are numbered.
func (cr *CopyReader) Describe(table string, columns []string) {
	cr.table, cr.columns = table, columns
}

// Line returns the number of the line (text, CSV) or tuple (binary) last
// read, counting a header line, from 1.
func (cr *CopyReader) Line() int { return cr.lineNo }

// Read returns the fields of the next row, or io.EOF at the end of the
// data. The slice is reused by the next call; the strings stay valid.
func (cr *CopyReader) Read() ([]CopyField, error) {
	if err := cr.next(); err != nil {
		return nil, err
	}
	// One string per row; fields are substrings of it.
	all := string(cr.out)
	cr.fields = cr.fields[:0]
	for i := 0; i < len(cr.bounds); i += 2 {
		if cr.bounds[i] < 0 {
			cr.fields = append(cr.fields, CopyField{Null: true})
			continue
		}
		cr.fields = append(cr.fields, CopyField{Value: all[cr.bounds[i]:cr.bounds[i+1]]})
	}
	return cr.fields, nil
}

// ReadRow reads the next row and converts its fields to datums of types
// with ParseText (text, CSV) or ParseBinary (binary), appending them to
// dst[:0]. Errors carry Postgres' COPY context line (see Describe). It
// returns io.EOF at the end of the data. Errors in the stream are sticky;
// a row whose fields do not convert leaves the reader on the next row.
func (cr *CopyReader) ReadRow(types []row.Type, dst row.Row) (row.Row, error) {
	if err := cr.next(); err != nil {
		return nil, err
	}
	n := len(cr.bounds) / 2
	if n != len(types) {
		return nil, cr.countError(n, len(types))
	}
	var all string
	if cr.format != copyBinary {
		all = string(cr.out)
	}
	dst = dst[:0]
	for i := 0; i < n; i++ {
		a, b := cr.bounds[2*i], cr.bounds[2*i+1]
		if a < 0 {
			dst = append(dst, nil)
			continue
		}
		var d row.Datum
		var err error
		if cr.format == copyBinary {
			d, err = ParseBinary(types[i], cr.out[a:b])
		} else {
			d, err = ParseText(types[i], all[a:b])
		}
		if err != nil {
			where := copyContext(cr.table, cr.lineNo) + ", column " + cr.columnName(i)
			if cr.format != copyBinary {
				where += ": " + quoteInput(all[a:b])
			}
			return nil, withWhere(err, where)
		}
		dst = append(dst, d)
	}
	return dst, nil
}

func (cr *CopyReader) columnName(i int) string {
	if i < len(cr.columns) {
		return cr.columns[i]
	}
	return strconv.Itoa(i + 1)
}

func (cr *CopyReader) countError(got, want int) error {
	var err *Error
	switch {
	case cr.format == copyBinary:
		err = errCopy("row field count is %d, expected %d", got, want)
	case got > want:
		err = errCopy("extra data after last expected column")
	default:
		err = errCopy("missing data for column %s", quoteInput(cr.columnName(got)))
	}
	where := copyContext(cr.table, cr.lineNo)
	if cr.format != copyBinary {
		where += ": " + quoteInput(string(cr.line))
	}
	return withWhere(err, where)
}

// next parses the next row into out and bounds.
func (cr *CopyReader) next() error {
	if cr.err != nil {
		return cr.err
	}
	var err error
	if cr.format == copyBinary {
		err = cr.nextBinary()
	} else {
		err = cr.nextLine()
	}
	if err != nil {
		cr.err = err
	}
	return err
}

func (cr *CopyReader) nextLine() error {
	for {
		if cr.ended {
			return io.EOF
		}
		atEnd, err := cr.readLine()
		if err != nil {
			return withWhere(err, copyContext(cr.table, cr.lineNo+1))
		}
		if atEnd {
			cr.ended = true
			cr.drain()
			if len(cr.line) == 0 {
				return io.EOF
			}
		}
		cr.lineNo++
		header := cr.text.Header
		if cr.format == copyCSV {
			header = cr.csv.Header
		}
		if header && cr.lineNo == 1 {
			continue
		}
		if cr.format == copyCSV {
			err = cr.splitCSV()
		} else {
			cr.splitText()
		}
		if err != nil {
			return withWhere(err, copyContext(cr.table, cr.lineNo)+": "+quoteInput(string(cr.line)))
		}
		return nil
	}
}

// drain discards the rest of the stream after the end of the data.
func (cr *CopyReader) drain() {
	cr.pos = cr.end
	if !cr.srcEOF {
		_, _ = io.Copy(io.Discard, cr.r)
		cr.srcEOF = true
	}
}

// ensure buffers at least n unconsumed bytes if the stream has them,
// moving the unconsumed tail to the front of buf first, and returns how
// many are buffered. Read errors other than io.EOF are returned.
func (cr *CopyReader) ensure(n int) (int, error) {
	for cr.end-cr.pos < n && !cr.srcEOF {
		if cr.buf == nil {
			cr.buf = make([]byte, copyReadSize)
		}
		if cr.pos > 0 {
			cr.end = copy(cr.buf, cr.buf[cr.pos:cr.end])
			cr.pos = 0
		}
		m, err := cr.r.Read(cr.buf[cr.end:])
		cr.end += m
		if err == io.EOF {
			cr.srcEOF = true
			break
		}
		if err != nil {
			return cr.end - cr.pos, err
		}
	}
	return cr.end - cr.pos, nil
}

// fill reports whether at least one unconsumed byte is buffered, reading
// more if needed.
func (cr *CopyReader) fill() (bool, error) {
	if cr.pos < cr.end {
		return true, nil
	}
	n, err := cr.ensure(1)
	return n > 0, err
}

// peek returns the next input byte without consuming it; ok is false at the
// end of the stream.
func (cr *CopyReader) peek() (c byte, ok bool, err error) {
	ok, err = cr.fill()
	if !ok {
		return 0, false, err
	}
	return cr.buf[cr.pos], true, nil
}

// readLine reads the next raw line into cr.line, as Postgres'
// CopyReadLineText does: it finds the line end (newline, carriage return or
// both, consistently), respecting backslash escapes (text) or quotes (CSV),
// and detects the `\.` marker. atEnd reports that the data ended after
// this line, which may then be empty (no row) or not (a last row).
func (cr *CopyReader) readLine() (atEnd bool, err error) {
	if line, ok := cr.fastLine(); ok {
		cr.line = line
		return false, nil
	}
	csv := cr.format == copyCSV
	var quote, escape byte
	useEscape := false
	if csv {
		quote, escape = cr.csv.Quote, cr.csv.Escape
		// When the escape is the quote, a quote simply toggles; Postgres
		// disables escape tracking for line splitting in that case.
		useEscape = escape != quote
	}
	cr.lineOwn = cr.lineOwn[:0]
	inQuote, lastWasEsc, first := false, false, true
	defer func() { cr.line = cr.lineOwn }()
	for {
		c, ok, err := cr.peek()
		if err != nil {
			return false, err
		}
		if !ok {
			return true, nil
		}
		cr.pos++
		if csv {
			isEsc := useEscape && c == escape
			if inQuote && isEsc {
				lastWasEsc = !lastWasEsc
			}
			if c == quote && !lastWasEsc {
				inQuote = !inQuote
			}
			if !isEsc {
				lastWasEsc = false
			}
		}
		if c == '\r' && !inQuote {
			return false, cr.crLineEnd(csv)
		}
		if c == '\n' && !inQuote {
			if cr.eol == eolCR || cr.eol == eolCRNL {
				if csv {
					return false, errCopy("unquoted newline found in data").withHint("Use quoted CSV field to represent newline.")
				}
				return false, errCopy("literal newline found in data").withHint(`Use "\n" to represent newline.`)
			}
			cr.eol = eolNL
			return false, nil
		}
		if c == '\\' && (!csv || first) {
			end, err := cr.endMarker(csv)
			if err != nil || end {
				return end, err
			}
			if !csv {
				// A backslash quotes the next byte, even a newline, so
				// that `\\.` is data and not the marker.
				c2, ok, err := cr.peek()
				if err != nil {
					return false, err
				}
				cr.lineOwn = append(cr.lineOwn, '\\')
				if !ok {
					return true, nil
				}
				cr.pos++
				cr.lineOwn = append(cr.lineOwn, c2)
				first = false
				continue
			}
		}
		first = false
		cr.lineOwn = append(cr.lineOwn, c)
	}
}

// crLineEnd handles a carriage return that ends a line.
func (cr *CopyReader) crLineEnd(csv bool) error {
	crErr := func() error {
		if csv {
			return errCopy("unquoted carriage return found in data").withHint("Use quoted CSV field to represent carriage return.")
		}
		return errCopy("literal carriage return found in data").withHint(`Use "\r" to represent carriage return.`)
	}
	switch cr.eol {
	case eolUnknown:
		c, ok, err := cr.peek()
		if err != nil {
			return err
		}
		if ok && c == '\n' {
			cr.pos++
			cr.eol = eolCRNL
		} else {
			cr.eol = eolCR
		}
	case eolCRNL:
		c, ok, err := cr.peek()
		if err != nil {
			return err
		}
		if !ok || c != '\n' {
			return crErr()
		}
		cr.pos++
	case eolNL:
		return crErr()
	}
	return nil
}

// endMarker is called after a backslash that may start the `\.` marker (any
// unescaped backslash in text format, one at the start of a line in CSV).
// It consumes the marker and reports true if it is one. Text format rejects
// a `\.` that is not followed by the line end; CSV takes it as data. It
// looks ahead without consuming until it has decided.
func (cr *CopyReader) endMarker(csv bool) (bool, error) {
	n, err := cr.ensure(3)
	if err != nil {
		return false, err
	}
	ahead := cr.buf[cr.pos : cr.pos+n]
	if n == 0 || ahead[0] != '.' {
		return false, nil
	}
	k := 1
	// The stream's end reads as a NUL byte, as in Postgres.
	next := func() byte {
		k++
		if k-1 < len(ahead) {
			return ahead[k-1]
		}
		return 0
	}
	notEnd := func(msg string) (bool, error) {
		if csv {
			return false, nil // the bytes are data after all
		}
		return false, errCopy("%s", msg)
	}
	if cr.eol == eolCRNL {
		switch c := next(); {
		case c == '\n' && csv:
			return false, nil
		case c == '\n':
			return false, errCopy("end-of-copy marker does not match previous newline style")
		case c != '\r':
			return notEnd("end-of-copy marker corrupt")
		}
	}
	c := next()
	if c != '\r' && c != '\n' {
		return notEnd("end-of-copy marker corrupt")
	}
	if (cr.eol == eolNL && c != '\n') || (cr.eol == eolCRNL && c != '\n') || (cr.eol == eolCR && c != '\r') {
		return false, errCopy("end-of-copy marker does not match previous newline style")
	}
	cr.pos += min(k, n)
	return true, nil
}

// fastLine returns the next line without copying when it lies whole in
// the buffer, ends in a newline and has nothing that needs readLine's
// state machine (no backslash, carriage return or CSV quote).
func (cr *CopyReader) fastLine() ([]byte, bool) {
	if cr.eol == eolCR || cr.eol == eolCRNL {
		return nil, false
	}
	data := cr.buf[cr.pos:cr.end]
	i := bytes.IndexByte(data, '\n')
	if i < 0 {
		return nil, false
	}
	line := data[:i]
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, false
	}
	switch cr.format {
	case copyText:
		if bytes.IndexByte(line, '\\') >= 0 {
			return nil, false
		}
	case copyCSV:
		if bytes.IndexByte(line, cr.csv.Quote) >= 0 || (len(line) > 0 && line[0] == '\\') {
			return nil, false
		}
	}
	cr.pos += i + 1
	cr.eol = eolNL
	return line, true
}

// splitText splits cr.line into fields as Postgres' CopyReadAttributesText
// does: fields end at unescaped delimiters; a field whose raw text equals
// the NULL string is NULL; otherwise \b \f \n \r \t \v, octal \ooo, hex \xhh
// and \<other> (that character) are undone.
func (cr *CopyReader) splitText() {
	line, delim, null := cr.line, cr.text.Delimiter, cr.text.Null
	cr.out, cr.bounds = cr.out[:0], cr.bounds[:0]
	i := 0
	for {
		start, outStart := i, len(cr.out)
		found := false
		for i < len(line) {
			c := line[i]
			i++
			if c == delim {
				found = true
				break
			}
			if c == '\\' {
				if i >= len(line) {
					break
				}
				c = line[i]
				i++
				switch c {
				case '0', '1', '2', '3', '4', '5', '6', '7':
					v := int(c - '0')
					for k := 0; k < 2 && i < len(line) && line[i] >= '0' && line[i] <= '7'; k++ {
						v = v<<3 + int(line[i]-'0')
						i++
					}
					c = byte(v)
				case 'x':
					if i < len(line) {
						if h, ok := unhex(line[i]); ok {
							v := h
							i++
							if i < len(line) {
								if h2, ok := unhex(line[i]); ok {
									v = v<<4 | h2
									i++
								}
							}
							c = byte(v)
						}
					}
				case 'b':
					c = '\b'
				case 'f':
					c = '\f'
				case 'n':
					c = '\n'
				case 'r':
					c = '\r'
				case 't':
					c = '\t'
				case 'v':
					c = '\v'
				}
			}
			cr.out = append(cr.out, c)
		}
		rawEnd := i
		if found {
			rawEnd--
		}
		if string(line[start:rawEnd]) == null {
			cr.out = cr.out[:outStart]
			cr.bounds = append(cr.bounds, -1, -1)
		} else {
			cr.bounds = append(cr.bounds, outStart, len(cr.out))
		}
		if !found {
			return
		}
	}
}

// splitCSV splits cr.line into fields as Postgres' CopyReadAttributesCSV
// does: quoted sections may start anywhere in a field, escape+quote and
// escape+escape inside quotes stand for the second character, and only an
// unquoted field whose raw text equals the NULL string is NULL.
func (cr *CopyReader) splitCSV() error {
	line, o := cr.line, &cr.csv
	cr.out, cr.bounds = cr.out[:0], cr.bounds[:0]
	i := 0
	for {
		start, outStart := i, len(cr.out)
		found, sawQuote := false, false
		end := i
	field:
		for {
			// Not in quotes.
			for {
				end = i
				if i >= len(line) {
					break field
				}
				c := line[i]
				i++
				if c == o.Delimiter {
					found = true
					break field
				}
				if c == o.Quote {
					sawQuote = true
					break
				}
				cr.out = append(cr.out, c)
			}
			// In quotes.
			for {
				if i >= len(line) {
					return errCopy("unterminated CSV quoted field")
				}
				c := line[i]
				i++
				if c == o.Escape && i < len(line) && (line[i] == o.Escape || line[i] == o.Quote) {
					cr.out = append(cr.out, line[i])
					i++
					continue
				}
				if c == o.Quote {
					break
				}
				cr.out = append(cr.out, c)
			}
		}
		if !sawQuote && string(line[start:end]) == o.Null {
			cr.out = cr.out[:outStart]
			cr.bounds = append(cr.bounds, -1, -1)
		} else {
			cr.bounds = append(cr.bounds, outStart, len(cr.out))
		}
		if !found {
			return nil
		}
	}
}

// readFull reads exactly len(p) bytes; ok is false at a clean end of stream
// before the first byte. A stream that ends after some of the bytes is the
// COPY format error partial.
func (cr *CopyReader) readFull(p []byte, partial string) (ok bool, err error) {
	for n := 0; n < len(p); {
		more, err := cr.fill()
		if err != nil {
			return false, err
		}
		if !more {
			if n == 0 {
				return false, nil
			}
			return false, errCopy("%s", partial)
		}
		k := copy(p[n:], cr.buf[cr.pos:cr.end])
		cr.pos += k
		n += k
	}
	return true, nil
}

// nextBinary reads one tuple of binary COPY into out and bounds.
func (cr *CopyReader) nextBinary() error {
	var w [11]byte
	const eofData = "unexpected EOF in COPY data"
	if !cr.headerRead {
		const sig = "COPY file signature not recognized"
		if ok, err := cr.readFull(w[:11], sig); err != nil || !ok || string(w[:11]) != copyBinarySignature {
			return firstErr(err, errCopy(sig))
		}
		const noFlags = "invalid COPY file header (missing flags)"
		if ok, err := cr.readFull(w[:4], noFlags); err != nil || !ok {
			return firstErr(err, errCopy(noFlags))
		}
		flags := binary.BigEndian.Uint32(w[:4])
		if flags&(1<<16) != 0 {
			return errCopy("invalid COPY file header (WITH OIDS)")
		}
		if flags>>17 != 0 {
			return errCopy("unrecognized critical flags in COPY file header")
		}
		const noLength = "invalid COPY file header (missing length)"
		if ok, err := cr.readFull(w[:4], noLength); err != nil || !ok {
			return firstErr(err, errCopy(noLength))
		}
		const wrongLength = "invalid COPY file header (wrong length)"
		for skip := binary.BigEndian.Uint32(w[:4]); skip > 0; {
			k := min(skip, 11)
			if ok, err := cr.readFull(w[:k], wrongLength); err != nil || !ok {
				return firstErr(err, errCopy(wrongLength))
			}
			skip -= k
		}
		cr.headerRead = true
	}
	ok, err := cr.readFull(w[:2], eofData)
	if err != nil {
		return err
	}
	if !ok {
		return io.EOF // end of stream without a trailer, which Postgres accepts
	}
	count := int16(binary.BigEndian.Uint16(w[:2]))
	if count == -1 {
		var b [1]byte
		if ok, err := cr.readFull(b[:], eofData); err != nil || ok {
			return firstErr(err, errCopy("received copy data after EOF marker"))
		}
		return io.EOF
	}
	if count < 0 {
		return errCopy("row field count is %d, expected a count >= 0", count)
	}
	cr.lineNo++
	cr.out, cr.bounds = cr.out[:0], cr.bounds[:0]
	for f := 0; f < int(count); f++ {
		if ok, err := cr.readFull(w[:4], eofData); err != nil || !ok {
			return firstErr(err, errCopy(eofData))
		}
		n := int32(binary.BigEndian.Uint32(w[:4]))
		if n == -1 {
			cr.bounds = append(cr.bounds, -1, -1)
			continue
		}
		if n < -1 {
			return errCopy("invalid field size")
		}
		start := len(cr.out)
		// Grow out by at most what arrives, so a hostile length cannot
		// allocate more than the stream actually carries.
		for need := int(n); need > 0; {
			more, err := cr.fill()
			if err != nil {
				return err
			}
			if !more {
				return errCopy(eofData)
			}
			k := min(need, cr.end-cr.pos)
			cr.out = append(cr.out, cr.buf[cr.pos:cr.pos+k]...)
			cr.pos += k
			need -= k
		}
		cr.bounds = append(cr.bounds, start, len(cr.out))
	}
	return nil
}

func firstErr(err error, otherwise *Error) error {
	if err != nil {
		return err
	}
	return otherwise
}
