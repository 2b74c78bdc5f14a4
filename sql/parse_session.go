package sql

import "strings"

func (p *parser) parseBegin() Statement {
	if p.acceptWords("start") {
		p.expectWords("transaction")
	} else {
		p.expectWords("begin")
		p.acceptOneOf("work", "transaction")
	}
	return &Begin{Modes: p.parseTransactionModes()}
}

// isolationLevels are the isolation levels, longest spellings first.
var isolationLevels = [][]string{
	{"strict", "serializable"}, {"serializable"}, {"repeatable", "read"},
	{"read", "committed"}, {"read", "uncommitted"},
}

// parseTransactionModes parses modes separated by commas or spaces.
func (p *parser) parseTransactionModes() TransactionModes {
	var m TransactionModes
	for first := true; ; first = false {
		if !first {
			p.acceptPunct(",")
		}
		t := p.peek()
		switch {
		case p.acceptWords("isolation", "level"):
			level := ""
			for _, l := range isolationLevels {
				if p.acceptWords(l...) {
					level = strings.ToUpper(strings.Join(l, " "))
					break
				}
			}
			if level == "" {
				p.unexpected()
			}
			if m.IsolationLevel != "" {
				p.fail(t, CodeSyntaxError, "conflicting or redundant options")
			}
			m.IsolationLevel = level
		case p.isWords("read", "only"), p.isWords("read", "write"):
			if m.AccessMode != "" {
				p.fail(t, CodeSyntaxError, "conflicting or redundant options")
			}
			p.advance()
			m.AccessMode = "READ " + toUpperASCII(p.advance().text)
		case p.isWords("deferrable"), p.isWords("not", "deferrable"):
			p.unsupported(t, "DEFERRABLE transactions")
		default:
			if !first {
				// A comma must be followed by a mode.
				if p.toks[p.pos-1].isPunct(",") {
					p.unexpected()
				}
			}
			return m
		}
	}
}

func (p *parser) parseCommit() Statement {
	p.advance() // COMMIT or END
	p.acceptOneOf("work", "transaction")
	p.unsupportedIf("COMMIT AND CHAIN", "and")
	return &Commit{}
}

func (p *parser) parseRollback() Statement {
	p.advance() // ROLLBACK or ABORT
	p.acceptOneOf("work", "transaction")
	p.unsupportedIf("ROLLBACK TO SAVEPOINT", "to")
	p.unsupportedIf("ROLLBACK AND CHAIN", "and")
	return &Rollback{}
}

// isSpecialVariableWord reports whether the current word introduces a special
// form (SET TIME ZONE ...) rather than naming a variable, which it does when
// "=", TO or "." follows it.
func (p *parser) isSpecialVariableWord(w string) bool {
	if !p.isWords(w) {
		return false
	}
	next := p.peekAt(1)
	return !next.isOp("=") && !next.isWord("to") && !next.isPunct(".")
}

// parseVariableName parses a dotted variable name and joins its parts.
func (p *parser) parseVariableName() string {
	parts := []string{p.parseIdent()}
	for p.acceptPunct(".") {
		parts = append(parts, p.parseIdent())
	}
	return strings.Join(parts, ".")
}

func (p *parser) parseSet() Statement {
	p.expectWords("set")
	scope := ScopeSession
	switch {
	case p.isSpecialVariableWord("session") && p.peekAt(1).isWord("characteristics"):
		p.expectWords("session", "characteristics", "as", "transaction")
		return &SetTransaction{Session: true, Modes: p.parseTransactionModes()}
	case p.isSpecialVariableWord("session") && p.peekAt(1).isWord("authorization"):
		p.unsupported(p.peek(), "SET SESSION AUTHORIZATION")
	case p.isSpecialVariableWord("session"):
		p.advance()
	case p.isSpecialVariableWord("local"):
		p.advance()
		scope = ScopeLocal
	}
	switch {
	case p.isSpecialVariableWord("transaction") && scope == ScopeSession:
		p.advance()
		return &SetTransaction{Modes: p.parseTransactionModes()}
	case p.isSpecialVariableWord("role"):
		p.unsupported(p.peek(), "SET ROLE")
	case p.isSpecialVariableWord("time") && p.peekAt(1).isWord("zone"):
		p.pos += 2
		return p.parseSetTimeZone(scope)
	case p.isSpecialVariableWord("names"):
		p.advance()
		return p.parseSetValues(&SetVariable{Scope: scope, Name: "client_encoding"})
	case p.isSpecialVariableWord("schema"):
		p.advance()
		return &SetVariable{Scope: scope, Name: "search_path", Values: []Expr{&StringLit{Value: p.parseStringLit()}}}
	}
	s := &SetVariable{Scope: scope, Name: p.parseVariableName()}
	if !p.acceptOp("=") && !p.acceptWords("to") {
		p.unexpected()
	}
	return p.parseSetValues(s)
}

// parseSetValues parses DEFAULT or a comma-separated list of values into s.
func (p *parser) parseSetValues(s *SetVariable) Statement {
	if p.acceptWords("default") {
		s.Default = true
		return s
	}
	s.Values = []Expr{p.parseSetValue()}
	for p.acceptPunct(",") {
		s.Values = append(s.Values, p.parseSetValue())
	}
	return s
}

// parseSetValue parses one value of SET: a string, a signed number, or a word.
func (p *parser) parseSetValue() Expr {
	t := p.peek()
	switch t.kind {
	case tokString:
		p.advance()
		return &StringLit{Value: t.text}
	case tokNumber:
		p.advance()
		return &NumberLit{Text: t.text}
	case tokOp:
		if (t.text == "-" || t.text == "+") && p.peekAt(1).kind == tokNumber {
			p.advance()
			n := p.advance()
			if t.text == "-" {
				return &NumberLit{Text: "-" + n.text}
			}
			return &NumberLit{Text: n.text}
		}
	case tokIdent:
		if e := p.parseWordValue(); e != nil {
			return e
		}
	}
	p.unexpected()
	return nil
}

// parseSetTimeZone parses the value of SET TIME ZONE: a string, a number, a
// word, DEFAULT or LOCAL (which means DEFAULT).
func (p *parser) parseSetTimeZone(scope Scope) Statement {
	s := &SetVariable{Scope: scope, Name: "timezone"}
	switch {
	case p.acceptWords("local"), p.acceptWords("default"):
		s.Default = true
	case p.isWords("interval"):
		p.unsupported(p.peek(), "SET TIME ZONE INTERVAL")
	default:
		s.Values = []Expr{p.parseSetValue()}
	}
	return s
}

func (p *parser) parseReset() Statement {
	p.expectWords("reset")
	return p.parseResetTarget(ScopeSession)
}

func (p *parser) parseResetTarget(scope Scope) Statement {
	switch {
	case p.acceptWords("all"):
		return &ResetVariable{Scope: scope, All: true}
	case p.isSpecialVariableWord("time") && p.peekAt(1).isWord("zone"):
		p.pos += 2
		return &ResetVariable{Scope: scope, Name: "timezone"}
	}
	return &ResetVariable{Scope: scope, Name: p.parseVariableName()}
}

// parseAlterSystem parses the rest of ALTER SYSTEM SET/RESET.
func (p *parser) parseAlterSystem() Statement {
	if p.acceptWords("reset") {
		return p.parseResetTarget(ScopeSystem)
	}
	p.expectWords("set")
	s := &SetVariable{Scope: ScopeSystem, Name: p.parseVariableName()}
	if !p.acceptOp("=") && !p.acceptWords("to") {
		p.unexpected()
	}
	return p.parseSetValues(s)
}

func (p *parser) parseShow() Statement {
	p.expectWords("show")
	if p.acceptWords("all") {
		return &ShowVariable{All: true}
	}
	// SHOW followed by a keyword is a special form unless a dot follows
	// (SHOW tables.x shows a variable).
	special := func(words ...string) bool {
		if p.isWords(words...) && !p.peekAt(len(words)).isPunct(".") {
			p.pos += len(words)
			return true
		}
		return false
	}
	switch {
	case special("tables"):
		return p.parseShowObjects(KindTable)
	case special("views"):
		return p.parseShowObjects(KindView)
	case special("materialized", "views"):
		return p.parseShowObjects(KindMaterializedView)
	case special("sources"):
		return p.parseShowObjects(KindSource)
	case special("columns"):
		if p.acceptOneOf("from", "in") == "" {
			p.unexpected()
		}
		return &ShowColumns{Table: p.parseObjectName()}
	case special("create"):
		s := &ShowCreate{Kind: p.parseObjectKind("SHOW CREATE", false)}
		s.Name = p.parseObjectName()
		return s
	case special("time", "zone"):
		return &ShowVariable{Name: "timezone"}
	case special("transaction", "isolation", "level"):
		return &ShowVariable{Name: "transaction_isolation"}
	case special("session", "authorization"):
		return &ShowVariable{Name: "session_authorization"}
	}
	return &ShowVariable{Name: p.parseVariableName()}
}

func (p *parser) parseShowObjects(kind ObjectKind) Statement {
	s := &ShowObjects{Kind: kind}
	if p.acceptOneOf("from", "in") != "" {
		s.From = p.parseObjectName()
	}
	if p.isWords("like") || p.isWords("where") {
		p.unsupported(p.peek(), "SHOW ... "+toUpperASCII(p.peek().text))
	}
	return s
}

var discardTargets = map[string]string{
	"all": "ALL", "plans": "PLANS", "sequences": "SEQUENCES", "temp": "TEMP", "temporary": "TEMP",
}

func (p *parser) parseDiscard() Statement {
	p.expectWords("discard")
	t := p.peek()
	if target, ok := discardTargets[t.text]; ok && t.kind == tokIdent && !t.quoted {
		p.advance()
		return &Discard{Target: target}
	}
	p.unexpected()
	return nil
}

func (p *parser) parseDeallocate() Statement {
	p.expectWords("deallocate")
	if p.isWords("prepare") && !p.isCursorName() {
		p.advance()
	}
	if p.acceptWords("all") {
		return &Deallocate{All: true}
	}
	return &Deallocate{Name: p.parseIdent()}
}
