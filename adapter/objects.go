package adapter

import (
	"context"
	"strconv"

	"github.com/shardtail/shardtail/catalog"
	"github.com/shardtail/shardtail/row"
)

// mz_internal.mz_storage_shards names each collection's catalog id and
// shard, as Materialize's relation of that name does (object_id,
// shard_id), followed by our columns: the name and kind a consumer looks
// the id up by, and the shard's since and upper for a margin check before
// resuming (a resume AS OF below since is history lost). Views have no
// shard: their shard_id, since and upper are NULL. In a tail process the
// relation is answered by the upstream, which owns the catalog.
func init() {
	systemRelations["mz_internal.mz_storage_shards"] = systemRelation{
		schema: row.Schema{Columns: storageShardsColumns},
		rows:   (*Session).storageShardRows,
	}
}

var storageShardsColumns = []row.Column{
	{Name: "object_id", Type: row.TypeText},
	{Name: "shard_id", Type: row.TypeText, Nullable: true},
	{Name: "schema_name", Type: row.TypeText},
	{Name: "name", Type: row.TypeText},
	{Name: "type", Type: row.TypeText},
	{Name: "since", Type: row.TypeNumeric, Nullable: true},
	{Name: "upper", Type: row.TypeNumeric, Nullable: true},
}

func (s *Session) storageShardRows(ctx context.Context) ([]row.Row, error) {
	if s.c.isProxy() {
		return s.upstreamRows(ctx, "SELECT * FROM mz_internal.mz_storage_shards", storageShardsColumns)
	}
	var rows []row.Row
	for _, it := range s.c.catalog.State().SortedItems() {
		r := row.Row{itemID(it), nil, "public", it.Name, string(it.Kind), nil, nil}
		if it.Shard != "" {
			st, err := s.c.persist.State(ctx, it.Shard)
			if err != nil {
				return nil, mapPersistErr(err, it.Name)
			}
			r[1] = it.Shard
			r[5] = row.Numeric(strconv.FormatUint(st.Since, 10))
			r[6] = row.Numeric(strconv.FormatUint(st.Upper, 10))
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// itemID renders a catalog id as Materialize does: u for user objects.
func itemID(it *catalog.Item) string { return "u" + strconv.FormatUint(it.ID, 10) }

// lookupID resolves an id reference ([u12 AS name]) by id alone: the name
// is the client's label, and the point of the reference is that an object
// recreated under that name is not the one meant.
func (s *Session) lookupID(id string) (*catalog.Item, error) {
	if len(id) > 1 && id[0] == 'u' {
		if v, err := strconv.ParseUint(id[1:], 10, 64); err == nil {
			if it := s.c.catalog.State().ItemByID(v); it != nil {
				return it, nil
			}
		}
	}
	return nil, errorf(codeUndefinedTable, "unknown catalog item '%s'", id)
}
