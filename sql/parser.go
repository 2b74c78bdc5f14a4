package sql

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxDepth bounds the height of every tree ParseAll returns: the number of
// nested statement, query, FROM-item and expression nodes on any path from the
// root. Deeper input fails with CodeStatementTooComplex, so that the planner,
// the evaluator and String() may recurse over a tree without risking the
// stack. Long flat chains count too: a OR b OR c is three levels deep.
const MaxDepth = 1000

// MaxIdentifierLength bounds every identifier (a name of a relation, column,
// role, cursor, ...), in bytes after case folding and unquoting, as
// Materialize bounds them (its max_identifier_length). A longer one is a
// syntax error, so no later layer (the catalog above all, which stores
// names durably and rewrites them on every change) sees an unbounded name.
const MaxIdentifierLength = 255

// maxRecursion bounds the parser's own recursion, which parentheses deepen
// without deepening the tree ("((((1))))"). String() never needs more than
// two levels of recursion per tree level (an operand and its parentheses),
// so anything it renders from a tree within MaxDepth parses again.
const maxRecursion = 4 * MaxDepth

// ParseAll parses sql, which may hold several statements separated by
// semicolons, as a simple Query message does. Empty statements are skipped, so
// text with only comments and semicolons gives no statements and no error. On
// a syntax error no statement is returned: Postgres runs none of them either.
// Every error is a *ParseError.
func ParseAll(sql string) (stmts []Statement, err error) {
	stmts, _, err = parseAll(sql)
	return stmts, err
}

// parseStats is what tests learn of a parse beyond its result.
type parseStats struct {
	// lexed is the number of tokens lexed: the work done, which for a
	// rejected statement should be bounded by the limits, not by its length.
	lexed int
	// badBound is set if the parser's lower bound of a statement's height
	// (parser.level and h) exceeded the real height: a bug, which could
	// reject a statement within MaxDepth.
	badBound bool
}

// parseAll is ParseAll, also reporting parseStats.
func parseAll(sql string) (stmts []Statement, stats parseStats, err error) {
	buf, release := getTokens()
	var p *parser
	defer func() {
		if p != nil {
			stats.lexed = len(p.lx.toks)
			release(p.lx.toks)
		} else {
			release(nil)
		}
		if r := recover(); r != nil {
			b, ok := r.(bailout)
			if !ok {
				panic(r)
			}
			stmts, err = nil, b.err
		}
	}()
	p = newParser(sql, buf)
	for {
		for p.acceptPunct(";") {
		}
		if p.peek().kind == tokEOF {
			return stmts, stats, nil
		}
		p.start, p.bound = p.peek(), 0
		stmt := p.parseStatement()
		// The parser rejects most trees that are too deep as it builds
		// them (checkHeight), but it only knows a lower bound of the
		// height; this is the exact check.
		h := height(stmt)
		if h > MaxDepth {
			p.tooComplex(p.start)
		}
		stats.badBound = stats.badBound || p.bound > h
		stmts = append(stmts, stmt)
		if !p.peek().isPunct(";") && p.peek().kind != tokEOF {
			p.unexpected()
		}
	}
}

// Parse parses exactly one statement, as an extended-protocol Parse message
// requires. A trailing semicolon is allowed. No statement gives
// ErrEmptyStatement; more than one gives a *ParseError.
func Parse(sql string) (Statement, error) {
	stmts, err := ParseAll(sql)
	switch {
	case err != nil:
		return nil, err
	case len(stmts) == 0:
		return nil, ErrEmptyStatement
	case len(stmts) > 1:
		return nil, &ParseError{Code: CodeSyntaxError, Message: "cannot insert multiple commands into a prepared statement"}
	}
	return stmts[0], nil
}

// bailout carries a *ParseError up the recursive descent. The parser fails by
// panicking with it, and ParseAll recovers it; any other panic is a bug and is
// not swallowed.
type bailout struct{ err *ParseError }

// parser is a recursive-descent parser over the token slice. Methods named
// parseX consume an X or fail; acceptX consume one if present; isX only look.
type parser struct {
	src   string
	lx    lexer
	toks  []token // the tokens lexed so far, lx.toks; ends with tokEOF once lx.done
	pos   int     // index of the current token
	depth int     // current recursion, bounded by maxRecursion
	start token   // the first token of the statement being parsed

	// level and h bound the height of the tree being built from below, so
	// that a statement too deep is rejected as soon as that is known, at a
	// cost bounded by MaxDepth rather than by its length (checkHeight).
	// level counts the nodes certain to be ancestors of whatever is being
	// parsed; the statement's height is at least level plus the height of
	// any subtree being built. h is the height of the expression or FROM
	// item most recently parsed (0 for none): a reader resets it to 0
	// before parsing a subtree and afterwards finds in it the height of
	// some descendant of that subtree, or of the subtree itself. Both
	// only ever err low: a construct that does not count itself makes the
	// bound looser, never wrong.
	level int
	h     int
	bound int // the highest level+h checked in this statement, for tests
}

func newParser(src string, toks []token) *parser {
	// Postgres rejects invalid UTF-8 and NUL before parsing; doing the same
	// here keeps every identifier and string in the AST valid UTF-8.
	if bad := firstInvalidUTF8(src); bad >= 0 {
		panic(bailout{&ParseError{
			Code:     CodeCharacterNotInRepertoire,
			Message:  fmt.Sprintf(`invalid byte sequence for encoding "UTF8": 0x%02x`, src[bad]),
			Position: utf8.RuneCountInString(src[:bad]) + 1,
		}})
	}
	return &parser{src: src, lx: newLexer(src, toks)}
}

// fill lexes until token i exists or the input ends.
func (p *parser) fill(i int) {
	for len(p.lx.toks) <= i && !p.lx.done {
		p.lx.next()
	}
	p.toks = p.lx.toks
}

func (p *parser) peek() token {
	if p.pos >= len(p.toks) {
		p.fill(p.pos)
	}
	return p.toks[p.pos]
}

// peekAt returns the token k places ahead; past the end it is the EOF token.
func (p *parser) peekAt(k int) token {
	i := p.pos + k
	if i >= len(p.toks) {
		p.fill(i)
		if i >= len(p.toks) {
			return p.toks[len(p.toks)-1]
		}
	}
	return p.toks[i]
}

func (p *parser) advance() token {
	t := p.peek()
	if t.kind != tokEOF {
		p.pos++
	}
	return t
}

// isWords reports whether the next tokens are the keywords words.
func (p *parser) isWords(words ...string) bool {
	for i, w := range words {
		if !p.peekAt(i).isWord(w) {
			return false
		}
	}
	return true
}

// acceptWords consumes the keywords words if they come next.
func (p *parser) acceptWords(words ...string) bool {
	if !p.isWords(words...) {
		return false
	}
	p.pos += len(words)
	return true
}

// expectWords consumes the keywords words or fails at the first that differs.
func (p *parser) expectWords(words ...string) {
	for _, w := range words {
		if !p.peek().isWord(w) {
			p.unexpected()
		}
		p.advance()
	}
}

// acceptOneOf consumes and returns whichever of words comes next, or "".
func (p *parser) acceptOneOf(words ...string) string {
	for _, w := range words {
		if p.acceptWords(w) {
			return w
		}
	}
	return ""
}

func (p *parser) acceptPunct(s string) bool {
	if p.peek().isPunct(s) {
		p.advance()
		return true
	}
	return false
}

func (p *parser) expectPunct(s string) {
	if !p.acceptPunct(s) {
		p.unexpected()
	}
}

func (p *parser) acceptOp(s string) bool {
	if p.peek().isOp(s) {
		p.advance()
		return true
	}
	return false
}

// atEnd reports whether the statement ends here.
func (p *parser) atEnd() bool {
	t := p.peek()
	return t.kind == tokEOF || t.isPunct(";")
}

func (p *parser) fail(t token, code, msg string) {
	panic(bailout{&ParseError{Code: code, Message: msg, Position: t.pos}})
}

// unexpected fails with Postgres's syntax error at the current token.
func (p *parser) unexpected() {
	p.unexpectedAt(p.peek())
}

func (p *parser) unexpectedAt(t token) {
	if t.kind == tokEOF {
		p.fail(t, CodeSyntaxError, "syntax error at end of input")
	}
	p.fail(t, CodeSyntaxError, fmt.Sprintf("syntax error at or near %q", p.src[t.start:t.end]))
}

// unsupported fails with feature_not_supported at t.
func (p *parser) unsupported(t token, what string) {
	p.fail(t, CodeFeatureNotSupported, what+" not supported")
}

// unsupportedIf fails with feature_not_supported if the keywords come next.
func (p *parser) unsupportedIf(what string, words ...string) {
	if p.isWords(words...) {
		p.unsupported(p.peek(), what)
	}
}

// enter and leave bracket every recursive production.
func (p *parser) enter() {
	p.depth++
	if p.depth > maxRecursion {
		p.tooComplex(p.peek())
	}
}

// checkHeight fails with CodeStatementTooComplex if a subtree of height h
// under p.level ancestors makes the statement deeper than MaxDepth. The
// loops that build long chains (a + b + ..., a JOIN b JOIN ...) call it at
// every link, so that such a statement fails after MaxDepth links, not
// after the whole text has been lexed and parsed.
func (p *parser) checkHeight(h int) {
	p.bound = max(p.bound, p.level+h)
	if p.bound > MaxDepth {
		p.tooComplex(p.start)
	}
}

// chainLink parses the next link of a chain whose tree so far has height
// *h (a + b + ..., a JOIN b JOIN ...): the link's node becomes the root of
// what is parsed, and the parent of what parse reads, which is checked
// before it is read (it may be long: x IN (1, 2, ...)). *h ends as the
// height of the chain with the link.
func chainLink[T any](p *parser, h *int, parse func() T) T {
	*h++
	p.checkHeight(*h)
	p.level++
	p.h = 0
	v := parse()
	p.level--
	*h = max(*h, 1+p.h)
	return v
}

func (p *parser) tooComplex(t token) {
	p.fail(t, CodeStatementTooComplex, fmt.Sprintf("statement too complex: nesting exceeds %d levels", MaxDepth))
}

func (p *parser) leave() { p.depth-- }

// isIdent reports whether the current token can be an identifier: quoted, or
// an unquoted word that is not reserved.
func (p *parser) isIdent() bool {
	t := p.peek()
	return t.kind == tokIdent && (t.quoted || !reservedWords[t.text])
}

// parseIdent consumes an identifier (a column, alias, role or cursor name).
func (p *parser) parseIdent() string {
	if !p.isIdent() {
		p.unexpected()
	}
	return p.advance().text
}

// parseLabel consumes a column label after AS, which may be any word,
// reserved or not, as in Postgres.
func (p *parser) parseLabel() string {
	if p.peek().kind != tokIdent {
		p.unexpected()
	}
	return p.advance().text
}

func (p *parser) parseIdentList() []string {
	names := []string{p.parseIdent()}
	for p.acceptPunct(",") {
		names = append(names, p.parseIdent())
	}
	return names
}

func (p *parser) parseParenIdentList() []string {
	p.expectPunct("(")
	names := p.parseIdentList()
	p.expectPunct(")")
	return names
}

// parseObjectName consumes name, schema.name or database.schema.name.
func (p *parser) parseObjectName() ObjectName {
	start := p.peek()
	parts := []string{p.parseIdent()}
	for p.peek().isPunct(".") && len(parts) <= 3 {
		p.advance()
		parts = append(parts, p.parseIdent())
	}
	// More than three parts fails here, at the fourth: a chain of any
	// length is neither read on nor quoted.
	n, ok := objectName(parts, start.pos)
	if !ok {
		p.fail(start, CodeSyntaxError, fmt.Sprintf("improper qualified name (too many dotted names): %s", strings.Join(parts, ".")))
	}
	return n
}

func objectName(parts []string, pos int) (ObjectName, bool) {
	switch len(parts) {
	case 1:
		return ObjectName{Name: parts[0], Pos: pos}, true
	case 2:
		return ObjectName{Schema: parts[0], Name: parts[1], Pos: pos}, true
	case 3:
		return ObjectName{Database: parts[0], Schema: parts[1], Name: parts[2], Pos: pos}, true
	}
	return ObjectName{}, false
}

func (p *parser) parseObjectNameList() []ObjectName {
	names := []ObjectName{p.parseObjectName()}
	for p.acceptPunct(",") {
		names = append(names, p.parseObjectName())
	}
	return names
}

// parseStringLit consumes a string constant.
func (p *parser) parseStringLit() string {
	if p.peek().kind != tokString {
		p.unexpected()
	}
	return p.advance().text
}

// parseIfExists consumes IF EXISTS if present.
func (p *parser) parseIfExists() bool { return p.acceptWords("if", "exists") }

// parseIfNotExists consumes IF NOT EXISTS if present.
func (p *parser) parseIfNotExists() bool { return p.acceptWords("if", "not", "exists") }

// unsupportedStatements are statement keywords that Postgres or Materialize
// accept and shardtail does not: they fail with 0A000 rather than a syntax error.
var unsupportedStatements = map[string]string{
	"explain": "EXPLAIN", "truncate": "TRUNCATE", "prepare": "PREPARE",
	"execute": "EXECUTE", "listen": "LISTEN", "notify": "NOTIFY", "unlisten": "UNLISTEN",
	"vacuum": "VACUUM", "analyze": "ANALYZE", "analyse": "ANALYZE", "lock": "LOCK",
	"savepoint": "SAVEPOINT", "release": "RELEASE SAVEPOINT", "with": "WITH (common table expressions)",
	"table": "TABLE as a statement", "comment": "COMMENT",
	"refresh": "REFRESH", "reassign": "REASSIGN OWNED", "checkpoint": "CHECKPOINT",
	"call": "CALL", "do": "DO", "merge": "MERGE", "cluster": "CLUSTER", "reindex": "REINDEX",
	"move": "MOVE", "load": "LOAD", "security": "SECURITY LABEL", "import": "IMPORT FOREIGN SCHEMA",
}

func (p *parser) parseStatement() Statement {
	t := p.peek()
	// A statement's node is an ancestor of all it holds; a query (a
	// *Select) and SUBSCRIBE, which may also be nested, count themselves.
	p.level = 1
	if t.isWord("select") || t.isWord("values") || t.isWord("subscribe") {
		p.level = 0
	}
	if t.kind == tokIdent && !t.quoted {
		switch t.text {
		case "select":
			return p.parseSelect()
		case "values":
			return p.parseValues()
		case "subscribe":
			return p.parseSubscribe()
		case "declare":
			return p.parseDeclare()
		case "fetch":
			return p.parseFetch()
		case "close":
			return p.parseClose()
		case "create":
			return p.parseCreate()
		case "drop":
			return p.parseDrop()
		case "alter":
			return p.parseAlter()
		case "grant", "revoke":
			return p.parseGrant()
		case "insert":
			return p.parseInsert()
		case "update":
			return p.parseUpdate()
		case "delete":
			return p.parseDelete()
		case "copy":
			return p.parseCopy()
		case "begin", "start":
			return p.parseBegin()
		case "commit", "end":
			return p.parseCommit()
		case "rollback", "abort":
			return p.parseRollback()
		case "set":
			return p.parseSet()
		case "reset":
			return p.parseReset()
		case "show":
			return p.parseShow()
		case "discard":
			return p.parseDiscard()
		case "deallocate":
			return p.parseDeallocate()
		}
		if what, ok := unsupportedStatements[t.text]; ok {
			p.unsupported(t, what)
		}
	}
	p.unexpected()
	return nil
}

// parseOptionName matches the longest option name of specs at the current
// position and consumes it.
func (p *parser) parseOptionName(specs []optionSpec) optionSpec {
	best := -1
	for i, s := range specs {
		if p.isWords(s.words...) && (best < 0 || len(s.words) > len(specs[best].words)) {
			best = i
		}
	}
	if best < 0 {
		t := p.peek()
		if t.kind == tokIdent {
			p.fail(t, CodeSyntaxError, fmt.Sprintf("option %q not recognized", t.text))
		}
		p.unexpected()
	}
	p.pos += len(specs[best].words)
	return specs[best]
}

// parseOption parses one option of specs: its name and, as the spec allows, a
// value.
func (p *parser) parseOption(specs []optionSpec) Option {
	t := p.peek()
	spec := p.parseOptionName(specs)
	o := Option{Name: strings.ToUpper(strings.Join(spec.words, " ")), Pos: t.pos}
	switch spec.value {
	case valueFor:
		p.acceptOp("=")
		p.expectWords("for")
		o.Value = p.parseExpr()
	case valuePassword:
		switch {
		case p.peek().kind == tokString:
			o.Value = &StringLit{Value: p.advance().text}
		case p.acceptWords("null"):
			o.Value = &NullLit{}
		default:
			p.unexpected()
		}
	case valueInteger:
		// Postgres's SignedIconst: a NumberLit, with its sign.
		sign := ""
		if p.acceptOp("-") {
			sign = "-"
		}
		if t := p.peek(); t.kind != tokNumber || !(&NumberLit{Text: t.text}).IsInteger() {
			p.unexpected()
		}
		o.Value = &NumberLit{Text: sign + p.advance().text}
	case valueOptional:
		eq := p.acceptOp("=")
		if !eq && (p.peek().isPunct(",") || p.peek().isPunct(")")) {
			break
		}
		o.Value = p.parseOptionValue()
	}
	return o
}

// parseOptionValue parses the value of a parenthesized option: a bare word
// (any word, even a reserved one, when it is the whole value) or an expression.
func (p *parser) parseOptionValue() Expr {
	t, next := p.peek(), p.peekAt(1)
	if t.kind == tokIdent && (next.isPunct(",") || next.isPunct(")")) {
		if e := p.parseWordValue(); e != nil {
			return e
		}
	}
	return p.parseExpr()
}

// parseWordValue consumes a word used as a value: TRUE and FALSE are Booleans,
// NULL is null and anything else a bare word. It returns nil, consuming
// nothing, for DEFAULT, which callers treat specially.
func (p *parser) parseWordValue() Expr {
	t := p.peek()
	if !t.quoted {
		switch t.text {
		case "true", "false":
			p.advance()
			return &BoolLit{Value: t.text == "true"}
		case "null":
			p.advance()
			return &NullLit{}
		case "default":
			return nil
		}
	}
	p.advance()
	return &ColumnRef{Column: t.text, Pos: t.pos}
}

// parseParenOptions parses "(option, ...)", where no option may repeat.
func (p *parser) parseParenOptions(specs []optionSpec) []Option {
	p.expectPunct("(")
	opts := []Option{p.parseOption(specs)}
	for p.acceptPunct(",") {
		opts = p.appendOption(opts, p.parseOption(specs))
	}
	p.expectPunct(")")
	return opts
}

// appendOption appends o to opts, failing as Materialize does if opts
// already has an option of that name: which of two values a statement
// should follow is not for the planner to guess. (Lists are short: at the
// first repeat, every name seen was a distinct one of a fixed set.)
func (p *parser) appendOption(opts []Option, o Option) []Option {
	for _, prev := range opts {
		if prev.Name == o.Name {
			panic(bailout{&ParseError{Code: CodeSyntaxError, Message: o.Name + " specified more than once", Position: o.Pos}})
		}
	}
	return append(opts, o)
}

// parseWithOptions parses an optional "WITH (option, ...)".
func (p *parser) parseWithOptions(specs []optionSpec) []Option {
	if !p.acceptWords("with") {
		return nil
	}
	return p.parseParenOptions(specs)
}
