package pgrepr

import (
	"errors"
	"strings"
	"testing"

	"github.com/shardtail/shardtail/row"
)

func TestJSONCanonical(t *testing.T) {
	for in, want := range map[string]string{
		`{"bb":[1,2],"a":1}`:               `{"a": 1, "bb": [1, 2]}`,
		`{"b":1,"a":2,"b":3}`:              `{"a": 2, "b": 3}`,
		`{"aa":1,"b":2,"c":{"z":0,"y":1}}`: `{"b": 2, "c": {"y": 1, "z": 0}, "aa": 1}`,
		`{"é":1,"z":2}`:                    `{"z": 2, "é": 1}`,
		`[1.50, 1e2, -0, 0.0, 1E-3]`:       `[1.5, 100, 0, 0, 0.001]`,
		` "\u00e9\ud83d\ude00\/\"" `:       `"é😀/\""`,
		`"\u0001\u001f\u007f\t"`:           `"\u0001\u001f` + "\x7f" + `\t"`,
		`{}`:                               `{}`,
		`[ ]`:                              `[]`,
		`{"":{"":[]}}`:                     `{"": {"": []}}`,
	} {
		got, err := ParseText(row.TypeJSONB, in)
		if err != nil || got != row.JSON(want) {
			t.Errorf("ParseText(jsonb, %q) = %q, %v; want %q", in, got, err, want)
		}
		// Canonical text is a fixed point.
		again, err := ParseText(row.TypeJSONB, want)
		if err != nil || again != row.JSON(want) {
			t.Errorf("ParseText(jsonb, %q) = %q, %v; not a fixed point", want, again, err)
		}
	}
}

func TestJSONErrors(t *testing.T) {
	for in, want := range map[string]struct{ code, detail string }{
		`{"a":1,}`:     {"22P02", `Expected string, but found "}".`},
		`[1,]`:         {"22P02", `Expected JSON value, but found "]".`},
		`{a:1}`:        {"22P02", `Token "a" is invalid.`},
		`01`:           {"22P02", `Token "01" is invalid.`},
		`"abc`:         {"22P02", `Token ""abc" is invalid.`},
		`{"a":`:        {"22P02", `The input string ended unexpectedly.`},
		`"\u0000"`:     {"22P05", `\u0000 cannot be converted to text.`},
		`"\ude00"`:     {"22P02", `Unicode low surrogate must follow a high surrogate.`},
		`"\x"`:         {"22P02", `Escape sequence "\x" is invalid.`},
		"\"a\nb\"":     {"22P02", `Character with value 0x0a must be escaped.`},
		`[1]x`:         {"22P02", `Token "x" is invalid.`},
		`[1] 2`:        {"22P02", `Expected end of input, but found "2".`},
		"\xff":         {"22021", ""},
		`1e1073741824`: {"22003", ""},
	} {
		_, err := ParseText(row.TypeJSONB, in)
		var pe *Error
		if !errors.As(err, &pe) || pe.SQLState() != want.code || (want.detail != "" && pe.Detail() != want.detail) {
			t.Errorf("ParseText(jsonb, %q) error %v (detail %q), want %s %q", in, err, detailOf(err), want.code, want.detail)
		}
	}
}

func detailOf(err error) string {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Detail()
	}
	return ""
}

func TestJSONDepthLimit(t *testing.T) {
	deep := strings.Repeat("[", jsonMaxDepth+10) + strings.Repeat("]", jsonMaxDepth+10)
	_, err := ParseText(row.TypeJSONB, deep)
	var pe *Error
	if !errors.As(err, &pe) || pe.SQLState() != "54001" {
		t.Errorf("deep nesting: %v, want 54001", err)
	}
	ok := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	if _, err := ParseText(row.TypeJSONB, ok); err != nil {
		t.Errorf("depth 100: %v", err)
	}
}

func TestJSONBinary(t *testing.T) {
	got, err := ParseBinary(row.TypeJSONB, []byte("\x01{\"b\":1,\"a\":2}"))
	if err != nil || got != row.JSON(`{"a": 2, "b": 1}`) {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := ParseBinary(row.TypeJSONB, []byte("\x02{}")); err == nil {
		t.Error("version 2 accepted")
	}
	if _, err := ParseBinary(row.TypeJSONB, nil); err == nil {
		t.Error("empty accepted")
	}
}
