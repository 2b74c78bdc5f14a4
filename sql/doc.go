// Package sql parses shardtail's SQL dialect, the part of Materialize's
// PostgreSQL-flavoured SQL that shardtail serves, into an abstract syntax tree.
// It only parses: resolving names and types is the planner's job (package
// adapter), and evaluating expressions the dataflow's. The lexer and the
// recursive-descent parser are hand-written and have no dependencies.
//
// # Entry points
//
// ParseAll parses a simple Query message's text, which may hold several
// statements separated by semicolons; Parse parses exactly one, as an
// extended-protocol Parse message does:
//
//	stmts, err := sql.ParseAll(text)
//	if err != nil {
//		var pe *sql.ParseError // always, for a non-nil err
//		errors.As(err, &pe)
//		// send ErrorResponse: pe.SQLState(), pe.Message, pe.Position
//	}
//	for _, stmt := range stmts {
//		switch s := stmt.(type) {
//		case *sql.Subscribe:
//			if s.Query == nil { /* SUBSCRIBE <name>: maybe the fast path */ }
//		case *sql.Select:
//			...
//		}
//	}
//
// Every error is a *ParseError with a Postgres-style Message (`syntax error at
// or near "x"`, `syntax error at end of input`, `unterminated quoted string
// ...`), a SQLSTATE (42601 for syntax errors; 0A000 for syntax that Postgres or
// Materialize accept but shardtail does not; 54001 for a tree deeper than
// MaxDepth; 22021/22025 for bad bytes and escapes) and a Position: the 1-based
// character offset into the whole text given to ParseAll, as ErrorResponse
// reports it. The parser never panics on any input (FuzzParse checks this),
// its own recursion is bounded, and every tree it returns is at most MaxDepth
// levels deep, so code that walks a tree recursively cannot overflow the stack.
// The text is lexed as the parser reads it and the height counted as the tree
// is built, so a statement that breaks a limit costs what the parser read up
// to the limit, not what the client sent: a megabyte of 1+1+...+1 fails after
// MaxDepth terms. (Only the check for invalid UTF-8 reads the whole text.)
//
// # Grammar
//
// Keywords are case-insensitive; unquoted identifiers fold to lower case
// (ASCII only, as Postgres does for UTF-8), quoted ones keep their case, and a
// quoted identifier is never a keyword. Postgres's reserved keywords (and its
// "type or function name" keywords such as LEFT and JOIN) must be quoted to be
// used as names; every other keyword, including Materialize's (KEY, VALUE,
// SOURCE, ENVELOPE, ...), is recognised by position and remains a valid name.
// An identifier is at most MaxIdentifierLength (255) bytes, as in Materialize;
// a longer one is a syntax error rather than Postgres's silent truncation.
// Comments are -- and nested /* */. Literals: integers of any size (kept as
// text), decimals, 'strings' (a quote doubled inside), E'...' with backslash escapes,
// $$dollar$$ and $tag$dollar$tag$ quoting, TRUE/FALSE/NULL, typed literals
// (INTERVAL '1s', TIMESTAMP '...', mz_timestamp '1', any type name before a
// string) and $n parameters.
//
// The statements, each a type implementing Statement:
//
//	SELECT ...                                              *Select
//	VALUES (...), ... [ORDER BY] [LIMIT] [OFFSET]           *Select (Values set)
//	SUBSCRIBE [TO] {name | (SELECT ...)} ...                *Subscribe (SUBSCRIBE-SPEC.md grammar)
//	DECLARE c CURSOR [WITHOUT HOLD] FOR {SUBSCRIBE|SELECT|VALUES}  *DeclareCursor
//	FETCH [FORWARD|NEXT] [n|ALL] [FROM|IN] c [WITH (TIMEOUT ...)]  *Fetch
//	CLOSE {c | ALL}                                         *CloseCursor
//	CREATE TABLE [IF NOT EXISTS] t (col type [NOT NULL], ...) [WITH (RETAIN HISTORY ...)]  *CreateTable
//	CREATE [MATERIALIZED] VIEW [IF NOT EXISTS] v [(cols)] AS {SELECT|VALUES} ...  *CreateView
//	CREATE SOURCE [IF NOT EXISTS] s FROM LOAD GENERATOR {COUNTER|KEY VALUE|...} [(options)]  *CreateSource
//	DROP {TABLE|VIEW|MATERIALIZED VIEW|SOURCE|ROLE} [IF EXISTS] n, ... [CASCADE|RESTRICT]  *Drop
//	ALTER {TABLE|VIEW|MATERIALIZED VIEW|SOURCE} n {SET|RESET} (RETAIN HISTORY ...)  *AlterObject
//	CREATE ROLE r [WITH] options / ALTER ROLE r [WITH] options  *CreateRole, *AlterRole
//	GRANT/REVOKE {SELECT|INSERT|UPDATE|DELETE|ALL}, ... ON [TABLE] t TO/FROM r  *Grant
//	INSERT INTO t [(cols)] {VALUES (...), ... | SELECT ...}  *Insert
//	UPDATE t SET c = e, ... [WHERE e]                       *Update
//	DELETE FROM t [WHERE e]                                 *Delete
//	COPY {t [(cols)] | (SELECT ...) | (SUBSCRIBE ...)} {FROM STDIN | TO STDOUT} [options]  *Copy
//	BEGIN / START TRANSACTION [modes], COMMIT / END, ROLLBACK / ABORT  *Begin, *Commit, *Rollback
//	SET TRANSACTION modes                                   *SetTransaction
//	SET [SESSION|LOCAL] v {TO|=} {value, ...|DEFAULT}, SET TIME ZONE, SET NAMES  *SetVariable
//	ALTER SYSTEM SET v {TO|=} ... / ALTER SYSTEM RESET v     *SetVariable, *ResetVariable (ScopeSystem)
//	RESET {v | ALL}                                         *ResetVariable
//	SHOW {v | ALL | TIME ZONE | TRANSACTION ISOLATION LEVEL}  *ShowVariable
//	SHOW {TABLES|VIEWS|MATERIALIZED VIEWS|SOURCES} [FROM s]  *ShowObjects
//	SHOW COLUMNS FROM t / SHOW CREATE kind n                *ShowColumns, *ShowCreate
//	DISCARD {ALL|PLANS|SEQUENCES|TEMP}, DEALLOCATE {name|ALL}  *Discard, *Deallocate
//
// SELECT covers DISTINCT, select-list aliases, * and t.*, FROM with names
// (db.schema.name), subqueries, table functions, comma lists and [INNER | LEFT
// | RIGHT | FULL] JOIN ... {ON | USING} / CROSS JOIN, WHERE, GROUP BY, HAVING,
// ORDER BY ... [ASC|DESC] [NULLS FIRST|LAST], LIMIT, OFFSET, and Materialize's
// AS OF [AT LEAST]. SELECT without FROM works (SELECT version()). A VALUES
// list is a query wherever SELECT is (a statement, a view, FROM (VALUES ...)
// AS x(a, b), DECLARE, COPY, SUBSCRIBE); only a subquery in FROM takes
// column aliases.
//
// Not supported, failing with 0A000 and a message naming the feature: set
// operations (UNION ...), WITH (CTEs), DISTINCT ON, window functions, FILTER,
// ORDER BY inside calls, LATERAL, NATURAL JOIN, arrays (ARRAY[...], a[i]; the
// type text[] parses), row constructors, ANY/ALL, AT TIME ZONE, COLLATE,
// SIMILAR TO, LIKE ... ESCAPE, interval qualifiers (INTERVAL '1' DAY),
// DEFAULT in VALUES and SET, column and table constraints other than [NOT]
// NULL, ON CONFLICT, RETURNING, CREATE OR REPLACE, IN CLUSTER, sources other
// than load generators (and their FOR/INCLUDE/ENVELOPE clauses), WITH HOLD and
// SCROLL cursors, FETCH BACKWARD, COPY to or from files, and statements such
// as EXPLAIN, PREPARE, EXECUTE, TRUNCATE, LISTEN and SAVEPOINT.
//
// # AST shape
//
// The tree is made of pointers to node structs. Statement, Expr and TableExpr
// are closed interfaces (they have unexported methods); type-switch on the
// concrete types. Optional parts are nil (Exprs, *Select, *AsOf) or zero
// values (ObjectName, Envelope); slices are nil when their clause was not
// written. Names are plain strings, already folded; ObjectName holds
// database, schema and name parts. Spellings with the same meaning give the
// same tree: CAST(x AS t) and x::t are both a *Cast, != is <>, ISNULL is IS
// NULL, START TRANSACTION is a *Begin, old-style COPY options are normalized.
//
// Expressions are these nodes:
//
//	*NumberLit (Text as written)  *StringLit  *BoolLit  *NullLit  *TypedLit  *Param
//	*ColumnRef (a, t.a, s.t.a)    *Star (only in select lists)
//	*UnaryExpr (NOT, -, +)        *BinaryExpr (AND, OR, comparisons, arithmetic, ||,
//	                              LIKE/ILIKE, IS [NOT] DISTINCT FROM, JSON and other operators)
//	*IsExpr (IS [NOT] NULL/TRUE/FALSE/UNKNOWN)  *InExpr  *BetweenExpr  *CaseExpr
//	*Cast  *FuncCall (also count(*), COALESCE, NULLIF, GREATEST, LEAST, and
//	CURRENT_TIMESTAMP-style keywords with NoParens)  *Subquery  *Exists
//
// Operator precedence follows Postgres, loosest first: OR; AND; NOT; IS,
// ISNULL, NOTNULL; comparisons; LIKE, ILIKE, BETWEEN, IN; other operators
// (||, ->, ...); + -; * / %; ^; unary - +; ::. Comparisons, IS and LIKE do not
// chain ("a < b < c" is an error). Parentheses are not kept in the tree: the
// tree's shape records the grouping.
//
// Positions: ColumnRef.Pos, Param.Pos, TypeName.Pos, Option.Pos and
// ObjectName.Pos (so FuncCall.Name.Pos and every relation name) hold the
// 1-based character position of the node in the SQL text, for errors such as
// "column does not exist" that Postgres positions; 0 in trees built by hand.
//
// Options (SUBSCRIBE's SNAPSHOT and PROGRESS, FETCH's TIMEOUT, COPY's FORMAT,
// load generator options, RETAIN HISTORY, role options) are kept as written in
// an []Option; in a parenthesized list each name may appear once, as in
// Materialize (`PROGRESS specified more than once`, 42601). Their values are literals or bare words; Option.Bool,
// Option.Text and FindOption interpret them the way Postgres does.
//
// # Rendering
//
// Every node's String() renders canonical SQL: upper-case keywords, names
// quoted only when needed (QuoteIdent), strings with QuoteString, and exactly
// the parentheses that precedence requires. Parsing a rendering yields an
// equal tree (positions aside) that renders to the same text; FuzzParse and
// TestRoundTripSoup check this on arbitrary input. The catalog stores view
// definitions as CreateView.Query.String().
//
// # Walking
//
// Walk and Inspect visit statements, queries, FROM items and expressions
// depth-first, like go/ast. To find every column a statement references:
//
//	sql.Inspect(stmt, func(n sql.Node) bool {
//		if c, ok := n.(*sql.ColumnRef); ok {
//			use(c.Table, c.Column, c.Pos)
//		}
//		return true
//	})
//
// A planner usually walks the tree by hand instead, with a type switch per
// level: Statement, then the Select's clauses, then Expr.
package sql
