package pgrepr

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/shardtail/shardtail/row"
)

// TestNumericCanonicalMatchesRow checks that parseNumeric's canonical form
// is row.NormalizeNumeric's, so that ParseText and persist agree on which
// numerics are equal.
func TestNumericCanonicalMatchesRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	inputs := []string{"0", "-0", "0.000", "00100", "1.500", "-.5", "5.", "+7", "1e3", "1E-3", "-1.25e+2", " 42 ", "0e5", "1234.5678e-2", "NaN"}
	for i := 0; i < 5000; i++ {
		inputs = append(inputs, randomDecimalText(rng))
	}
	for _, s := range inputs {
		got, err := parseNumeric(s)
		if err != nil {
			t.Fatalf("parseNumeric(%q): %v", s, err)
		}
		want, err := row.NormalizeNumeric(s)
		if err != nil {
			t.Fatalf("NormalizeNumeric(%q): %v", s, err)
		}
		if got != want {
			t.Fatalf("parseNumeric(%q) = %q, row.NormalizeNumeric = %q", s, got, want)
		}
	}
}

func TestNumericLimits(t *testing.T) {
	for _, c := range []struct {
		in      string
		wantLen int    // length of the canonical text, if valid
		code    string // else the SQLSTATE
	}{
		{"1e131071", 131072, ""},
		{"9.999e131071", 131072, ""},
		{"1e131072", 0, "22003"},
		{"1e-16383", 16385, ""},
		{"1e-16384", 0, "22003"},
		{"0.1e-16382", 16385, ""},
		{"0e-16384", 0, "22003"},
		{"0e999999999", 1, ""},
		{"1e1073741823", 0, "22003"},
		{"1e99999999999999999999", 0, "22003"},
		{"Infinity", 0, "22P02"},
		{"-NaN", 0, "22P02"},
	} {
		got, err := parseNumeric(c.in)
		var pe *Error
		switch {
		case c.code == "" && (err != nil || len(got) != c.wantLen):
			t.Errorf("parseNumeric(%q): len %d, %v; want len %d", c.in, len(got), err, c.wantLen)
		case c.code != "" && (!errors.As(err, &pe) || pe.SQLState() != c.code):
			t.Errorf("parseNumeric(%q) error %v, want %s", c.in, err, c.code)
		}
	}
}

func TestNumericBinaryDecode(t *testing.T) {
	h := func(s string) []byte {
		b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name, bin, want, code string
	}{
		{"zero", "0000 0000 0000 0000", "0", ""},
		{"zero with scale", "0000 0000 0000 0002", "0", ""},
		{"negative zero", "0000 0000 4000 0000", "0", ""},
		{"one", "0001 0000 0000 0000 0001", "1", ""},
		{"leading zero digit", "0002 0001 0000 0000 0000 0005", "5", ""},
		{"trailing zero digits", "0002 0000 0000 0004 0001 0000", "1", ""},
		{"weight beyond digits", "0001 0002 4000 0000 0007", "-700000000", ""},
		{"fraction", "0001 ffff 0000 0003 03e8", "0.1", ""},
		{"truncated to dscale", "0001 ffff 0000 0002 0d05", "0.33", ""},
		{"all truncated", "0001 fffe 4000 0002 0d05", "0", ""},
		{"small", "0001 fffd 0000 000c 0001", "0.000000000001", ""},
		{"nan", "0000 0000 c000 0000", "NaN", ""},
		{"nan ignores digits", "0001 0000 c000 0000 0001", "NaN", ""},
		{"short header", "0000 0000 00", "", "22P03"},
		{"short digits", "0002 0000 0000 0000 0001", "", "22P03"},
		{"extra bytes", "0000 0000 0000 0000 00", "", "22P03"},
		{"bad sign", "0000 0000 1234 0000", "", "22P03"},
		{"infinity", "0000 0000 d000 0000", "", "22P03"},
		{"bad scale", "0000 0000 0000 4000", "", "22P03"},
		{"bad digit", "0001 0000 0000 0000 2710", "", "22P03"},
	} {
		got, err := ParseBinary(row.TypeNumeric, h(c.bin))
		var pe *Error
		switch {
		case c.code == "" && (err != nil || got != row.Numeric(c.want)):
			t.Errorf("%s: got %v, %v; want %q", c.name, got, err, c.want)
		case c.code != "" && (!errors.As(err, &pe) || pe.SQLState() != c.code):
			t.Errorf("%s: got %v, %v; want error %s", c.name, got, err, c.code)
		}
	}
}

func TestNumericUint64FastPaths(t *testing.T) {
	vals := []uint64{0, 1, 9, 10, 9999, 10000, 10001, 99990000, 100000000, 1e12, 1e16, 1e19, math.MaxUint64, math.MaxUint64 - 1, 1700000000000}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 10000; i++ {
		vals = append(vals, rng.Uint64()>>rng.IntN(64))
	}
	for _, v := range vals {
		n := row.Numeric(strconv.FormatUint(v, 10))
		if got, want := AppendNumericUint64Text(nil, v), AppendText(nil, row.TypeNumeric, n); !bytes.Equal(got, want) {
			t.Fatalf("text %d: got %q, want %q", v, got, want)
		}
		if got, want := AppendNumericUint64Binary(nil, v), AppendBinary(nil, row.TypeNumeric, n); !bytes.Equal(got, want) {
			t.Fatalf("binary %d: got %x, want %x", v, got, want)
		}
	}
	buf := make([]byte, 0, 64)
	if a := testing.AllocsPerRun(100, func() {
		buf = AppendNumericUint64Binary(buf[:0], 1700000000123)
		buf = AppendNumericUint64Text(buf, 1700000000123)
	}); a != 0 {
		t.Errorf("fast paths allocate %v times", a)
	}
}

// TestAppendNumericBinaryNonCanonical checks that a numeric datum that is
// plain decimal but not canonical is still sent exactly (with its scale),
// and that exponent forms are normalized rather than garbled.
func TestAppendNumericBinaryNonCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"1.50":   "0002 0000 0000 0002 0001 1388",
		"-0.00":  "0000 0000 0000 0002",
		"007":    "0001 0000 0000 0000 0007",
		"1e4":    "0001 0001 0000 0000 0001",
		"12.5e1": "0001 0000 0000 0000 007d",
	} {
		got := AppendBinary(nil, row.TypeNumeric, row.Numeric(in))
		if hex.EncodeToString(got) != strings.ReplaceAll(want, " ", "") {
			t.Errorf("%q: got %x, want %s", in, got, want)
		}
	}
}
