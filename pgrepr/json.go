package pgrepr

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/shardtail/shardtail/row"
)

// jsonMaxDepth bounds nesting, as Postgres' stack depth limit does, so that
// hostile input cannot exhaust memory through recursion.
const jsonMaxDepth = 4096

type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonFalse
	jsonTrue
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

// jsonNode is one parsed value. str holds a string's unescaped contents or a
// number's canonical numeric text. kids holds an array's elements, or an
// object's keys and values alternately (keys are jsonString nodes).
type jsonNode struct {
	kind jsonKind
	str  string
	kids []jsonNode
}

// parseJSON validates s as JSON (RFC 8259, as Postgres' json parser accepts
// it) and returns its canonical jsonb text: Postgres' jsonb output, with
// object keys sorted by (length, bytes) and deduplicated (the last value
// wins), ", " and ": " separators, strings re-escaped as Postgres escapes
// them, and numbers in row.Numeric's canonical form (Postgres would keep a
// number's trailing fractional zeros; canonical form drops them so that
// equal documents are equal strings). Syntax errors carry Postgres' detail
// line ("Token "x" is invalid.", "Expected ":", but found "1".").
func parseJSON(s string) (row.JSON, error) {
	if err := checkText(s); err != nil {
		return "", err
	}
	p := jsonParser{s: s}
	tok, err := p.lex()
	if err != nil {
		return "", err
	}
	v, err := p.value(tok, 0)
	if err != nil {
		return "", err
	}
	if tok, err = p.lex(); err != nil {
		return "", err
	}
	if tok != tokEnd {
		return "", p.expected("end of input")
	}
	buf := make([]byte, 0, len(s)+len(s)/4+8)
	return row.JSON(appendJSON(buf, &v)), nil
}

// jsonTok is a token of Postgres' JSON lexer.
type jsonTok uint8

const (
	tokEnd jsonTok = iota
	tokObjectStart
	tokObjectEnd
	tokArrayStart
	tokArrayEnd
	tokComma
	tokColon
	tokString
	tokNumber
	tokTrue
	tokFalse
	tokNull
)

// jsonParser is a recursive-descent parser over a lexer that mirrors
// Postgres' json_lex, so that errors come out in the same order and with
// the same details. The last token is s[start:i]; its string contents or
// canonical number text are in val.
type jsonParser struct {
	s     string
	i     int
	start int
	val   string
}

// jsonAlnum is Postgres' JSON_ALPHANUMERIC_CHAR: the bytes an invalid word
// token runs over.
func jsonAlnum(c byte) bool { return isAlpha(c) || isDigit(c) || c == '_' || c >= 0x80 }

func (p *jsonParser) invalidToken(end int) error {
	return errJSON(`Token "` + p.s[p.start:end] + `" is invalid.`)
}

// lex reads the next token.
func (p *jsonParser) lex() (jsonTok, error) {
	s := p.s
	for p.i < len(s) && (s[p.i] == ' ' || s[p.i] == '\t' || s[p.i] == '\n' || s[p.i] == '\r') {
		p.i++
	}
	p.start = p.i
	if p.i >= len(s) {
		return tokEnd, nil
	}
	c := s[p.i]
	switch c {
	case '{':
		p.i++
		return tokObjectStart, nil
	case '}':
		p.i++
		return tokObjectEnd, nil
	case '[':
		p.i++
		return tokArrayStart, nil
	case ']':
		p.i++
		return tokArrayEnd, nil
	case ',':
		p.i++
		return tokComma, nil
	case ':':
		p.i++
		return tokColon, nil
	case '"':
		v, err := p.str()
		p.val = v
		return tokString, err
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return tokNumber, p.number()
	}
	j := p.i
	for j < len(s) && jsonAlnum(s[j]) {
		j++
	}
	if j == p.i {
		_, n := utf8.DecodeRuneInString(s[j:])
		return tokEnd, p.invalidToken(j + n)
	}
	p.i = j
	switch s[p.start:j] {
	case "true":
		return tokTrue, nil
	case "false":
		return tokFalse, nil
	case "null":
		return tokNull, nil
	}
	return tokEnd, p.invalidToken(j)
}

// expected reports a parse error after the last token, as Postgres'
// report_parse_error does.
func (p *jsonParser) expected(what string) error {
	if p.start >= len(p.s) {
		return errJSON("The input string ended unexpectedly.")
	}
	return errJSON("Expected " + what + `, but found "` + p.s[p.start:p.i] + `".`)
}

// value parses the value that starts with tok.
func (p *jsonParser) value(tok jsonTok, depth int) (jsonNode, error) {
	if depth > jsonMaxDepth {
		return jsonNode{}, newError(ErrSyntax, "54001", "stack depth limit exceeded")
	}
	switch tok {
	case tokObjectStart:
		return p.object(depth)
	case tokArrayStart:
		return p.array(depth)
	case tokString:
		return jsonNode{kind: jsonString, str: p.val}, nil
	case tokNumber:
		return jsonNode{kind: jsonNumber, str: p.val}, nil
	case tokTrue:
		return jsonNode{kind: jsonTrue}, nil
	case tokFalse:
		return jsonNode{kind: jsonFalse}, nil
	case tokNull:
		return jsonNode{kind: jsonNull}, nil
	}
	return jsonNode{}, p.expected("JSON value")
}

func (p *jsonParser) object(depth int) (jsonNode, error) {
	v := jsonNode{kind: jsonObject}
	tok, err := p.lex()
	if err != nil {
		return v, err
	}
	switch tok {
	case tokObjectEnd:
		return v, nil
	case tokString:
	default:
		return v, p.expected(`string or "}"`)
	}
	for {
		key := p.val
		if tok, err = p.lex(); err != nil {
			return v, err
		}
		if tok != tokColon {
			return v, p.expected(`":"`)
		}
		if tok, err = p.lex(); err != nil {
			return v, err
		}
		val, err := p.value(tok, depth+1)
		if err != nil {
			return v, err
		}
		v.kids = append(v.kids, jsonNode{kind: jsonString, str: key}, val)
		if tok, err = p.lex(); err != nil {
			return v, err
		}
		if tok == tokObjectEnd {
			break
		}
		if tok != tokComma {
			return v, p.expected(`"," or "}"`)
		}
		if tok, err = p.lex(); err != nil {
			return v, err
		}
		if tok != tokString {
			return v, p.expected("string")
		}
	}
	canonicalizeObject(&v)
	return v, nil
}

// canonicalizeObject sorts an object's pairs as jsonb stores them (shorter
// keys first, then bytewise) and drops all but the last of duplicate keys.
func canonicalizeObject(v *jsonNode) {
	n := len(v.kids) / 2
	if n < 2 {
		return
	}
	type pair struct{ k, v jsonNode }
	pairs := make([]pair, n)
	for i := range pairs {
		pairs[i] = pair{v.kids[2*i], v.kids[2*i+1]}
	}
	slices.SortStableFunc(pairs, func(a, b pair) int {
		if len(a.k.str) != len(b.k.str) {
			return len(a.k.str) - len(b.k.str)
		}
		return strings.Compare(a.k.str, b.k.str)
	})
	kids := v.kids[:0]
	for i, pr := range pairs {
		if i+1 < n && pairs[i+1].k.str == pr.k.str {
			continue // a later duplicate wins
		}
		kids = append(kids, pr.k, pr.v)
	}
	v.kids = kids
}

func (p *jsonParser) array(depth int) (jsonNode, error) {
	v := jsonNode{kind: jsonArray}
	tok, err := p.lex()
	if err != nil || tok == tokArrayEnd {
		return v, err
	}
	for {
		el, err := p.value(tok, depth+1)
		if err != nil {
			return v, err
		}
		v.kids = append(v.kids, el)
		if tok, err = p.lex(); err != nil {
			return v, err
		}
		if tok == tokArrayEnd {
			return v, nil
		}
		if tok != tokComma {
			return v, p.expected(`"," or "]"`)
		}
		if tok, err = p.lex(); err != nil {
			return v, err
		}
	}
}

// number lexes a JSON number (-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?) into
// p.val, canonicalized with numeric's rules and limits. As in Postgres'
// lexer, a malformed number is an invalid token that runs over any
// following word characters ("01", "1x", "1.").
func (p *jsonParser) number() error {
	s := p.s
	i := p.i
	neg := false
	if s[i] == '-' {
		neg = true
		i++
	}
	is := i
	if i < len(s) && s[i] == '0' {
		i++
	} else {
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	intDigits := s[is:i]
	bad := intDigits == ""
	fracDigits := ""
	if !bad && i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		fracDigits = s[fs:i]
		bad = fracDigits == ""
	}
	var exp int64
	if !bad && i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		var ok bool
		exp, i, ok = scanExponent(s, i+1)
		bad = !ok
	}
	if bad || (i < len(s) && jsonAlnum(s[i])) {
		for i < len(s) && jsonAlnum(s[i]) {
			i++
		}
		p.i = i
		return p.invalidToken(i)
	}
	p.i = i
	if exp >= numericMaxExp || exp <= -numericMaxExp {
		return errNumericOverflow()
	}
	n, err := canonicalNumeric(neg, intDigits, fracDigits, exp)
	p.val = n
	return err
}

// str lexes a string at p.i (on its opening quote) and returns its
// unescaped contents, with the checks and error details of Postgres'
// json_lex_string. Without escapes the result is a substring of the input,
// so the common case does not allocate.
func (p *jsonParser) str() (string, error) {
	s := p.s
	p.i++
	start := p.i
	i := start
	for i < len(s) && s[i] != '"' && s[i] != '\\' && s[i] >= 0x20 {
		i++
	}
	if i < len(s) && s[i] == '"' {
		p.i = i + 1
		return s[start:i], nil
	}
	var b []byte
	b = append(b, s[start:i]...)
	hi := rune(-1) // a pending high surrogate
	lowMissing := func() error { return errJSON("Unicode low surrogate must follow a high surrogate.") }
	for {
		if i >= len(s) {
			p.i = i
			return "", p.invalidToken(len(s))
		}
		c := s[i]
		if c == '"' {
			if hi >= 0 {
				return "", lowMissing()
			}
			p.i = i + 1
			return string(b), nil
		}
		if c < 0x20 {
			return "", errJSON("Character with value 0x" + hex2(c) + " must be escaped.")
		}
		if c != '\\' {
			if hi >= 0 {
				return "", lowMissing()
			}
			b = append(b, c)
			i++
			continue
		}
		if i+1 >= len(s) {
			p.i = len(s)
			return "", p.invalidToken(len(s))
		}
		e := s[i+1]
		i += 2
		if e == 'u' {
			var r rune
			for k := 0; k < 4; k++ {
				if i >= len(s) {
					p.i = len(s)
					return "", p.invalidToken(len(s))
				}
				v, ok := unhex(s[i])
				if !ok {
					return "", errJSON(`"\u" must be followed by four hexadecimal digits.`)
				}
				r = r<<4 | v
				i++
			}
			switch {
			case r >= 0xD800 && r <= 0xDBFF:
				if hi >= 0 {
					return "", errJSON("Unicode high surrogate must not follow a high surrogate.")
				}
				hi = r
				continue
			case r >= 0xDC00 && r <= 0xDFFF:
				if hi < 0 {
					return "", lowMissing()
				}
				r = 0x10000 + (hi-0xD800)<<10 + (r - 0xDC00)
				hi = -1
			}
			if hi >= 0 {
				return "", lowMissing()
			}
			if r == 0 {
				return "", newError(ErrSyntax, "22P05", "unsupported Unicode escape sequence").
					withDetail(`\u0000 cannot be converted to text.`)
			}
			b = utf8.AppendRune(b, r)
			continue
		}
		if hi >= 0 {
			return "", lowMissing()
		}
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		default:
			j := i - 1
			_, n := utf8.DecodeRuneInString(s[j:])
			return "", errJSON(`Escape sequence "\` + s[j:j+n] + `" is invalid.`)
		}
	}
}

func hex2(c byte) string { return string([]byte{hexDigits[c>>4], hexDigits[c&15]}) }

func unhex(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10), true
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10), true
	}
	return 0, false
}

// appendJSON writes v as Postgres' jsonb output does.
func appendJSON(buf []byte, v *jsonNode) []byte {
	switch v.kind {
	case jsonNull:
		return append(buf, "null"...)
	case jsonTrue:
		return append(buf, "true"...)
	case jsonFalse:
		return append(buf, "false"...)
	case jsonNumber:
		return append(buf, v.str...)
	case jsonString:
		return appendJSONString(buf, v.str)
	case jsonArray:
		buf = append(buf, '[')
		for i := range v.kids {
			if i > 0 {
				buf = append(buf, ", "...)
			}
			buf = appendJSON(buf, &v.kids[i])
		}
		return append(buf, ']')
	}
	buf = append(buf, '{')
	for i := 0; i+1 < len(v.kids); i += 2 {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		buf = appendJSONString(buf, v.kids[i].str)
		buf = append(buf, ": "...)
		buf = appendJSON(buf, &v.kids[i+1])
	}
	return append(buf, '}')
}

// appendJSONString quotes s as Postgres' escape_json does: \" \\ \b \f \n
// \r \t, \u00XX for other control characters, everything else literal.
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[start:i]...)
		switch c {
		case '"':
			buf = append(buf, '\\', '"')
		case '\\':
			buf = append(buf, '\\', '\\')
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\f':
			buf = append(buf, '\\', 'f')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		}
		start = i + 1
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
