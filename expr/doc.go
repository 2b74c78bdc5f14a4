// Package expr compiles the scalar expressions of shardtail's SQL dialect
// (PostgreSQL's, with Materialize's additions) into typed, evaluable
// expressions, and builds from a WHERE clause and a select list the
// map/filter/project (MFP) that views, materialized views and
// SUBSCRIBE (SELECT ...) apply to every update.
//
// # Main types
//
// A Scope names what an expression may refer to: the columns of one or
// more relations laid side by side in the input row, qualified by table
// name or alias, and the parameters $1, $2, ... Compile type-checks a
// sql.Expr against a Scope and returns an Expr; Eval computes it on a row
// with an EvalContext that holds the parameter values and the query's
// timestamp. CompileMFP does the same for WHERE and a select list and
// returns an *MFP, whose Apply the dataflow package calls per row:
//
//	m, err := expr.CompileMFP(schema, "t", sel.Where, sel.Items, nil)
//	if err != nil { ... } // a *Error with a SQLSTATE: 42703, 42883, ...
//	m = m.Bind(expr.EvalContext{Now: asOf, Params: params})
//	for _, u := range updates {
//		out, ok, err := m.Apply(u.Row) // WHERE false or NULL: ok is false
//		...
//	}
//
// CompileAssign compiles a value for INSERT or UPDATE with Postgres'
// assignment rules; ColumnAssign is the rest of them, a column's type
// modifier (varchar(n), numeric(p, s), timestamp(p)), which every write
// path applies to the value it stores, however it was computed or parsed.
// ColumnType resolves a column definition's type and modifier. EvalConst evaluates the constant expressions of AS OF, UP TO, LIMIT,
// FETCH ... TIMEOUT and RETAIN HISTORY FOR, converted to the type the
// clause needs (mz_timestamp, interval, bigint); IntervalDuration turns an
// interval into a time.Duration.
//
// # Types
//
// Expression types (Type) are the fourteen column types of row.Type plus
// three pseudo-types: unknown (a string literal or NULL not yet given a
// type by its context), mz_timestamp (uint64 milliseconds, shown as
// numeric) and interval. Types are resolved bottom-up as Postgres does:
//
//   - Integer literals are int4 if they fit, else int8, else numeric; a
//     literal with a point or exponent is numeric; a minus sign before a
//     literal is part of it (-2147483648 is int4).
//   - A string literal is unknown until an operator, function or cast
//     gives it a type: in a = '5' it is parsed as a's type, and 'x' there
//     fails at compile time with 22P02. Left unknown, it is text.
//   - Operators are resolved over their signatures (ops.go): an exact
//     match, with an unknown operand taking the other's type; for two
//     numbers, their common type (int2 < int4 < int8 < numeric < real <
//     double precision; real with an integer or numeric is double
//     precision); otherwise the candidate reachable by implicit casts with
//     the most exact matches, ties going to text for unknown operands and
//     then to Postgres' preferred types (double precision, text,
//     timestamptz, interval). No candidate is 42883 `operator does not
//     exist: integer + text`; a tie is 42725.
//   - Functions resolve the same way over their overloads (funcs.go).
//   - CASE, COALESCE, GREATEST, LEAST and IN take the common type of their
//     arguments (the widest of one category; 42804 `CASE types integer and
//     text cannot be matched` across categories). IN follows Postgres'
//     transformAExprIn: the constant elements share a type, and elements
//     with column references are compared one by one.
//   - Implicit conversions widen within a category (int4 to numeric, date
//     to timestamptz) and take numbers and timestamps to mz_timestamp.
//     Assignment conversions (EvalConst) also narrow numbers and convert
//     anything to text. Explicit casts also parse text and convert
//     int4 <-> bool and jsonb to scalars; text input and output go through
//     pgrepr, so 'x'::int is Postgres' 22P02 error.
//   - A parameter whose type the client did not declare takes the type its
//     context needs (a = $1: a's type); one that nothing determines is
//     text. Scope.ParamTypes and MFP.ParamTypes report them.
//
// # NULL and evaluation
//
// Operators and most functions are strict: a NULL argument makes the
// result NULL. All arguments are evaluated first, so an error in one is
// reported even when another is NULL, as in Postgres. AND, OR and NOT use
// three-valued logic and stop at the first deciding argument; IS [NOT]
// DISTINCT FROM treats NULLs as equal; x IN (...) is NULL when no element
// matches and x or an element is NULL; CASE, COALESCE, GREATEST, LEAST,
// NULLIF, concat and concat_ws have their Postgres NULL rules. A WHERE
// that is NULL filters the row out.
//
// Subexpressions whose operands are constants are folded at compile time.
// A fold that fails is left for evaluation: Postgres reports such errors
// while planning even in branches never taken, shardtail only when the
// value is needed. As in Postgres' planner, a strict operator with a NULL
// constant operand folds to NULL, and a constant false (true) decides an
// AND (OR).
//
// Evaluation is deterministic: now(), current_timestamp and mz_now() read
// EvalContext.Now (the query timestamp), never the clock, so re-evaluating
// a view gives the same rows. Scope.UsesNow and MFP.UsesNow tell the
// planner to reject them in a materialized view.
//
// Arithmetic follows Postgres: integer overflow is 22003 ("integer out of
// range"), division by zero 22012, integer division truncates, floats check
// overflow and underflow, numerics are exact for + - * and divide to at
// least 16 significant digits (select_div_scale), rounding half away from
// zero, with results in row.Numeric's canonical form (so 1.50 is 1.5).
// Text compares bytewise (collation C) and LIKE, ILIKE and lower/upper
// work on Unicode characters.
//
// # Adding a function
//
// Append its overloads in funcs.go's init with def, using f1..f3 for
// strict functions of one to three arguments:
//
//	def("reverse", f1(TypeText, TypeText, func(a row.Datum) (row.Datum, error) {
//		... // a is a non-NULL string; return a string or a *Error
//	}))
//
// List overloads in Postgres' order of preference (double precision before
// numeric). Implementations receive datums of the declared Go types and
// must be pure; anything time-dependent reads the EvalContext (set usesNow
// so the call is never folded). Errors are *Error values with Postgres'
// SQLSTATE and wording. Add cases to the table in eval_test.go and, when
// Postgres has the function, to differentialCorpus in postgres_test.go,
// which compares results with a real PostgreSQL.
//
// # Not supported
//
// Aggregates, window functions, set-returning functions and subqueries are
// 0A000 feature_not_supported, as are arrays and the types time, char,
// money and the like. Regular expressions (~) use Go's RE2 syntax. Numerics
// have no infinity; numeric and jsonb numbers lose trailing fractional
// zeros; varchar(n) is text.
package expr
