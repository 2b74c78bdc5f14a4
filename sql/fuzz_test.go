package sql

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzParse checks that the parser never panics, that every error is a
// *ParseError positioned inside the input, and that String() is canonical:
// parsing it gives an equal tree that renders to the same text. It also
// checks that the bound of the height the parser keeps for its early
// depth check never exceeds the real height.
//
// Run it with: go test -run='^$' -fuzz=FuzzParse -fuzztime=90s ./sql/
// Interesting inputs found this way belong in testdata/fuzz/FuzzParse/.
func FuzzParse(f *testing.F) {
	for _, tt := range roundTripTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		stmts, stats, err := parseAll(sql)
		if stats.badBound {
			t.Fatalf("ParseAll(%q): the parser's lower bound of the height exceeds the height", sql)
		}
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("ParseAll(%q) returned %T %v, want *ParseError", sql, err, err)
			}
			if pe.Position < 1 || pe.Position > utf8.RuneCountInString(sql)+1 {
				t.Fatalf("ParseAll(%q): position %d outside the input (%s)", sql, pe.Position, pe.Message)
			}
			return
		}
		for _, s := range stmts {
			text := s.String()
			again, err := Parse(text)
			if err != nil {
				t.Fatalf("input %q\nrenders as %q\nwhich fails to parse: %s", sql, text, describe(err))
			}
			if got := again.String(); got != text {
				t.Fatalf("input %q\nrenders as %q\nwhich renders as %q", sql, text, got)
			}
			if !equalIgnoringPos(s, again) {
				t.Fatalf("input %q\nrenders as %q\nwhich parses to a different tree:\n%#v\n%#v", sql, text, s, again)
			}
		}
	})
}
