package sql

import "strings"

func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// funcNameWords are Postgres's "type or function name" keywords: they cannot
// name a column or table unquoted, but may name a function (left(s, 2)).
var funcNameWords = setOf(
	"authorization", "binary", "collation", "concurrently", "cross", "current_schema",
	"freeze", "full", "ilike", "inner", "is", "isnull", "join", "left", "like",
	"natural", "notnull", "outer", "overlaps", "right", "similar", "tablesample",
	"verbose",
)

// reservedWords cannot be used as unquoted identifiers: Postgres's reserved
// keywords plus funcNameWords. Every other keyword of the dialect (KEY, VALUE,
// TEXT, SOURCE, ...) is recognised by position only and stays usable as a name.
var reservedWords = func() map[string]bool {
	m := setOf(
		"all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric",
		"both", "case", "cast", "check", "collate", "column", "constraint", "create",
		"current_catalog", "current_date", "current_role", "current_time",
		"current_timestamp", "current_user", "default", "deferrable", "desc", "distinct",
		"do", "else", "end", "except", "false", "fetch", "for", "foreign", "from", "grant",
		"group", "having", "in", "initially", "intersect", "into", "lateral", "leading",
		"limit", "localtime", "localtimestamp", "not", "null", "offset", "on", "only", "or",
		"order", "placing", "primary", "references", "returning", "select", "session_user",
		"some", "symmetric", "table", "then", "to", "trailing", "true", "union", "unique",
		"user", "using", "variadic", "when", "where", "window", "with",
	)
	for w := range funcNameWords {
		m[w] = true
	}
	return m
}()

// alwaysQuoted are non-reserved words that String() quotes anyway because a
// bare one would be read as a keyword in some position: a table alias "of"
// would turn "FROM t AS of" into the start of an AS OF clause.
var alwaysQuoted = setOf("of")

// noParenFuncs are the SQL-standard functions written without parentheses.
// They parse as a *FuncCall with NoParens set.
var noParenFuncs = setOf(
	"current_date", "current_time", "current_timestamp", "localtime", "localtimestamp",
	"current_user", "current_role", "session_user", "user", "current_catalog",
	"current_schema",
)

// isPlainIdent reports whether s can be written without quotes as far as its
// characters go: a lower-case ASCII letter or underscore, then letters, digits,
// underscores or dollars.
func isPlainIdent(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] == '_') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c == '_' || c == '$' || isDigit(c)) {
			return false
		}
	}
	return true
}

// QuoteIdent returns name as it must be written in SQL: bare when it is a plain
// lower-case word and not a reserved keyword, else in double quotes with inner
// quotes doubled. Parsing the result yields name again.
func QuoteIdent(name string) string {
	if isPlainIdent(name) && !reservedWords[name] && !alwaysQuoted[name] {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// QuoteString returns s as a standard SQL string constant: in single quotes,
// with inner quotes doubled and backslashes literal.
func QuoteString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
