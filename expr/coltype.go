package expr

import (
	"strings"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// ColumnType resolves a type name written in a column definition to a column
// type and its modifier (varchar(3), numeric(5, 2), timestamp(3)), with the
// resolution and checks of a cast to it, so that float(24) is real and
// varchar(0) is refused. Array types, types qualified by a schema other
// than pg_catalog, quoted names that are not lower case, and names that
// are not column types (interval, mz_timestamp, ...) are 42704 "type does
// not exist". The parser leaves names unresolved so that it imports nothing
// of ours; this is where the planner resolves them.
func ColumnType(t sql.TypeName) (row.Type, row.TypeMod, error) {
	notExist := errf(CodeUndefinedObject, "type %q does not exist", t.String())
	if t.Array || (t.Schema != "" && t.Schema != "pg_catalog") || t.Name != strings.ToLower(t.Name) {
		return row.TypeInvalid, row.TypeMod{}, notExist
	}
	ref, err := resolveType(t)
	if e, ok := err.(*Error); ok && (e.code == CodeSyntaxError || e.code == CodeInvalidParameterValue) {
		// A bad modifier: numeric(0), varchar(0), int(3).
		return row.TypeInvalid, row.TypeMod{}, err
	}
	if err != nil || !ref.typ.IsRow() {
		return row.TypeInvalid, row.TypeMod{}, notExist
	}
	return row.Type(ref.typ), ref.mod, nil
}

// ColumnAssign returns the conversion that gives a value stored into column
// c its stored form under c's type modifier, as Postgres' assignment to a
// column does (INSERT, UPDATE SET, COPY FROM): numeric(p, s) rounds to s
// digits and fails with 22003 past p; varchar(n) fails with 22001 past n
// characters, unless the extra ones are spaces, which it cuts;
// timestamp(p) rounds to p fractional digits. It is nil when c has no
// modifier. The function gets and returns non-NULL datums of c's type.
func ColumnAssign(c row.Column) func(row.Datum) (row.Datum, error) {
	f, _ := AssignTo(c.Type, c)
	return f
}

// AssignTo is ColumnAssign for a value of type from, which an assignment
// cast also converts to c's type (INSERT INTO t SELECT an integer into a
// bigint column): the conversion gets non-NULL datums of type from. It is
// nil when none is needed; ok is false when no assignment cast exists
// (42804 for the caller).
func AssignTo(from row.Type, c row.Column) (f func(row.Datum) (row.Datum, error), ok bool) {
	if from == c.Type && !c.Mod.Set {
		return nil, true
	}
	return castFunc(FromRow(from), FromRow(c.Type), c.Mod, castAssignment)
}
