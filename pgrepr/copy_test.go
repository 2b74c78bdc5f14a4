package pgrepr

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/shardtail/shardtail/row"
)

func TestCopyOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		code string
	}{
		{"text default", DefaultTextOptions().Validate(), ""},
		{"csv default", DefaultCSVOptions().Validate(), ""},
		{"zero text", TextOptions{}.Validate(), "0A000"},
		{"zero csv", CSVOptions{}.Validate(), "0A000"},
		{"newline delimiter", TextOptions{Delimiter: '\n'}.Validate(), "22023"},
		{"backslash delimiter", TextOptions{Delimiter: '\\', Null: "x"}.Validate(), "22023"},
		{"letter delimiter", TextOptions{Delimiter: 'a', Null: "x"}.Validate(), "22023"},
		{"delimiter in null", TextOptions{Delimiter: ',', Null: "a,b"}.Validate(), "22023"},
		{"newline in null", TextOptions{Delimiter: ',', Null: "a\nb"}.Validate(), "22023"},
		{"high delimiter", TextOptions{Delimiter: 0xe9}.Validate(), "0A000"},
		{"csv letter delimiter", CSVOptions{Delimiter: 'a', Quote: '"', Escape: '"'}.Validate(), ""},
		{"quote is delimiter", CSVOptions{Delimiter: ',', Quote: ',', Escape: ','}.Validate(), "22023"},
		{"quote in null", CSVOptions{Delimiter: ',', Quote: '"', Escape: '"', Null: `"`}.Validate(), "22023"},
		{"no escape", CSVOptions{Delimiter: ',', Quote: '"'}.Validate(), "0A000"},
	} {
		var pe *Error
		switch {
		case c.code == "" && c.err != nil:
			t.Errorf("%s: %v", c.name, c.err)
		case c.code != "" && (!errors.As(c.err, &pe) || pe.SQLState() != c.code || !errors.Is(c.err, ErrCopy)):
			t.Errorf("%s: got %v, want %s", c.name, c.err, c.code)
		}
	}
	if _, err := NewCopyTextReader(strings.NewReader(""), TextOptions{}); err == nil {
		t.Error("NewCopyTextReader accepted invalid options")
	}
}

func TestCopyReaderContext(t *testing.T) {
	types := []row.Type{row.TypeInt4, row.TypeText}
	cr, _ := NewCopyTextReader(strings.NewReader("1\ta\n2\tb\nx\tc\n"), DefaultTextOptions())
	cr.Describe("t", []string{"id", "name"})
	var err error
	for err == nil {
		_, err = cr.ReadRow(types, nil)
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.SQLState() != "22P02" || pe.Where() != `COPY t, line 3, column id: "x"` || cr.Line() != 3 {
		t.Errorf("got %v where %q line %d", err, pe.Where(), cr.Line())
	}
	if !errors.Is(err, ErrSyntax) {
		t.Errorf("%v is not ErrSyntax", err)
	}

	cr, _ = NewCopyTextReader(strings.NewReader("1\n"), DefaultTextOptions())
	cr.Describe("t", []string{"id", "name"})
	_, err = cr.ReadRow(types, nil)
	if !errors.As(err, &pe) || pe.Error() != `missing data for column "name"` || pe.Where() != `COPY t, line 1: "1"` {
		t.Errorf("got %v where %q", err, pe.Where())
	}

	// A row that does not convert leaves the reader on the next row.
	if _, err := cr.Read(); err != io.EOF {
		t.Errorf("after a conversion error: %v, want EOF", err)
	}
	// Errors in the stream itself are sticky.
	cr, _ = NewCopyCSVReader(strings.NewReader("\"a\n"), DefaultCSVOptions())
	_, err = cr.Read()
	if _, err2 := cr.Read(); err == nil || err2 != err {
		t.Errorf("stream error %v, then %v", err, err2)
	}
}

func TestCopyReaderNullInput(t *testing.T) {
	types := []row.Type{row.TypeText, row.TypeInt8}
	cr, _ := NewCopyCSVReader(strings.NewReader("\"\",\n"), DefaultCSVOptions())
	r, err := cr.ReadRow(types, nil)
	if err != nil || r[0] != "" || r[1] != nil {
		t.Errorf("got %#v, %v", r, err)
	}
	if _, err := cr.ReadRow(types, nil); err != io.EOF {
		t.Errorf("got %v, want EOF", err)
	}
	if _, err := cr.Read(); err != io.EOF {
		t.Errorf("got %v, want EOF again", err)
	}
}

func TestCopyReaderLongLines(t *testing.T) {
	long := strings.Repeat("é☃x", 50000) // well over the read buffer
	types := []row.Type{row.TypeText, row.TypeText}
	rows := []row.Row{{long, "a\\b"}, {"c", long + "\n\t" + long}, {long, nil}}
	var text, csv []byte
	for _, r := range rows {
		text = AppendCopyTextRow(text, types, r)
		csv = AppendCopyCSVRow(csv, types, r, DefaultCSVOptions())
	}
	cr, _ := NewCopyTextReader(bytes.NewReader(text), DefaultTextOptions())
	sameRows(t, readAllRows(t, cr, types), rows)
	cr, _ = NewCopyCSVReader(iotest.HalfReader(bytes.NewReader(csv)), DefaultCSVOptions())
	sameRows(t, readAllRows(t, cr, types), rows)
}

func TestCopyReaderDrainsAfterEndMarker(t *testing.T) {
	rest := &countingReader{r: strings.NewReader(strings.Repeat("junk\n", 100000))}
	src := io.MultiReader(strings.NewReader("a\n\\.\n"), rest)
	cr, _ := NewCopyTextReader(src, DefaultTextOptions())
	got := readAllRows(t, cr, []row.Type{row.TypeText})
	if len(got) != 1 || got[0][0] != "a" {
		t.Errorf("got %v", got)
	}
	if rest.n != 500000 {
		t.Errorf("drained %d bytes, want all 500000", rest.n)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestCopyReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	cr, _ := NewCopyCSVReader(iotest.ErrReader(boom), DefaultCSVOptions())
	if _, err := cr.Read(); !errors.Is(err, boom) {
		t.Errorf("got %v, want boom", err)
	}
	br := NewCopyBinaryReader(io.MultiReader(strings.NewReader(copyBinarySignature), iotest.ErrReader(boom)))
	if _, err := br.Read(); !errors.Is(err, boom) {
		t.Errorf("binary: got %v, want boom", err)
	}
	// A read error with a SQLSTATE (the client's CopyFail, 57014) keeps
	// it: the client gets it, not XX000.
	failed := codedError{"57014", "COPY from stdin failed: gave up"}
	tr, _ := NewCopyTextReader(io.MultiReader(strings.NewReader("1\n"), iotest.ErrReader(failed)), DefaultTextOptions())
	tr.Describe("t", []string{"a"})
	if _, err := tr.Read(); err != nil {
		t.Fatal(err)
	}
	_, err := tr.Read()
	var coded interface{ SQLState() string }
	if !errors.As(err, &coded) || coded.SQLState() != "57014" || !errors.Is(err, failed) {
		t.Errorf("a read error of 57014: got %v (%T), want it with its SQLSTATE", err, err)
	}
}

// codedError is an error with a SQLSTATE from another package (pgwire's).
type codedError struct{ code, msg string }

func (e codedError) Error() string    { return e.msg }
func (e codedError) SQLState() string { return e.code }

func TestCopyBinaryReaderErrors(t *testing.T) {
	header := AppendCopyBinaryHeader(nil)
	tuple := AppendCopyBinaryRow(nil, []row.Type{row.TypeInt4}, row.Row{int32(1)})
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, c := range []struct {
		name string
		data []byte
		rows int
		msg  string // "" for a clean io.EOF
	}{
		{"empty", nil, 0, "COPY file signature not recognized"},
		{"bad signature", []byte("PGCOPY\n\xff\r\n\x01\x00\x00\x00\x00\x00\x00\x00\x00"), 0, "COPY file signature not recognized"},
		{"oids flag", cat([]byte(copyBinarySignature), []byte{0, 1, 0, 0, 0, 0, 0, 0}), 0, "invalid COPY file header (WITH OIDS)"},
		{"critical flag", cat([]byte(copyBinarySignature), []byte{0, 2, 0, 0, 0, 0, 0, 0}), 0, "unrecognized critical flags in COPY file header"},
		{"non-critical flag", cat([]byte(copyBinarySignature), []byte{0, 0, 0, 1, 0, 0, 0, 0}, tuple), 1, ""},
		{"header extension", cat([]byte(copyBinarySignature), []byte{0, 0, 0, 0, 0, 0, 0, 20}, make([]byte, 20), tuple, []byte{0xff, 0xff}), 1, ""},
		{"short extension", cat([]byte(copyBinarySignature), []byte{0, 0, 0, 0, 0, 0, 0, 20}, make([]byte, 5)), 0, "invalid COPY file header (wrong length)"},
		{"no trailer", cat(header, tuple, tuple), 2, ""},
		{"trailer", cat(header, tuple, []byte{0xff, 0xff}), 1, ""},
		{"data after trailer", cat(header, tuple, []byte{0xff, 0xff, 0}), 1, "received copy data after EOF marker"},
		{"truncated field", cat(header, tuple[:len(tuple)-1]), 0, "unexpected EOF in COPY data"},
		{"truncated count", cat(header, tuple[:1]), 0, "unexpected EOF in COPY data"},
		{"bad size", cat(header, []byte{0, 1, 0xff, 0xff, 0xff, 0xfe}), 0, "invalid field size"},
		{"huge size", cat(header, []byte{0, 1, 0x7f, 0xff, 0xff, 0xff, 1, 2}), 0, "unexpected EOF in COPY data"},
		{"wrong count", cat(header, AppendCopyBinaryRow(nil, []row.Type{row.TypeInt4, row.TypeInt4}, row.Row{int32(1), nil})), 0, "row field count is 2, expected 1"},
		{"bad value", cat(header, []byte{0, 1, 0, 0, 0, 2, 0, 1}), 0, "incorrect binary data format for type integer: expected 4 bytes, got 2"},
	} {
		cr := NewCopyBinaryReader(iotest.HalfReader(bytes.NewReader(c.data)))
		n := 0
		var err error
		for {
			if _, err = cr.ReadRow([]row.Type{row.TypeInt4}, nil); err != nil {
				break
			}
			n++
		}
		if n != c.rows || (c.msg == "" && err != io.EOF) || (c.msg != "" && (err == nil || err.Error() != c.msg)) {
			t.Errorf("%s: %d rows, %v; want %d rows, %q", c.name, n, err, c.rows, c.msg)
		}
	}
}

func TestCopyCSVQuoting(t *testing.T) {
	types := []row.Type{row.TypeText, row.TypeText}
	o := DefaultCSVOptions()
	for _, c := range []struct {
		r    row.Row
		want string
	}{
		{row.Row{"a", "b"}, "a,b\n"},
		{row.Row{"", nil}, "\"\",\n"},
		{row.Row{"a,b", "q\"q"}, "\"a,b\",\"q\"\"q\"\n"},
		{row.Row{"line\nbreak", "cr\r"}, "\"line\nbreak\",\"cr\r\"\n"},
		{row.Row{`\.`, " x "}, "\\., x \n"},
	} {
		if got := string(AppendCopyCSVRow(nil, types, c.r, o)); got != c.want {
			t.Errorf("%q: got %q, want %q", c.r, got, c.want)
		}
	}
	// A lone \. in a one-column row is quoted so it is not read as the end.
	if got := string(AppendCopyCSVRow(nil, types[:1], row.Row{`\.`}, o)); got != "\"\\.\"\n" {
		t.Errorf("single \\.: got %q", got)
	}
	// A non-default escape escapes itself and the quote, and nothing else.
	o2 := CSVOptions{Delimiter: ',', Quote: '"', Escape: '\\'}
	if got := string(AppendCopyCSVRow(nil, types, row.Row{`a"b\c`, `d\e`}, o2)); got != "\"a\\\"b\\\\c\",d\\e\n" {
		t.Errorf("escape: got %q", got)
	}
}

func TestCopyWritersDoNotAllocate(t *testing.T) {
	types := []row.Type{row.TypeInt8, row.TypeText, row.TypeNumeric, row.TypeTimestampTZ, row.TypeBool, row.TypeBytea}
	r := row.Row{int64(1700000000000), "tab\there", row.Numeric("-12.5"), row.TimestampTZ(1700000000123456), true, []byte{1, 2}}
	buf := make([]byte, 0, 4096)
	csv := DefaultCSVOptions()
	if a := testing.AllocsPerRun(100, func() {
		buf = AppendCopyTextRow(buf[:0], types, r)
		buf = AppendCopyCSVRow(buf, types, r, csv)
		buf = AppendCopyBinaryRow(buf, types, r)
	}); a != 0 {
		t.Errorf("COPY writers allocate %v times per row", a)
	}
}

// TestCopyUnusualDelimiters checks that a delimiter or quote that can occur
// in numbers and timestamps still escapes or quotes them.
func TestCopyUnusualDelimiters(t *testing.T) {
	types := []row.Type{row.TypeFloat8, row.TypeTimestampTZ, row.TypeUUID, row.TypeBool}
	r := row.Row{-1.5e-7, row.TimestampTZ(-62135596800000000 - 1), row.UUID{0xab}, true}
	for _, o := range []TextOptions{{Delimiter: '-', Null: "N"}, {Delimiter: ':', Null: "N"}, {Delimiter: ' ', Null: "N"}, {Delimiter: 'e', Null: "N"}} {
		data := AppendCopyTextRowOptions(nil, types, r, o)
		cr, err := NewCopyTextReader(bytes.NewReader(data), o)
		if err != nil {
			if o.Delimiter == 'e' {
				continue // Postgres forbids letters as text delimiters
			}
			t.Fatal(err)
		}
		sameRows(t, readAllRows(t, cr, types), []row.Row{r})
	}
	for _, o := range []CSVOptions{{Delimiter: '-', Quote: '"', Escape: '"'}, {Delimiter: ',', Quote: '.', Escape: '.'}, {Delimiter: 'e', Quote: 't', Escape: 't'}, {Delimiter: ' ', Quote: ':', Escape: '+'}} {
		if err := o.Validate(); err != nil {
			t.Fatal(err)
		}
		data := AppendCopyCSVRow(nil, types, r, o)
		cr, _ := NewCopyCSVReader(bytes.NewReader(data), o)
		sameRows(t, readAllRows(t, cr, types), []row.Row{r})
	}
}

// cleanByByte is copyTextClean's model: one byte at a time.
func cleanByByte(v []byte, delim byte) bool {
	for _, c := range v {
		if c < 0x20 || c == '\\' || c == delim {
			return false
		}
	}
	return true
}

// TestCopyTextClean checks the word-at-a-time scan against the byte model
// with every byte value at every position of values up to 17 bytes (two
// words and a tail), over clean backgrounds of low and high bytes.
func TestCopyTextClean(t *testing.T) {
	for _, delim := range []byte{'\t', ',', '|', 'x'} {
		for _, bg := range []byte{'a', 0x7f, 0x80, 0xff, 0x21} {
			for n := 1; n <= 17; n++ {
				for pos := range n {
					for c := range 256 {
						v := bytes.Repeat([]byte{bg}, n)
						if bg == delim {
							continue
						}
						v[pos] = byte(c)
						if got, want := copyTextClean(v, delim), cleanByByte(v, delim); got != want {
							t.Fatalf("copyTextClean(%q, %q) = %v, want %v", v, delim, got, want)
						}
					}
				}
			}
		}
	}
}

// FuzzCopyTextClean compares the word-at-a-time scan with the byte model.
func FuzzCopyTextClean(f *testing.F) {
	f.Add([]byte("plain text of some length"), byte('\t'))
	f.Add([]byte("back\\slash and tab\tin it"), byte(','))
	f.Fuzz(func(t *testing.T, v []byte, delim byte) {
		if got, want := copyTextClean(v, delim), cleanByByte(v, delim); got != want {
			t.Fatalf("copyTextClean(%q, %q) = %v, want %v", v, delim, got, want)
		}
	})
}
