package sql

func (p *parser) parseInsert() Statement {
	p.expectWords("insert", "into")
	s := &Insert{Table: p.parseObjectName()}
	if p.peek().isPunct("(") && !p.peekAt(1).isWord("select") {
		s.Columns = p.parseParenIdentList()
	}
	switch {
	case p.acceptWords("values"):
		for {
			p.expectPunct("(")
			s.Values = append(s.Values, p.parseExprList())
			p.expectPunct(")")
			if !p.acceptPunct(",") {
				break
			}
		}
	case p.isWords("select"):
		s.Query = p.parseSelect()
	case p.peek().isPunct("(") && p.peekAt(1).isWord("select"):
		p.advance()
		s.Query = p.parseSelect()
		p.expectPunct(")")
	case p.isWords("default", "values"):
		p.unsupported(p.peek(), "INSERT ... DEFAULT VALUES")
	default:
		p.unexpected()
	}
	p.unsupportedIf("ON CONFLICT", "on")
	p.unsupportedIf("RETURNING", "returning")
	return s
}

func (p *parser) parseUpdate() Statement {
	p.expectWords("update")
	s := &Update{Table: p.parseObjectName()}
	if !p.isWords("set") {
		p.unsupportedIf("aliases in UPDATE", "as")
		if p.isIdent() {
			p.unsupported(p.peek(), "aliases in UPDATE")
		}
	}
	p.expectWords("set")
	for {
		col := p.parseIdent()
		if p.peek().isPunct(".") || p.peek().isPunct("[") {
			p.unsupported(p.peek(), "assigning to a field or element")
		}
		if !p.acceptOp("=") {
			p.unexpected()
		}
		s.Set = append(s.Set, Assignment{Column: col, Value: p.parseExpr()})
		if !p.acceptPunct(",") {
			break
		}
	}
	p.unsupportedIf("UPDATE ... FROM", "from")
	if p.acceptWords("where") {
		s.Where = p.parseExpr()
	}
	p.unsupportedIf("RETURNING", "returning")
	return s
}

func (p *parser) parseDelete() Statement {
	p.expectWords("delete", "from")
	s := &Delete{Table: p.parseObjectName()}
	p.unsupportedIf("DELETE ... USING", "using")
	if !p.isWords("where") && !p.atEnd() && (p.isWords("as") || p.isIdent()) {
		p.unsupported(p.peek(), "aliases in DELETE")
	}
	if p.acceptWords("where") {
		s.Where = p.parseExpr()
	}
	p.unsupportedIf("RETURNING", "returning")
	return s
}

func (p *parser) parseCopy() Statement {
	p.expectWords("copy")
	s := &Copy{}
	if p.acceptPunct("(") {
		switch {
		case p.isQuery():
			s.Query = p.parseQuery()
		case p.isWords("subscribe"):
			s.Query = p.parseSubscribe()
		default:
			p.unexpected()
		}
		p.expectPunct(")")
	} else {
		s.Table = p.parseObjectName()
		if p.peek().isPunct("(") {
			s.Columns = p.parseParenIdentList()
		}
	}
	switch {
	case s.Query == nil && p.acceptWords("from"):
		s.Direction = CopyFrom
		p.copyEndpoint("stdin")
	case p.acceptWords("to"):
		s.Direction = CopyTo
		p.copyEndpoint("stdout")
	default:
		p.unexpected()
	}
	switch {
	case p.isWords("with") && p.peekAt(1).isPunct("("):
		p.advance()
		s.Options = p.parseParenOptions(copyOptions)
	case p.peek().isPunct("("):
		s.Options = p.parseParenOptions(copyOptions)
	default:
		s.Options = p.parseOldCopyOptions()
	}
	return s
}

// copyEndpoint consumes STDIN or STDOUT (want); files and programs are not
// supported, a client has no access to the server's.
func (p *parser) copyEndpoint(want string) {
	t := p.peek()
	switch {
	case t.kind == tokString || t.isWord("program"):
		p.unsupported(t, "COPY to or from a file or program")
	case !t.isWord(want):
		p.unexpected()
	}
	p.advance()
}

// parseOldCopyOptions parses the pre-9.0 option syntax, still accepted by
// Postgres and sent by old tools: [WITH] [BINARY] [DELIMITER [AS] 'x'] [NULL
// [AS] 'x'] [CSV [HEADER] [QUOTE [AS] 'x'] [ESCAPE [AS] 'x']], in any order. It
// returns the equivalent parenthesized options, or nil.
func (p *parser) parseOldCopyOptions() []Option {
	with := p.acceptWords("with")
	var opts []Option
	word := func(name string, t token, value string) {
		opts = append(opts, Option{Name: name, Value: &ColumnRef{Column: value, Pos: t.pos}, Pos: t.pos})
	}
	for {
		t := p.peek()
		switch {
		case p.acceptWords("binary"):
			word("FORMAT", t, "binary")
		case p.acceptWords("csv"):
			word("FORMAT", t, "csv")
		case p.acceptWords("header"):
			opts = append(opts, Option{Name: "HEADER", Pos: t.pos})
		case p.isWords("delimiter"), p.isWords("null"), p.isWords("quote"), p.isWords("escape"), p.isWords("encoding"):
			p.advance()
			p.acceptWords("as")
			opts = append(opts, Option{Name: toUpperASCII(t.text), Value: &StringLit{Value: p.parseStringLit()}, Pos: t.pos})
		case p.isWords("force"):
			p.unsupported(t, "COPY ... FORCE")
		default:
			if with && opts == nil {
				p.unexpected()
			}
			return opts
		}
	}
}

func toUpperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
