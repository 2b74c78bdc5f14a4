package sql

import (
	"fmt"
	"strconv"
)

// parseSubscribe parses SUBSCRIBE as SUBSCRIBE-SPEC.md's grammar gives it.
// Like Materialize, it takes the envelope or WITHIN TIMESTAMP ORDER BY right
// after the relation or at the very end, after UP TO; as the spec also has
// it (Materialize does not), right after WITH (...), before AS OF.
func (p *parser) parseSubscribe() *Subscribe {
	p.enter()
	defer p.leave()
	p.level++ // the Subscribe
	p.expectWords("subscribe")
	p.acceptWords("to")
	s := &Subscribe{}
	if p.acceptPunct("(") {
		if !p.isQuery() {
			p.unexpected()
		}
		s.Query = p.parseQuery()
		p.expectPunct(")")
	} else if p.acceptPunct("[") {
		s.RelationID = p.parseItemID()
		p.expectWords("as")
		s.Relation = p.parseObjectName()
		p.expectPunct("]")
	} else {
		s.Relation = p.parseObjectName()
	}
	p.parseSubscribeOutput(s)
	s.Options = p.parseWithOptions(subscribeOptions)
	p.parseSubscribeOutput(s)
	s.AsOf = p.parseAsOf()
	if p.acceptWords("up", "to") {
		s.UpTo = p.parseExpr()
	}
	p.parseSubscribeOutput(s)
	p.level--
	return s
}

// parseSubscribeOutput parses an optional ENVELOPE or WITHIN TIMESTAMP ORDER BY
// clause into s. Materialize allows only one of them, once.
func (p *parser) parseSubscribeOutput(s *Subscribe) {
	for {
		t := p.peek()
		envelope := p.isWords("envelope")
		if !envelope && !p.isWords("within", "timestamp", "order", "by") {
			return
		}
		if s.Envelope.Kind != EnvelopeNone || s.WithinTimestampOrderBy != nil {
			p.fail(t, CodeSyntaxError, "only one of ENVELOPE and WITHIN TIMESTAMP ORDER BY may be given")
		}
		if !envelope {
			p.pos += 4
			s.WithinTimestampOrderBy = p.parseOrderItems()
			continue
		}
		p.advance()
		switch p.acceptOneOf("upsert", "debezium") {
		case "upsert":
			s.Envelope.Kind = EnvelopeUpsert
		case "debezium":
			s.Envelope.Kind = EnvelopeDebezium
		default:
			p.unexpected()
		}
		p.expectPunct("(")
		p.expectWords("key")
		s.Envelope.Key = p.parseParenIdentList()
		p.expectPunct(")")
	}
}

func (p *parser) parseDeclare() Statement {
	p.expectWords("declare")
	s := &DeclareCursor{Name: p.parseIdent()}
	for _, w := range []string{"binary", "insensitive", "asensitive", "scroll", "no"} {
		if p.isWords(w) {
			p.unsupported(p.peek(), "DECLARE ... "+toUpperASCII(w))
		}
	}
	p.expectWords("cursor")
	p.unsupportedIf("WITH HOLD cursors", "with", "hold")
	p.acceptWords("without", "hold")
	p.expectWords("for")
	switch {
	case p.isWords("subscribe"):
		s.Query = p.parseSubscribe()
	case p.isQuery():
		s.Query = p.parseQuery()
	default:
		p.unexpected()
	}
	return s
}

// isCursorName reports whether the current word is the cursor name rather than
// a FETCH keyword: FETCH forward names a cursor called "forward".
func (p *parser) isCursorName() bool {
	next := p.peekAt(1)
	return next.kind == tokEOF || next.isPunct(";") || next.isWord("with")
}

func (p *parser) parseFetch() Statement {
	p.expectWords("fetch")
	s := &Fetch{Count: 1}
	t := p.peek()
	countAllowed := true
	if t.kind == tokIdent && !t.quoted && !p.isCursorName() {
		switch t.text {
		case "forward":
			p.advance()
		case "next":
			p.advance()
			countAllowed = false
		case "backward", "prior", "first", "last", "absolute", "relative":
			p.unsupported(t, "FETCH "+toUpperASCII(t.text))
		}
	}
	if countAllowed {
		t = p.peek()
		switch {
		case p.acceptWords("all"):
			s.All, s.Count = true, 0
		case t.isOp("-"):
			p.unsupported(t, "FETCH with a negative count")
		case t.kind == tokNumber, t.isOp("+") && p.peekAt(1).kind == tokNumber:
			if t.isOp("+") {
				p.advance()
				t = p.peek()
			}
			n, err := strconv.ParseInt(t.text, 10, 64)
			if err != nil {
				p.fail(t, CodeSyntaxError, fmt.Sprintf("invalid FETCH count at or near %q", p.src[t.start:t.end]))
			}
			p.advance()
			s.Count = n
		}
	}
	p.acceptOneOf("from", "in")
	s.Name = p.parseIdent()
	s.Options = p.parseWithOptions(fetchOptions)
	return s
}

func (p *parser) parseClose() Statement {
	p.expectWords("close")
	if p.acceptWords("all") {
		return &CloseCursor{All: true}
	}
	return &CloseCursor{Name: p.parseIdent()}
}

// parseItemID consumes a catalog id: u (user) or s (system) and a number,
// as in Materialize's id references.
func (p *parser) parseItemID() string {
	t := p.peek()
	id := p.parseIdent()
	if len(id) < 2 || (id[0] != 'u' && id[0] != 's') {
		p.fail(t, CodeSyntaxError, fmt.Sprintf("invalid id %s", id))
	}
	if _, err := strconv.ParseUint(id[1:], 10, 64); err != nil {
		p.fail(t, CodeSyntaxError, fmt.Sprintf("invalid id %s", id))
	}
	return id
}
