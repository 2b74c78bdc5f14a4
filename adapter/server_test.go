package adapter_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

func connect(t *testing.T, s *testserver.Server) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func TestSmoke(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	c := connect(t, s)
	ctx := context.Background()
	for _, q := range []string{
		"CREATE TABLE t (a int NOT NULL, b text)",
		"INSERT INTO t VALUES (1, 'x'), (2, 'y')",
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows, err := c.Query(ctx, "SELECT a, b FROM t WHERE a > $1 ORDER BY a", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var a int32
		var b string
		if err := rows.Scan(&a, &b); err != nil {
			t.Fatal(err)
		}
		got = append(got, b)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if len(got) != 2 || got[0] != "x" || got[1] != "y" {
		t.Fatalf("got %v", got)
	}
}
