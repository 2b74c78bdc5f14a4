package pgrepr

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/shardtail/shardtail/row"
)

// checkError fails unless err is an *Error with a plausible SQLSTATE.
func checkError(t *testing.T, err error) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) || len(pe.SQLState()) != 5 || pe.Error() == "" || errors.Unwrap(pe) == nil {
		t.Fatalf("error %T %v is not a well-formed *Error", err, err)
	}
}

// checkDatum checks that a parsed datum survives both formats unchanged
// and that its text form is a fixed point.
func checkDatum(t *testing.T, typ row.Type, d row.Datum) {
	t.Helper()
	if !row.CheckDatum(typ, d) || d == nil {
		t.Fatalf("datum %#v is not a %s", d, typ)
	}
	text := AppendText(nil, typ, d)
	d2, err := ParseText(typ, string(text))
	if err != nil || !sameDatum(d, d2) {
		t.Fatalf("ParseText(%s, %q) = %#v, %v; want %#v", typ, text, d2, err, d)
	}
	if again := AppendText(nil, typ, d2); !bytes.Equal(again, text) {
		t.Fatalf("text not a fixed point: %q then %q", text, again)
	}
	bin := AppendBinary(nil, typ, d)
	d3, err := ParseBinary(typ, bin)
	if err != nil || !sameDatum(d, d3) {
		t.Fatalf("ParseBinary(%s, %x) = %#v, %v; want %#v", typ, bin, d3, err, d)
	}
}

func addGoldenSeeds(f *testing.F, add func(typ uint8, in string, bin []byte)) {
	index := map[row.Type]uint8{}
	for i, typ := range allTypes {
		index[typ] = uint8(i)
	}
	vals, err := loadGoldenValues()
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range vals {
		add(index[v.typ], v.input, v.bin)
	}
}

func FuzzParseText(f *testing.F) {
	addGoldenSeeds(f, func(typ uint8, in string, _ []byte) { f.Add(typ, in) })
	f.Fuzz(func(t *testing.T, ti uint8, s string) {
		typ := allTypes[int(ti)%len(allTypes)]
		d, err := ParseText(typ, s)
		if err != nil {
			checkError(t, err)
			return
		}
		checkDatum(t, typ, d)
		if typ == row.TypeNumeric {
			// pgrepr's canonical form is persist's. (apd, behind
			// NormalizeNumeric, rejects exponents beyond ±100000 that
			// Postgres accepts, such as 0e100001.)
			if n, err := row.NormalizeNumeric(s); err == nil && n != d {
				t.Fatalf("NormalizeNumeric(%q) = %q, %v; ParseText gave %q", s, n, err, d)
			}
		}
	})
}

func FuzzParseBinary(f *testing.F) {
	addGoldenSeeds(f, func(typ uint8, _ string, bin []byte) {
		if bin != nil {
			f.Add(typ, bin)
		}
	})
	f.Fuzz(func(t *testing.T, ti uint8, b []byte) {
		typ := allTypes[int(ti)%len(allTypes)]
		d, err := ParseBinary(typ, b)
		if err != nil {
			checkError(t, err)
			return
		}
		checkDatum(t, typ, d)
		// Encoding what was decoded and decoding again is stable.
		b2 := AppendBinary(nil, typ, d)
		if b3 := AppendBinary(nil, typ, mustParseBinary(t, typ, b2)); !bytes.Equal(b2, b3) {
			t.Fatalf("binary not a fixed point: %x then %x", b2, b3)
		}
	})
}

func mustParseBinary(t *testing.T, typ row.Type, b []byte) row.Datum {
	t.Helper()
	d, err := ParseBinary(typ, b)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// fuzzCopyModes are the formats and options FuzzCopyReader picks from.
var fuzzCopyModes = []struct {
	text   *TextOptions
	csv    *CSVOptions
	binary bool
}{
	{text: &TextOptions{Delimiter: '\t', Null: `\N`}},
	{text: &TextOptions{Delimiter: '|', Null: "NULL", Header: true}},
	{text: &TextOptions{Delimiter: ' ', Null: ""}},
	{csv: &CSVOptions{Delimiter: ',', Quote: '"', Escape: '"'}},
	{csv: &CSVOptions{Delimiter: ';', Quote: '\'', Escape: '\\', Null: "NULL", Header: true}},
	{csv: &CSVOptions{Delimiter: '\t', Quote: '"', Escape: '\\', Null: `\N`}},
	{binary: true},
}

func newFuzzReader(t *testing.T, mode int, data []byte) *CopyReader {
	m := fuzzCopyModes[mode]
	var cr *CopyReader
	var err error
	switch {
	case m.text != nil:
		o := *m.text
		cr, err = NewCopyTextReader(bytes.NewReader(data), o)
	case m.csv != nil:
		o := *m.csv
		cr, err = NewCopyCSVReader(bytes.NewReader(data), o)
	default:
		cr = NewCopyBinaryReader(bytes.NewReader(data))
	}
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

// readFields reads every row's fields (copied), up to the first error.
func readFields(cr *CopyReader) ([][]CopyField, error) {
	var rows [][]CopyField
	for {
		f, err := cr.Read()
		if err != nil {
			return rows, err
		}
		rows = append(rows, append([]CopyField(nil), f...))
	}
}

func FuzzCopyReader(f *testing.F) {
	var cases []goldenCopyFromCase
	_ = jsonUnmarshalFile("copyfrom.json", &cases)
	for _, c := range cases {
		mode := uint8(0)
		if strings.Contains(c.Options, "csv") {
			mode = 3
		}
		f.Add(mode, []byte(c.Data))
	}
	f.Add(uint8(1), []byte("h\na|NULL|b\\|c\n\\.\n"))
	f.Add(uint8(4), []byte("x;y\n'a;b';NULL;'it\\'s'\n"))
	bin := AppendCopyBinaryHeader(nil)
	bin = AppendCopyBinaryRow(bin, []row.Type{row.TypeInt4, row.TypeText}, row.Row{int32(1), nil})
	f.Add(uint8(6), AppendCopyBinaryTrailer(bin))
	f.Fuzz(func(t *testing.T, mi uint8, data []byte) {
		mode := int(mi) % len(fuzzCopyModes)
		rows, err := readFields(newFuzzReader(t, mode, data))
		if err != io.EOF {
			checkError(t, err)
			return
		}
		// Write the rows back with the matching writer and read them again.
		m := fuzzCopyModes[mode]
		var out []byte
		if m.binary {
			out = AppendCopyBinaryHeader(out)
		}
		for _, fields := range rows {
			types := make([]row.Type, len(fields))
			r := make(row.Row, len(fields))
			for i, fl := range fields {
				types[i] = row.TypeText
				if m.binary {
					types[i] = row.TypeBytea
				}
				switch {
				case fl.Null:
				case m.binary:
					r[i] = []byte(fl.Value)
				default:
					r[i] = fl.Value
				}
			}
			switch {
			case m.text != nil:
				for _, d := range r {
					if d != nil && string(escapeCopyText([]byte(d.(string)), 0, m.text.Delimiter)) == m.text.Null {
						return // written, it would read as NULL: ambiguous in Postgres too
					}
				}
				o := *m.text
				out = AppendCopyTextRowOptions(out, types, r, o)
			case m.csv != nil:
				out = AppendCopyCSVRow(out, types, r, *m.csv)
			default:
				out = AppendCopyBinaryRow(out, types, r)
			}
		}
		if m.binary {
			out = AppendCopyBinaryTrailer(out)
		}
		if (m.text != nil && m.text.Header) || (m.csv != nil && m.csv.Header) {
			out = append([]byte("header\n"), out...)
		}
		again, err := readFields(newFuzzReader(t, mode, out))
		if err != io.EOF {
			t.Fatalf("re-read of %q: %v", out, err)
		}
		if len(again) != len(rows) {
			t.Fatalf("re-read %d rows, want %d, from %q", len(again), len(rows), out)
		}
		for i := range rows {
			if len(again[i]) != len(rows[i]) {
				t.Fatalf("row %d: %v, want %v", i, again[i], rows[i])
			}
			for j := range rows[i] {
				if again[i][j] != rows[i][j] {
					t.Fatalf("row %d field %d: %#v, want %#v (stream %q)", i, j, again[i][j], rows[i][j], out)
				}
			}
		}
	})
}
