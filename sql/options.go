package sql

import (
	"fmt"
	"strings"
)

// Option is one named option of a WITH (...) list or similar: SUBSCRIBE's
// SNAPSHOT and PROGRESS, FETCH's TIMEOUT, COPY's FORMAT and HEADER, a load
// generator's TICK INTERVAL, RETAIN HISTORY, a role's LOGIN, PASSWORD or
// CONNECTION LIMIT.
//
// Each statement accepts a fixed set of names (an unknown one is a syntax
// error, `option "x" not recognized`) and keeps the options in written order.
// In a parenthesized list (WITH (...), COPY's (...), a load generator's
// (...), SET/RESET (...)) a name may appear once: a repeat is a syntax error,
// `PROGRESS specified more than once`, as in Materialize. A role attribute
// set twice (LOGIN NOLOGIN) is `conflicting or redundant options`, as in
// PostgreSQL. COPY's old unparenthesized options are kept as written,
// repeats included.
// Checking values is the planner's job, helped by Text and Bool.
type Option struct {
	// Name is the option's keywords in upper case, joined by single spaces:
	// "SNAPSHOT", "TICK INTERVAL", "RETAIN HISTORY".
	Name string
	// Value is nil for a bare option (WITH (PROGRESS), HEADER, LOGIN). A bare
	// word value (FORMAT csv, HEADER on) is a *ColumnRef with only Column set;
	// otherwise Value is an ordinary expression, usually a literal. RETAIN
	// HISTORY's value is the expression after FOR.
	Value Expr
	Pos   int // 1-based character position of the name; 0 when not parsed from text
}

func (o Option) String() string { return render(o) }

func (o Option) format(w *printer) { o.formatSep(w, " ") }

// formatSep renders the option with sep between name and value: " = " in
// Materialize's WITH lists, " " where Postgres allows no "=" (COPY, roles).
func (o Option) formatSep(w *printer, sep string) {
	w.WriteString(o.Name)
	if o.Value == nil {
		return
	}
	if o.Name == "RETAIN HISTORY" {
		sep = " FOR "
	}
	w.WriteString(sep)
	formatValue(w, o.Value)
}

// formatValue renders an option or SET value. A bare word is written bare
// when the value parser would read it back as a word, even if it is a
// reserved keyword (FORMAT binary, SET x = on).
func formatValue(w *printer, e Expr) {
	if c, ok := e.(*ColumnRef); ok && c.Table.IsZero() && isPlainIdent(c.Column) && !valueKeywords[c.Column] {
		w.WriteString(c.Column)
		return
	}
	e.format(w)
}

// valueKeywords are the words that mean something else in value position.
var valueKeywords = setOf("true", "false", "null", "default")

func formatOptions(w *printer, opts []Option, sep string) {
	w.WriteByte('(')
	for i, o := range opts {
		if i > 0 {
			w.WriteString(", ")
		}
		o.formatSep(w, sep)
	}
	w.WriteByte(')')
}

// FindOption returns the last option named name (upper case, as in
// Option.Name): the only one in a parenthesized list, and the one Postgres
// honours where an option may repeat.
func FindOption(opts []Option, name string) (Option, bool) {
	for i := len(opts) - 1; i >= 0; i-- {
		if opts[i].Name == name {
			return opts[i], true
		}
	}
	return Option{}, false
}

// ValueText returns the text of a literal value the way Postgres reads option
// and SET values: a string literal's contents, a bare word, a number as written
// (with its sign), "true" or "false". It reports false for anything else.
func ValueText(e Expr) (string, bool) {
	switch e := e.(type) {
	case *StringLit:
		return e.Value, true
	case *ColumnRef:
		if e.Table.IsZero() {
			return e.Column, true
		}
	case *NumberLit:
		return e.Text, true
	case *BoolLit:
		if e.Value {
			return "true", true
		}
		return "false", true
	case *UnaryExpr:
		if n, ok := e.X.(*NumberLit); ok && e.Op == UnaryMinus {
			return "-" + n.Text, true
		}
		if n, ok := e.X.(*NumberLit); ok && e.Op == UnaryPlus {
			return n.Text, true
		}
	}
	return "", false
}

// Text returns the option's value as text (see ValueText). It fails with a
// 22023 *ParseError when the value is absent or not a literal.
func (o Option) Text() (string, error) {
	if o.Value != nil {
		if s, ok := ValueText(o.Value); ok {
			return s, nil
		}
	}
	return "", o.invalid("requires a value")
}

// Bool interprets the option as a Boolean, the way Postgres does: a bare option
// is true; true/false, on/off, yes/no, 1/0 and their unambiguous prefixes are
// accepted in any case, as words or strings. Anything else fails with a 22023
// *ParseError.
func (o Option) Bool() (bool, error) {
	if o.Value == nil {
		return true, nil
	}
	if s, ok := ValueText(o.Value); ok {
		if b, ok := parseBool(s); ok {
			return b, nil
		}
	}
	return false, o.invalid("requires a Boolean value")
}

func (o Option) invalid(what string) error {
	return &ParseError{Code: CodeInvalidParameterValue, Message: fmt.Sprintf("%s %s", o.Name, what), Position: o.Pos}
}

// parseBool follows Postgres's parse_bool: case-insensitive prefixes of true,
// false, yes and no; "on"; "of" or "off"; "1" and "0".
func parseBool(s string) (bool, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch {
	case s == "":
		return false, false
	case strings.HasPrefix("true", s), strings.HasPrefix("yes", s), s == "on", s == "1":
		return true, true
	case strings.HasPrefix("false", s), strings.HasPrefix("no", s), s == "of", s == "off", s == "0":
		return false, true
	}
	return false, false
}

// optionValue says what may follow an option's name.
type optionValue uint8

const (
	valueOptional optionValue = iota // [=] value, or nothing
	valueNone                        // nothing (role flags)
	valueFor                         // [=] FOR expr (RETAIN HISTORY)
	valuePassword                    // a string or NULL (PASSWORD)
	valueInteger                     // a signed integer constant (CONNECTION LIMIT)
)

// optionSpec is one option name a statement accepts.
type optionSpec struct {
	words []string // lower case
	value optionValue
}

func specs(value optionValue, names ...string) []optionSpec {
	out := make([]optionSpec, len(names))
	for i, n := range names {
		out[i] = optionSpec{words: strings.Fields(strings.ToLower(n)), value: value}
	}
	return out
}

// The option names each statement accepts.
var (
	subscribeOptions = specs(valueOptional, "SNAPSHOT", "PROGRESS")
	fetchOptions     = specs(valueOptional, "TIMEOUT")
	copyOptions      = specs(valueOptional, "FORMAT", "DELIMITER", "NULL", "HEADER", "QUOTE", "ESCAPE", "ENCODING")
	historyOptions   = specs(valueFor, "RETAIN HISTORY")
	// Materialize's load generator options; COUNTER uses TICK INTERVAL, KEY VALUE
	// the rest. AS OF and UP TO bound a generator's output.
	loadGeneratorOptions = specs(valueOptional,
		"TICK INTERVAL", "AS OF", "UP TO", "SCALE FACTOR", "MAX CARDINALITY",
		"KEYS", "SNAPSHOT ROUNDS", "TRANSACTIONAL SNAPSHOT", "VALUE SIZE", "SEED",
		"PARTITIONS", "BATCH SIZE")
	roleOptions = append(specs(valueNone,
		"LOGIN", "NOLOGIN", "SUPERUSER", "NOSUPERUSER", "INHERIT", "NOINHERIT",
		"CREATEDB", "NOCREATEDB", "CREATEROLE", "NOCREATEROLE", "CREATECLUSTER",
		"NOCREATECLUSTER"), append(specs(valuePassword, "PASSWORD"), specs(valueInteger, "CONNECTION LIMIT")...)...)
)
