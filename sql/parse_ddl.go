package sql

import (
	"fmt"
	"strings"
)

// unsupportedObjects are object kinds of Materialize and Postgres that CREATE,
// DROP and ALTER recognise only to reject with 0A000.
var unsupportedObjects = []string{
	"index", "sink", "connection", "cluster", "secret", "schema", "database", "type",
	"function", "sequence", "user", "network", "continual", "default", "unique",
	"temp", "temporary", "unlogged", "or",
}

func (p *parser) rejectObjectKind(verb string) {
	t := p.peek()
	for _, k := range unsupportedObjects {
		if t.isWord(k) {
			what := strings.ToUpper(k)
			switch k {
			case "or":
				what = "OR REPLACE"
			case "temp", "temporary":
				what = "TEMPORARY objects"
			case "default", "unique":
				what += " INDEX"
			case "network":
				what = "NETWORK POLICY"
			case "continual":
				what = "CONTINUAL TASK"
			}
			p.unsupported(t, verb+" "+what)
		}
	}
	p.unexpected()
}

// parseObjectKind parses TABLE, VIEW, MATERIALIZED VIEW, SOURCE and, if
// roles, ROLE; anything else fails.
func (p *parser) parseObjectKind(verb string, roles bool) ObjectKind {
	switch {
	case p.acceptWords("table"):
		return KindTable
	case p.acceptWords("view"):
		return KindView
	case p.acceptWords("materialized", "view"):
		return KindMaterializedView
	case p.acceptWords("source"):
		return KindSource
	case roles && p.acceptWords("role"):
		return KindRole
	}
	p.rejectObjectKind(verb)
	return 0
}

func (p *parser) parseCreate() Statement {
	p.expectWords("create")
	switch {
	case p.acceptWords("table"):
		return p.parseCreateTable()
	case p.acceptWords("materialized", "view"):
		return p.parseCreateView(true)
	case p.acceptWords("view"):
		return p.parseCreateView(false)
	case p.acceptWords("source"):
		return p.parseCreateSource()
	case p.acceptWords("role"):
		s := &CreateRole{Name: p.parseIdent()}
		s.Options = p.parseRoleOptions()
		return s
	}
	p.rejectObjectKind("CREATE")
	return nil
}

// columnConstraints are the column constraints Postgres accepts and shardtail
// does not.
var columnConstraints = []string{"default", "primary", "unique", "check", "references", "constraint", "collate", "generated"}

// tableConstraints start a table constraint in place of a column.
var tableConstraints = []string{"constraint", "primary", "unique", "check", "foreign", "exclude", "like"}

func (p *parser) parseCreateTable() Statement {
	s := &CreateTable{IfNotExists: p.parseIfNotExists()}
	s.Name = p.parseObjectName()
	p.expectPunct("(")
	if !p.peek().isPunct(")") {
		for {
			for _, w := range tableConstraints {
				if p.isWords(w) {
					p.unsupported(p.peek(), "table constraints")
				}
			}
			s.Columns = append(s.Columns, p.parseColumnDef(s.Name))
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	p.expectPunct(")")
	p.unsupportedIf("CREATE TABLE AS", "as")
	s.With = p.parseWithOptions(historyOptions)
	return s
}

func (p *parser) parseColumnDef(table ObjectName) ColumnDef {
	start := p.peek()
	c := ColumnDef{Name: p.parseIdent()}
	c.Type = p.parseTypeName()
	null := false
	for {
		switch {
		case p.acceptWords("not", "null"):
			c.NotNull = true
		case p.acceptWords("null"):
			null = true
		default:
			for _, w := range columnConstraints {
				if p.isWords(w) {
					p.unsupported(p.peek(), fmt.Sprintf("column constraint %s", strings.ToUpper(w)))
				}
			}
			if null && c.NotNull {
				p.fail(start, CodeSyntaxError, fmt.Sprintf("conflicting NULL/NOT NULL declarations for column %q of table %q", c.Name, table.Name))
			}
			return c
		}
	}
}

func (p *parser) parseCreateView(materialized bool) Statement {
	s := &CreateView{Materialized: materialized, IfNotExists: p.parseIfNotExists()}
	s.Name = p.parseObjectName()
	if p.peek().isPunct("(") {
		s.Columns = p.parseParenIdentList()
	}
	p.unsupportedIf("IN CLUSTER", "in", "cluster")
	if materialized {
		s.With = p.parseWithOptions(historyOptions)
	}
	p.expectWords("as")
	if !p.isQuery() {
		p.unexpected()
	}
	s.Query = p.parseQuery()
	return s
}

// loadGenerators are the load generators Materialize offers, as keyword lists.
var loadGenerators = [][]string{
	{"counter"}, {"key", "value"}, {"clock"}, {"auction"}, {"marketing"}, {"tpch"}, {"datums"},
}

func (p *parser) parseCreateSource() Statement {
	s := &CreateSource{IfNotExists: p.parseIfNotExists()}
	s.Name = p.parseObjectName()
	p.unsupportedIf("IN CLUSTER", "in", "cluster")
	p.expectWords("from")
	if !p.isWords("load", "generator") {
		if p.peek().kind == tokIdent && !p.peek().quoted {
			p.unsupported(p.peek(), "sources other than LOAD GENERATOR")
		}
		p.unexpected()
	}
	p.pos += 2
	for _, g := range loadGenerators {
		if p.acceptWords(g...) {
			s.Generator = strings.ToUpper(strings.Join(g, " "))
			break
		}
	}
	if s.Generator == "" {
		p.unexpected()
	}
	if p.peek().isPunct("(") {
		s.Options = p.parseParenOptions(loadGeneratorOptions)
	}
	for _, w := range []string{"for", "include", "expose", "envelope", "format"} {
		if p.isWords(w) {
			p.unsupported(p.peek(), "CREATE SOURCE ... "+strings.ToUpper(w))
		}
	}
	s.With = p.parseWithOptions(historyOptions)
	return s
}

// parseRoleOptions parses [WITH] option ... for CREATE ROLE and ALTER ROLE.
// An attribute set twice (LOGIN LOGIN, LOGIN NOLOGIN, PASSWORD twice) is
// PostgreSQL's "conflicting or redundant options".
func (p *parser) parseRoleOptions() []Option {
	p.acceptWords("with")
	var opts []Option
	for !p.atEnd() {
		t := p.peek()
		o := p.parseOption(roleOptions)
		for _, prev := range opts {
			if roleAttribute(prev.Name) == roleAttribute(o.Name) {
				p.fail(t, CodeSyntaxError, "conflicting or redundant options")
			}
		}
		opts = append(opts, o)
	}
	return opts
}

// roleAttribute is the attribute a role option sets: NOLOGIN sets LOGIN.
func roleAttribute(option string) string { return strings.TrimPrefix(option, "NO") }

func (p *parser) parseDrop() Statement {
	p.expectWords("drop")
	s := &Drop{Kind: p.parseObjectKind("DROP", true)}
	s.IfExists = p.parseIfExists()
	if s.Kind == KindRole {
		for {
			t := p.peek()
			s.Names = append(s.Names, ObjectName{Name: p.parseIdent(), Pos: t.pos})
			if !p.acceptPunct(",") {
				break
			}
		}
	} else {
		s.Names = p.parseObjectNameList()
	}
	switch p.acceptOneOf("cascade", "restrict") {
	case "cascade":
		s.Cascade = true
	}
	return s
}

func (p *parser) parseAlter() Statement {
	p.expectWords("alter")
	switch {
	case p.acceptWords("system"):
		return p.parseAlterSystem()
	case p.acceptWords("role"):
		name := p.parseIdent()
		if p.isWords("set") || p.isWords("reset") || p.isWords("rename") {
			p.unsupported(p.peek(), "ALTER ROLE ... "+strings.ToUpper(p.peek().text))
		}
		return &AlterRole{Name: name, Options: p.parseRoleOptions()}
	}
	s := &AlterObject{Kind: p.parseObjectKind("ALTER", false)}
	s.IfExists = p.parseIfExists()
	s.Name = p.parseObjectName()
	switch {
	case p.acceptWords("set"):
		if !p.peek().isPunct("(") {
			p.unsupportedAlter()
		}
		s.Options = p.parseParenOptions(historyOptions)
	case p.acceptWords("reset"):
		s.Reset = true
		p.expectPunct("(")
		for {
			t := p.peek()
			spec := p.parseOptionName(historyOptions)
			s.Options = p.appendOption(s.Options, Option{Name: strings.ToUpper(strings.Join(spec.words, " ")), Pos: t.pos})
			if !p.acceptPunct(",") {
				break
			}
		}
		p.expectPunct(")")
	default:
		p.unsupportedAlter()
	}
	return s
}

func (p *parser) unsupportedAlter() {
	t := p.peek()
	if t.kind == tokIdent && !t.quoted {
		p.unsupported(t, "ALTER ... "+strings.ToUpper(t.text))
	}
	p.unexpected()
}

var privileges = []string{"select", "insert", "update", "delete"}

func (p *parser) parseGrant() Statement {
	s := &Grant{Revoke: p.advance().text == "revoke"}
	if p.acceptWords("all") {
		p.acceptWords("privileges")
		s.Privileges = []string{"ALL"}
	} else {
		for {
			priv := p.acceptOneOf(privileges...)
			if priv == "" {
				p.unexpected()
			}
			s.Privileges = append(s.Privileges, strings.ToUpper(priv))
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	p.expectWords("on")
	p.acceptWords("table")
	s.Objects = p.parseObjectNameList()
	if s.Revoke {
		p.expectWords("from")
	} else {
		p.expectWords("to")
	}
	s.Roles = p.parseIdentList()
	p.unsupportedIf("WITH GRANT OPTION", "with")
	if s.Revoke {
		p.unsupportedIf("REVOKE ... CASCADE", "cascade")
		p.acceptWords("restrict")
	}
	return s
}
