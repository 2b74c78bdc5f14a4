package pgrepr

import (
	"encoding/binary"
	"strings"

	"github.com/shardtail/shardtail/row"
)

// TextOptions are the options of COPY's text format. Start from
// DefaultTextOptions: the zero value is not valid.
type TextOptions struct {
	// Delimiter separates columns (DELIMITER); default tab.
	Delimiter byte
	// Null is the text that stands for NULL (NULL); default `\N`. It is
	// compared with a field's raw text, before backslash escapes are undone.
	Null string
	// Header (HEADER): COPY TO writes a line of column names first; COPY
	// FROM skips the first line.
	Header bool
}

// DefaultTextOptions returns Postgres' defaults for FORMAT text.
func DefaultTextOptions() TextOptions { return TextOptions{Delimiter: '\t', Null: `\N`} }

// Validate reports the first option Postgres would reject, with its error.
func (o TextOptions) Validate() error {
	if err := validateDelimiter(o.Delimiter, o.Null); err != nil {
		return err
	}
	if strings.IndexByte(`\.abcdefghijklmnopqrstuvwxyz0123456789`, o.Delimiter) >= 0 {
		return errCopyOption("22023", `COPY delimiter cannot be "`+string(o.Delimiter)+`"`)
	}
	return nil
}

// CSVOptions are the options of COPY's CSV format. Start from
// DefaultCSVOptions: the zero value is not valid.
type CSVOptions struct {
	// Delimiter separates columns (DELIMITER); default ','.
	Delimiter byte
	// Quote encloses fields that need it (QUOTE); default '"'.
	Quote byte
	// Escape precedes a quote (or itself) inside a quoted field (ESCAPE);
	// default the same as Quote, so quotes are doubled. Postgres defaults
	// ESCAPE to QUOTE, so a caller that sets Quote alone must set Escape too.
	Escape byte
	// Null is the text that stands for NULL (NULL); default "". It is
	// written unquoted; a non-NULL value that equals it is quoted; in COPY
	// FROM only an unquoted field that equals it is NULL.
	Null string
	// Header (HEADER): COPY TO writes a line of column names first; COPY
	// FROM skips the first line.
	Header bool
}

// DefaultCSVOptions returns Postgres' defaults for FORMAT csv.
func DefaultCSVOptions() CSVOptions { return CSVOptions{Delimiter: ',', Quote: '"', Escape: '"'} }

// Validate reports the first option Postgres would reject, with its error.
func (o CSVOptions) Validate() error {
	if err := validateDelimiter(o.Delimiter, o.Null); err != nil {
		return err
	}
	if o.Quote == 0 || o.Quote >= 0x80 {
		return errCopyOption("0A000", "COPY quote must be a single one-byte character")
	}
	if o.Escape == 0 || o.Escape >= 0x80 {
		return errCopyOption("0A000", "COPY escape must be a single one-byte character")
	}
	if o.Delimiter == o.Quote {
		return errCopyOption("22023", "COPY delimiter and quote must be different")
	}
	if strings.IndexByte(o.Null, o.Quote) >= 0 {
		return errCopyOption("22023", "CSV quote character must not appear in the NULL specification")
	}
	return nil
}

func validateDelimiter(delim byte, null string) error {
	switch {
	case delim == 0 || delim >= 0x80:
		return errCopyOption("0A000", "COPY delimiter must be a single one-byte character")
	case delim == '\r' || delim == '\n':
		return errCopyOption("22023", "COPY delimiter cannot be newline or carriage return")
	case strings.ContainsAny(null, "\r\n"):
		return errCopyOption("22023", "COPY null representation cannot use newline or carriage return")
	case strings.IndexByte(null, delim) >= 0:
		return errCopyOption("22023", "COPY delimiter must not appear in the NULL specification")
	}
	return nil
}

// textual reports whether t's text form can contain arbitrary bytes: only
// text, bytea (whose hex form starts with a backslash) and jsonb can.
func textual(t row.Type) bool {
	return t == row.TypeText || t == row.TypeBytea || t == row.TypeJSONB
}

// plainByte reports whether c can appear in the text form of a non-textual
// type: digits, letters (NaN, Infinity, BC, hex, t/f), and "-+.: ". A
// delimiter or quote that is not plain never needs escaping or quoting in
// those values, so the writers skip scanning them.
func plainByte(c byte) bool {
	return isDigit(c) || isAlpha(c) || c == '-' || c == '+' || c == '.' || c == ':' || c == ' '
}

// AppendCopyTextRow appends one row of COPY TO's default text format: the
// columns' text forms separated by tabs, `\N` for NULL, backslash escapes
// for backslash, tab, newline, carriage return, backspace, form feed and
// vertical tab, and a terminating newline. types gives each column's type.
func AppendCopyTextRow(buf []byte, types []row.Type, r row.Row) []byte {
	return appendCopyTextRow(buf, types, r, '\t', `\N`)
}

// AppendCopyTextRowOptions is AppendCopyTextRow with a DELIMITER and NULL
// (opts must be valid; Header is the caller's business, see
// AppendCopyTextHeader).
func AppendCopyTextRowOptions(buf []byte, types []row.Type, r row.Row, opts TextOptions) []byte {
	return appendCopyTextRow(buf, types, r, opts.Delimiter, opts.Null)
}

func appendCopyTextRow(buf []byte, types []row.Type, r row.Row, delim byte, null string) []byte {
	scanAll := plainByte(delim)
	for i, d := range r {
		if i > 0 {
			buf = append(buf, delim)
		}
		buf = appendCopyTextField(buf, types[i], d, delim, null, scanAll)
	}
	return append(buf, '\n')
}

// AppendCopyTextField appends one column of a COPY text row, as
// AppendCopyTextRowOptions writes it between two delimiters: a caller that
// holds a row's columns in parts (the fast path's snapshot rows: mz_diff
// apart from the update's row) encodes them without joining them first.
func AppendCopyTextField(buf []byte, t row.Type, d row.Datum, opts TextOptions) []byte {
	return appendCopyTextField(buf, t, d, opts.Delimiter, opts.Null, plainByte(opts.Delimiter))
}

// appendCopyTextField appends d's COPY text; scanAll is plainByte(delim).
func appendCopyTextField(buf []byte, t row.Type, d row.Datum, delim byte, null string, scanAll bool) []byte {
	if d == nil {
		return append(buf, null...)
	}
	start := len(buf)
	buf = AppendText(buf, t, d)
	if scanAll || textual(t) {
		buf = escapeCopyText(buf, start, delim)
	}
	return buf
}

// AppendCopyTextHeader appends the header line COPY TO writes with HEADER in
// text format: the column names, escaped like values.
func AppendCopyTextHeader(buf []byte, names []string, opts TextOptions) []byte {
	for i, n := range names {
		if i > 0 {
			buf = append(buf, opts.Delimiter)
		}
		start := len(buf)
		buf = append(buf, n...)
		buf = escapeCopyText(buf, start, opts.Delimiter)
	}
	return append(buf, '\n')
}

// copyTextEscape returns the character that follows the backslash when c
// must be escaped in COPY text format (Postgres' CopyAttributeOutText), or 0.
func copyTextEscape(c, delim byte) byte {
	if c < 0x20 {
		switch c {
		case '\b':
			return 'b'
		case '\f':
			return 'f'
		case '\n':
			return 'n'
		case '\r':
			return 'r'
		case '\t':
			return 't'
		case '\v':
			return 'v'
		}
		if c == delim {
			return c
		}
		return 0
	}
	if c == '\\' || c == delim {
		return c
	}
	return 0
}

// Word-at-a-time constants of copyTextClean.
const (
	swarOnes  = 0x0101010101010101
	swarHighs = 0x8080808080808080
)

// copyTextClean reports whether no byte of v needs a backslash in COPY
// text format: none is a control character, a backslash or delim. It tests
// eight bytes at a time, because it runs over every byte of every text
// value of a COPY snapshot and almost none needs escaping. (x - ones*n) &^ x
// & highs is nonzero exactly when some byte of x is below n (n <= 0x80),
// which with x ^ ones*c tests for a byte equal to c.
func copyTextClean(v []byte, delim byte) bool {
	less := func(x, n uint64) bool { return (x-swarOnes*n)&^x&swarHighs != 0 }
	bs, d := uint64(swarOnes*'\\'), swarOnes*uint64(delim)
	for len(v) >= 8 {
		x := binary.LittleEndian.Uint64(v)
		if less(x, 0x20) || less(x^bs, 1) || less(x^d, 1) {
			return false
		}
		v = v[8:]
	}
	for _, c := range v {
		if c < 0x20 || c == '\\' || c == delim {
			return false
		}
	}
	return true
}

// escapeCopyText escapes buf[start:] in place for COPY text format. It
// counts the escapes first and, if there are any, grows buf once and moves
// the bytes backwards, so no scratch buffer is needed.
func escapeCopyText(buf []byte, start int, delim byte) []byte {
	if copyTextClean(buf[start:], delim) {
		return buf
	}
	extra := countCopyTextEscapes(buf[start:], delim)
	if extra == 0 {
		return buf // a control character that is not escaped
	}
	n := len(buf)
	buf = append(buf, make([]byte, extra)...)
	w := len(buf)
	for r := n - 1; r >= start; r-- {
		c := buf[r]
		if e := copyTextEscape(c, delim); e != 0 {
			w -= 2
			buf[w], buf[w+1] = '\\', e
		} else {
			w--
			buf[w] = c
		}
	}
	return buf
}

// countCopyTextEscapes returns how many bytes of v COPY text format escapes.
func countCopyTextEscapes(v []byte, delim byte) int {
	n := 0
	for _, c := range v {
		if copyTextEscape(c, delim) != 0 {
			n++
		}
	}
	return n
}

// AppendCopyCSVRow appends one row of COPY TO's CSV format (opts must be
// valid): NULL as opts.Null unquoted; a value quoted when it contains the
// delimiter, the quote, a newline or a carriage return, when it equals
// opts.Null (so the empty string is ""), or when it is `\.` alone in a
// one-column row; inside quotes, quote and escape characters are preceded
// by opts.Escape. The line ends with a newline.
func AppendCopyCSVRow(buf []byte, types []row.Type, r row.Row, opts CSVOptions) []byte {
	single := len(r) == 1
	scanAll := plainByte(opts.Delimiter) || plainByte(opts.Quote)
	for i, d := range r {
		if i > 0 {
			buf = append(buf, opts.Delimiter)
		}
		if d == nil {
			buf = append(buf, opts.Null...)
			continue
		}
		start := len(buf)
		buf = AppendText(buf, types[i], d)
		buf = quoteCSV(buf, start, &opts, single, scanAll || textual(types[i]))
	}
	return append(buf, '\n')
}

// AppendCopyCSVHeader appends the header line COPY TO writes with HEADER in
// CSV format: the column names, quoted by the rules for values.
func AppendCopyCSVHeader(buf []byte, names []string, opts CSVOptions) []byte {
	for i, n := range names {
		if i > 0 {
			buf = append(buf, opts.Delimiter)
		}
		start := len(buf)
		buf = append(buf, n...)
		buf = quoteCSV(buf, start, &opts, len(names) == 1, true)
	}
	return append(buf, '\n')
}

// quoteCSV quotes buf[start:] in place if Postgres' CopyAttributeOutCSV
// would. scan says whether the value may contain special bytes at all.
func quoteCSV(buf []byte, start int, o *CSVOptions, single, scan bool) []byte {
	v := buf[start:]
	quote := string(v) == o.Null || (single && string(v) == `\.`)
	if !quote && scan {
		for _, c := range v {
			if c == o.Delimiter || c == o.Quote || c == '\n' || c == '\r' {
				quote = true
				break
			}
		}
	}
	if !quote {
		return buf
	}
	extra := 2
	for _, c := range v {
		if c == o.Quote || c == o.Escape {
			extra++
		}
	}
	n := len(buf)
	buf = append(buf, make([]byte, extra)...)
	w := len(buf) - 1
	buf[w] = o.Quote
	for r := n - 1; r >= start; r-- {
		c := buf[r]
		w--
		buf[w] = c
		if c == o.Quote || c == o.Escape {
			w--
			buf[w] = o.Escape
		}
	}
	buf[w-1] = o.Quote
	return buf
}

// copyBinarySignature starts every binary COPY stream.
const copyBinarySignature = "PGCOPY\n\xff\r\n\x00"

// AppendCopyBinaryHeader appends binary COPY's header: the signature, a
// zero flags word and a zero-length header extension.
func AppendCopyBinaryHeader(buf []byte) []byte {
	buf = append(buf, copyBinarySignature...)
	return append(buf, 0, 0, 0, 0, 0, 0, 0, 0)
}

// AppendCopyBinaryRow appends one tuple of binary COPY: an int16 field
// count, then each field as an int32 length (-1 for NULL) and its binary
// format.
func AppendCopyBinaryRow(buf []byte, types []row.Type, r row.Row) []byte {
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(r)))
	for i, d := range r {
		buf = AppendField(buf, types[i], d, FormatBinary)
	}
	return buf
}

// AppendCopyBinaryTrailer appends binary COPY's trailer, a field count of -1.
func AppendCopyBinaryTrailer(buf []byte) []byte {
	return append(buf, 0xff, 0xff)
}
