package adapter_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// TestStorageShardsAndIDReference: mz_internal.mz_storage_shards gives each
// collection's id, shard, since and upper; SUBSCRIBE [id AS name] reads the
// object by id, and after a drop and recreate under the same name the old
// id is unknown (42P01) while the name finds the new object.
func TestStorageShardsAndIDReference(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connect(t, s)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE orders (id int)", "INSERT INTO orders VALUES (1)", "CREATE VIEW v AS SELECT id FROM orders")

	var id, shard, kind, since, upper string
	if err := c.QueryRow(ctx, "SELECT object_id, shard_id, type, since, upper FROM mz_internal.mz_storage_shards WHERE name = 'orders'").
		Scan(&id, &shard, &kind, &since, &upper); err != nil {
		t.Fatal(err)
	}
	sn, err1 := strconv.ParseUint(since, 10, 64)
	up, err2 := strconv.ParseUint(upper, 10, 64)
	if id == "" || id[0] != 'u' || shard == "" || kind != "table" || err1 != nil || err2 != nil || sn > up {
		t.Fatalf("orders: id %q shard %q type %q since %q upper %q", id, shard, kind, since, upper)
	}
	var viewShard *string
	if err := c.QueryRow(ctx, "SELECT shard_id FROM mz_internal.mz_storage_shards WHERE name = 'v'").Scan(&viewShard); err != nil || viewShard != nil {
		t.Fatalf("view shard_id = %v, %v; want NULL", viewShard, err)
	}

	fetchOne := func(stmt string) error {
		t.Helper()
		mustExec(t, c, "BEGIN")
		defer mustExec(t, c, "ROLLBACK")
		if _, err := c.Exec(ctx, "DECLARE cur CURSOR FOR "+stmt); err != nil {
			return err
		}
		rows, err := c.Query(ctx, "FETCH 1 cur WITH (TIMEOUT = '0s')")
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}
	if err := fetchOne("SUBSCRIBE [" + id + " AS orders]"); err != nil {
		t.Fatalf("subscribe by id: %v", err)
	}
	mustExec(t, c, "DROP VIEW v", "DROP TABLE orders", "CREATE TABLE orders (id int)")
	err := fetchOne("SUBSCRIBE [" + id + " AS orders]")
	wantCode(t, err, "42P01", "subscribe by the dropped object's id")
	if err := fetchOne("SUBSCRIBE orders"); err != nil {
		t.Fatalf("subscribe by name: %v", err)
	}
}

// TestSystemRelationLimitOffset: ORDER BY, LIMIT and OFFSET apply to
// system relations as to tables.
func TestSystemRelationLimitOffset(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connect(t, s)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE a (k int)", "CREATE TABLE b (k int)", "CREATE TABLE c (k int)")
	rows := func(q string) []string {
		t.Helper()
		got, err := rawRows(ctx, c, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return got
	}
	// The CREATE TABLEs: the statement log grows with the test's own
	// queries, and is written off the statement path.
	const created = "SELECT sql FROM mz_internal.mz_recent_activity_log WHERE sql LIKE 'CREATE TABLE %'"
	if err := waitFor(10*time.Second, func() error {
		if n := len(rows(created)); n != 3 {
			return fmt.Errorf("%d CREATE TABLEs logged, want 3", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, sel := range []string{"SELECT object_id FROM mz_internal.mz_storage_shards", created} {
		col := strings.Fields(sel)[1]
		all := rows(sel + " ORDER BY " + col)
		if len(all) < 3 {
			t.Fatalf("%s: %v, want 3 rows or more", sel, all)
		}
		n := len(all)
		for _, tc := range []struct {
			q    string
			want []string
		}{
			{sel + " ORDER BY " + col + " LIMIT 1", all[:1]},
			{sel + " ORDER BY " + col + " OFFSET 1", all[1:]},
			{sel + " ORDER BY " + col + " LIMIT 1 OFFSET 2", all[2:3]},
			{sel + " ORDER BY " + col + " DESC LIMIT 2", []string{all[n-1], all[n-2]}},
			{sel + " LIMIT 0", nil},
			{sel + fmt.Sprintf(" OFFSET %d", n), nil},
		} {
			wantRows(t, tc.q, rows(tc.q), tc.want)
		}
		if got := rows(sel + " LIMIT 1"); len(got) != 1 {
			t.Errorf("%s LIMIT 1: %d rows, want 1", sel, len(got))
		}
	}
}

// TestSystemRelationGrouping: DISTINCT, GROUP BY and HAVING over a system
// relation are refused as over a table (0A000), not ignored: SELECT
// DISTINCT type FROM mz_internal.mz_storage_shards returned every row.
func TestSystemRelationGrouping(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connect(t, s)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE a (k int)", "CREATE TABLE b (k int)")
	for _, q := range []string{
		"SELECT DISTINCT type FROM mz_internal.mz_storage_shards",
		"SELECT type FROM mz_internal.mz_storage_shards GROUP BY type",
		"SELECT type FROM mz_internal.mz_storage_shards HAVING true",
		"SELECT DISTINCT path FROM mz_internal.mz_subscriptions",
	} {
		_, err := rawRows(ctx, c, q)
		wantCode(t, err, "0A000", q)
	}
}

// TestSelectDottedName: a table or materialized view whose quoted name holds
// a dot is read by SELECT like any other (it was taken for a system
// relation: 42P01 unknown catalog item), as INSERT, UPDATE and SUBSCRIBE
// read it; an unknown system relation is still 42P01.
func TestSelectDottedName(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connect(t, s)
	ctx := context.Background()
	mustExec(t, c, `CREATE TABLE "a.b" (x int)`, `INSERT INTO "a.b" VALUES (1), (2)`,
		`CREATE MATERIALIZED VIEW "m.v" AS SELECT x FROM "a.b" WHERE x > 1`)
	for q, want := range map[string][]string{
		`SELECT x FROM "a.b"`:                  {"1", "2"},
		`SELECT x FROM public."a.b" WHERE x=2`: {"2"},
		`SELECT t.x FROM "a.b" t LIMIT 1`:      {"1"},
		`SELECT x FROM "m.v"`:                  {"2"},
	} {
		if got := queryRows(t, c, q); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: %v, want %v", q, got, want)
		}
	}
	_, err := rawRows(ctx, c, "SELECT * FROM mz_internal.nope")
	wantCode(t, err, "42P01", "unknown system relation")
}
