package expr

import (
	"strings"

	"github.com/shardtail/shardtail/row"
	"github.com/shardtail/shardtail/sql"
)

// ColumnType resolves a type name written in a column definition to a column
// type through row.ParseType. It reports false for array types, types
// qualified by a schema other than pg_catalog, and names that are not column
// types (interval, mz_timestamp, ...). The parser leaves names unresolved so
// that it imports nothing of ours; this is where the planner resolves them.
func ColumnType(t sql.TypeName) (row.Type, bool) {
	if t.Array || (t.Schema != "" && t.Schema != "pg_catalog") || t.Name != strings.ToLower(t.Name) {
		return row.TypeInvalid, false
	}
	return row.ParseType(t.Name)
}
