package codec

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/shardtail/shardtail/row"
)

// canonicalNumeric reports whether s is in the canonical form that
// row.NormalizeNumeric produces: "NaN", or an optional "-", an integer part
// without leading zeros, and an optional fraction without trailing zeros;
// never "-0". It is a syntactic check so that decoding does not parse every
// numeric; TestCanonicalNumericMatchesNormalize pins it to NormalizeNumeric.
func canonicalNumeric(s string) bool {
	if s == "NaN" {
		return true
	}
	i := 0
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		i++
	}
	intStart := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	switch intLen := i - intStart; {
	case intLen == 0:
		return false
	case intLen > 1 && s[intStart] == '0':
		return false
	}
	if i == len(s) {
		// An integer: "-0" is not canonical.
		return !(neg && i-intStart == 1 && s[intStart] == '0')
	}
	if s[i] != '.' {
		return false
	}
	i++
	fracStart := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i == len(s) && i > fracStart && s[i-1] != '0'
}

// checkText reports whether s is a valid value for a text-like column:
// valid UTF-8, canonical for numeric, valid JSON for jsonb.
func checkText(t row.Type, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s value %.40q is not valid UTF-8", typeTokens[t], s)
	}
	return checkTextValue(t, s)
}

// checkTextValue is checkText for a string already known to be UTF-8.
func checkTextValue(t row.Type, s string) error {
	switch t {
	case row.TypeNumeric:
		if !canonicalNumeric(s) {
			return fmt.Errorf("numeric %.40q is not canonical", s)
		}
	case row.TypeJSONB:
		if !json.Valid([]byte(s)) {
			return fmt.Errorf("jsonb %.40q is not valid JSON", s)
		}
	}
	return nil
}
