package sql

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// tokenKind classifies a token.
type tokenKind uint8

const (
	tokEOF    tokenKind = iota
	tokIdent            // identifier or keyword; text is folded to lower case unless quoted
	tokString           // string constant; text is the decoded value
	tokNumber           // numeric constant; text as written
	tokParam            // $n; text is the digits
	tokOp               // operator; text is the operator ("!=" is reported as "<>")
	tokPunct            // ( ) , ; . [ ] :: and any other single character
)

// token is one lexical token. Offsets are bytes into the source; pos is the
// 1-based character position that errors and AST nodes report.
type token struct {
	kind   tokenKind
	text   string
	quoted bool // tokIdent written as "..."
	start  int
	end    int
	pos    int
}

// isWord reports whether t is the unquoted keyword w (given in lower case).
// A quoted identifier is never a keyword: "select" is a name.
func (t token) isWord(w string) bool { return t.kind == tokIdent && !t.quoted && t.text == w }

// isPunct reports whether t is the punctuation s.
func (t token) isPunct(s string) bool { return t.kind == tokPunct && t.text == s }

// isOp reports whether t is the operator s.
func (t token) isOp(s string) bool { return t.kind == tokOp && t.text == s }

// tokenPool recycles the token slices of parses (*[]token, empty): a
// statement is lexed whole up front, a multi-row INSERT into hundreds of
// tokens, and a writer sends one many times a second. No AST node keeps
// a token.
var tokenPool = sync.Pool{New: func() any { return new([]token) }}

// maxPooledTokens is the largest token slice put back into tokenPool: a
// huge statement's slice is left to the collector rather than kept.
const maxPooledTokens = 4096

// getTokens returns an empty token slice from tokenPool, and a function
// that puts it back once the parse is done with it (toks is the slice the
// parse ended with, nil if lexing failed).
func getTokens() (buf []token, release func(toks []token)) {
	p := tokenPool.Get().(*[]token)
	buf = *p
	return buf, func(toks []token) {
		if toks == nil {
			// Lexing failed: its tokens went into buf's array.
			toks = buf[:cap(buf)]
		}
		if cap(toks) > maxPooledTokens {
			return
		}
		clear(toks) // their strings are the statement's: do not keep them alive
		*p = toks[:0]
		tokenPool.Put(p)
	}
}

// lexer turns the input into tokens as the parser asks for them (see
// parser.fill), so that a statement rejected early, by a syntax error or
// a limit, costs what the parser read, not what the client sent: a 64 MiB
// message lexed up front is some 16 million tokens, a gigabyte of them.
// Tokens are kept from the first on, so the parser can look ahead and
// back freely. It fails by panicking with a bailout, like the parser.
type lexer struct {
	src  string
	off  int
	toks []token
	done bool // the tokEOF token has been emitted
	// Character positions are counted incrementally: token starts only move
	// forward, so counting from the previous start keeps lexing linear.
	cntOff int
	cntPos int
}

// newLexer returns a lexer of src, which must be valid UTF-8 without NUL
// bytes, that appends its tokens to toks[:0] (growing it as needed).
func newLexer(src string, toks []token) lexer {
	return lexer{src: src, toks: toks[:0], cntPos: 1}
}

// next lexes one more token. The last token is always tokEOF, positioned
// one character past the end; next must not be called after it.
func (l *lexer) next() {
	l.skipSpace()
	if l.off >= len(l.src) {
		l.toks = append(l.toks, token{kind: tokEOF, start: len(l.src), end: len(l.src), pos: l.charPos(len(l.src))})
		l.done = true
		return
	}
	l.lexToken()
}

// charPos converts a byte offset at or after the previous one to a 1-based
// character position.
func (l *lexer) charPos(off int) int {
	l.cntPos += utf8.RuneCountInString(l.src[l.cntOff:off])
	l.cntOff = off
	return l.cntPos
}

// failAt aborts lexing with an error positioned at byte offset off. Postgres
// quotes the rest of the input in these messages, and so do we.
func (l *lexer) failAt(off int, code, msg string) {
	panic(bailout{&ParseError{Code: code, Message: msg, Position: l.charPos(off)}})
}

// failUnterminated reports a literal or comment that runs off the end.
func (l *lexer) failUnterminated(off int, what string) {
	l.failAt(off, CodeSyntaxError, fmt.Sprintf("unterminated %s at or near %q", what, l.src[off:]))
}

func (l *lexer) emit(kind tokenKind, text string, start, end int, quoted bool) {
	if kind == tokIdent && len(text) > MaxIdentifierLength {
		l.failAt(start, CodeSyntaxError, identTooLong(text))
	}
	l.toks = append(l.toks, token{kind: kind, text: text, quoted: quoted, start: start, end: end, pos: l.charPos(start)})
	l.off = end
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHexDigit(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// isIdentStart follows Postgres: ASCII letters, underscore and any non-ASCII
// byte (so every UTF-8 letter, and every other non-ASCII character, too).
func isIdentStart(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80
}

func isIdentCont(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '$' }

// isOpChar reports whether c may be part of an operator, as in Postgres.
func isOpChar(c byte) bool { return strings.IndexByte("~!@#^&|`?+-*/%<>=", c) >= 0 }

func (l *lexer) at(i int) byte {
	if i < len(l.src) {
		return l.src[i]
	}
	return 0
}

// skipSpace skips whitespace, -- comments and nested /* */ comments.
func (l *lexer) skipSpace() {
	src := l.src
	for l.off < len(src) {
		c := src[l.off]
		switch {
		case isSpace(c):
			l.off++
		case c == '-' && l.at(l.off+1) == '-':
			nl := strings.IndexByte(src[l.off:], '\n')
			if nl < 0 {
				l.off = len(src)
			} else {
				l.off += nl + 1
			}
		case c == '/' && l.at(l.off+1) == '*':
			start, depth := l.off, 0
			for {
				if l.off >= len(src) {
					l.failUnterminated(start, "/* comment")
				}
				switch {
				case src[l.off] == '/' && l.at(l.off+1) == '*':
					depth++
					l.off += 2
				case src[l.off] == '*' && l.at(l.off+1) == '/':
					depth--
					l.off += 2
				default:
					l.off++
				}
				if depth == 0 {
					break
				}
			}
		default:
			return
		}
	}
}

func (l *lexer) lexToken() {
	src, start := l.src, l.off
	c, next := src[start], l.at(start+1)
	switch {
	case c == '\'':
		l.lexString(start, start, false)
	case (c == 'e' || c == 'E') && next == '\'':
		l.lexString(start, start+1, true)
	case (c == 'n' || c == 'N') && next == '\'':
		// National character literal: the same string, in Postgres of type bpchar.
		l.lexString(start, start+1, false)
	case (c == 'b' || c == 'B' || c == 'x' || c == 'X') && next == '\'':
		l.failAt(start, CodeFeatureNotSupported, "bit-string literals not supported")
	case (c == 'u' || c == 'U') && next == '&' && (l.at(start+2) == '\'' || l.at(start+2) == '"'):
		l.failAt(start, CodeFeatureNotSupported, "Unicode escape literals (U&'...') not supported")
	case c == '"':
		l.lexQuotedIdent(start)
	case isIdentStart(c):
		i := start + 1
		for i < len(src) && isIdentCont(src[i]) {
			i++
		}
		l.emit(tokIdent, foldIdent(src[start:i]), start, i, false)
	case isDigit(c) || (c == '.' && isDigit(next)):
		l.lexNumber(start)
	case c == '$':
		l.lexDollar(start)
	case c == ':' && next == ':':
		l.emit(tokPunct, "::", start, start+2, false)
	case isOpChar(c):
		l.lexOp(start)
	default:
		// Non-ASCII bytes start identifiers, so c is a single ASCII character.
		l.emit(tokPunct, src[start:start+1], start, start+1, false)
	}
}

// identTooLong is Materialize's message for an identifier over
// MaxIdentifierLength bytes. Unlike Materialize it echoes only the first
// MaxIdentifierLength bytes of the value: the client sent the rest, and a
// megabyte name should not come back in the error (nor fill the log).
func identTooLong(text string) string {
	shown := text[:MaxIdentifierLength]
	for !utf8.ValidString(shown) {
		shown = shown[:len(shown)-1]
	}
	return fmt.Sprintf("identifier is too long (len: %d, max: %d, value: %q...)", len(text), MaxIdentifierLength, shown)
}

// foldIdent lower-cases ASCII letters only, as Postgres does for UTF-8
// databases; other characters keep their case.
func foldIdent(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

func (l *lexer) lexQuotedIdent(start int) {
	src := l.src
	var b strings.Builder
	i := start + 1
	for {
		j := strings.IndexByte(src[i:], '"')
		if j < 0 {
			l.failUnterminated(start, "quoted identifier")
		}
		b.WriteString(src[i : i+j])
		i += j + 1
		if l.at(i) != '"' {
			break
		}
		b.WriteByte('"')
		i++
	}
	if b.Len() == 0 {
		l.failAt(start, CodeSyntaxError, `zero-length delimited identifier at or near """"`)
	}
	l.emit(tokIdent, b.String(), start, i, true)
}

// lexNumber scans digits [. digits] [e [+-] digits]. As in Postgres 15, junk
// after a number ("123abc") starts a new token.
func (l *lexer) lexNumber(start int) {
	src, i := l.src, start
	for i < len(src) && isDigit(src[i]) {
		i++
	}
	// "1..2" is 1 followed by "..", not 1. followed by .2.
	if l.at(i) == '.' && l.at(i+1) != '.' {
		i++
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if c := l.at(i); c == 'e' || c == 'E' {
		j := i + 1
		if s := l.at(j); s == '+' || s == '-' {
			j++
		}
		if isDigit(l.at(j)) {
			for j < len(src) && isDigit(src[j]) {
				j++
			}
			i = j
		}
	}
	l.emit(tokNumber, src[start:i], start, i, false)
}

// lexDollar scans a parameter ($1), a dollar-quoted string ($$...$$ or
// $tag$...$tag$), or else a lone "$" punctuation token.
func (l *lexer) lexDollar(start int) {
	src := l.src
	i := start + 1
	if isDigit(l.at(i)) {
		for i < len(src) && isDigit(src[i]) {
			i++
		}
		if i-start > 10 || atoiSafe(src[start+1:i]) > maxParam {
			l.failAt(start, CodeSyntaxError, fmt.Sprintf("parameter number too large at or near %q", src[start:i]))
		}
		l.emit(tokParam, src[start+1:i], start, i, false)
		return
	}
	if isIdentStart(l.at(i)) {
		for i < len(src) && (isIdentStart(src[i]) || isDigit(src[i])) {
			i++
		}
	}
	if l.at(i) != '$' {
		l.emit(tokPunct, "$", start, start+1, false)
		return
	}
	delim := src[start : i+1]
	body := i + 1
	end := strings.Index(src[body:], delim)
	if end < 0 {
		l.failUnterminated(start, "dollar-quoted string")
	}
	l.emit(tokString, src[body:body+end], start, body+end+len(delim), false)
}

// maxParam is the largest $n accepted; Postgres keeps parameter numbers in an int32.
const maxParam = 1<<31 - 1

func atoiSafe(s string) int64 {
	var n int64
	for i := 0; i < len(s); i++ {
		n = n*10 + int64(s[i]-'0')
	}
	return n
}

// lexOp scans an operator with Postgres's rules: the longest run of operator
// characters, cut before an embedded comment start, and with trailing + and -
// removed unless the operator contains one of ~ ! @ # % ^ & | ` ?, so that
// "a=-1" is "a", "=", "-", "1".
func (l *lexer) lexOp(start int) {
	src, i := l.src, start
	for i < len(src) && isOpChar(src[i]) {
		i++
	}
	op := src[start:i]
	for _, c := range []string{"--", "/*"} {
		if k := strings.Index(op[1:], c); k >= 0 {
			op = op[:k+1]
		}
	}
	if len(op) > 1 && (op[len(op)-1] == '+' || op[len(op)-1] == '-') && !strings.ContainsAny(op, "~!@#%^&|`?") {
		for len(op) > 1 && (op[len(op)-1] == '+' || op[len(op)-1] == '-') {
			op = op[:len(op)-1]
		}
	}
	text := op
	if text == "!=" {
		text = "<>"
	}
	l.emit(tokOp, text, start, start+len(op), false)
}

// lexString scans a string constant whose opening quote is at quote (start is
// before it for E'...' and N'...'). escape enables backslash escapes (E'...').
// Adjacent constants separated by whitespace containing a newline are one
// constant, per the SQL standard.
func (l *lexer) lexString(start, quote int, escape bool) {
	src := l.src
	if !escape {
		// The common case, a constant as written (no doubled quote, no
		// continuation): one copy, not the statement's memory, which a
		// value may outlive.
		if n := strings.IndexByte(src[quote+1:], '\''); n >= 0 {
			end := quote + 1 + n // the closing quote
			if l.at(end+1) != '\'' && l.nextConstant(end+1) < 0 {
				l.emit(tokString, strings.Clone(src[quote+1:end]), start, end+1, false)
				return
			}
		}
	}
	var b strings.Builder
	i := quote
	for {
		i++ // past the opening quote
		for {
			if i >= len(src) {
				l.failUnterminated(start, "quoted string")
			}
			c := src[i]
			if c == '\'' {
				if l.at(i+1) == '\'' {
					b.WriteByte('\'')
					i += 2
					continue
				}
				i++
				break
			}
			if escape && c == '\\' {
				i = l.unescape(&b, i, start)
				continue
			}
			b.WriteByte(c)
			i++
		}
		j := l.nextConstant(i)
		if j < 0 {
			break
		}
		i = j
	}
	value := b.String()
	if escape {
		if bad := firstInvalidUTF8(value); bad >= 0 {
			l.failAt(start, CodeCharacterNotInRepertoire, fmt.Sprintf(`invalid byte sequence for encoding "UTF8": 0x%02x`, value[bad]))
		}
	}
	l.emit(tokString, value, start, i, false)
}

// nextConstant returns where a constant whose closing quote is before i
// goes on, per the SQL standard: the opening quote of the next constant,
// if only whitespace holding a newline is between them; else -1.
func (l *lexer) nextConstant(i int) int {
	newline := false
	for ; i < len(l.src) && isSpace(l.src[i]); i++ {
		newline = newline || l.src[i] == '\n' || l.src[i] == '\r'
	}
	if newline && l.at(i) == '\'' {
		return i
	}
	return -1
}

// unescape decodes the backslash escape at src[i] into b and returns the
// offset after it. start is the literal's start, for errors.
func (l *lexer) unescape(b *strings.Builder, i, start int) int {
	src := l.src
	if i+1 >= len(src) {
		l.failUnterminated(start, "quoted string")
	}
	c := src[i+1]
	i += 2
	switch c {
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case '0', '1', '2', '3', '4', '5', '6', '7':
		v := int(c - '0')
		for k := 0; k < 2 && i < len(src) && src[i] >= '0' && src[i] <= '7'; k++ {
			v = v*8 + int(src[i]-'0')
			i++
		}
		l.writeByteEscape(b, byte(v), start)
	case 'x':
		if !isHexDigit(l.at(i)) {
			b.WriteByte('x')
			break
		}
		v := hexVal(src[i])
		i++
		if isHexDigit(l.at(i)) {
			v = v*16 + hexVal(src[i])
			i++
		}
		l.writeByteEscape(b, byte(v), start)
	case 'u', 'U':
		n := 4
		if c == 'U' {
			n = 8
		}
		r, next := l.hexRune(i, n, start)
		i = next
		if r >= 0xD800 && r <= 0xDBFF {
			// A UTF-16 high surrogate must be followed by an escaped low surrogate.
			if l.at(i) != '\\' || (l.at(i+1) != 'u' && l.at(i+1) != 'U') {
				l.failAt(start, CodeInvalidEscapeSequence, "invalid Unicode surrogate pair")
			}
			m := 4
			if l.at(i+1) == 'U' {
				m = 8
			}
			lo, next := l.hexRune(i+2, m, start)
			if lo < 0xDC00 || lo > 0xDFFF {
				l.failAt(start, CodeInvalidEscapeSequence, "invalid Unicode surrogate pair")
			}
			r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
			i = next
		} else if r >= 0xDC00 && r <= 0xDFFF {
			l.failAt(start, CodeInvalidEscapeSequence, "invalid Unicode surrogate pair")
		}
		if r == 0 || r > utf8.MaxRune {
			l.failAt(start, CodeInvalidEscapeSequence, "invalid Unicode escape value")
		}
		b.WriteRune(r)
	default:
		// Any other escaped character stands for itself: \\ \' \z. Only its first
		// byte is consumed here; the rest of a multibyte character follows.
		b.WriteByte(c)
	}
	return i
}

func (l *lexer) writeByteEscape(b *strings.Builder, v byte, start int) {
	if v == 0 {
		l.failAt(start, CodeCharacterNotInRepertoire, `invalid byte sequence for encoding "UTF8": 0x00`)
	}
	b.WriteByte(v)
}

func (l *lexer) hexRune(i, n, start int) (rune, int) {
	var r rune
	for k := 0; k < n; k++ {
		if !isHexDigit(l.at(i + k)) {
			l.failAt(start, CodeInvalidEscapeSequence, "invalid Unicode escape")
		}
		r = r*16 + rune(hexVal(l.src[i+k]))
		if r > utf8.MaxRune {
			l.failAt(start, CodeInvalidEscapeSequence, "invalid Unicode escape value")
		}
	}
	return r, i + n
}

func hexVal(c byte) int {
	switch {
	case isDigit(c):
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	default:
		return int(c-'A') + 10
	}
}

// firstInvalidUTF8 returns the byte offset of the first byte of s that is not
// part of valid UTF-8 or is NUL, or -1. Postgres rejects both in text.
func firstInvalidUTF8(s string) int {
	// The common case first, at memory speed: the whole of a message is
	// checked before it is parsed, whatever the parser reads of it.
	if utf8.ValidString(s) {
		return strings.IndexByte(s, 0)
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == 0 {
			return i
		}
		i += size
	}
	return -1
}
