package pgtest

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func TestURLGivesFreshDatabases(t *testing.T) {
	a, b := URL(t), URL(t)
	if a == b {
		t.Fatalf("two calls returned the same URL %s", a)
	}
	ca, cb := connect(t, a), connect(t, b)
	if _, err := ca.Exec(t.Context(), "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	var n int
	err := cb.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n)
	if err != nil || n != 0 {
		t.Fatalf("database b sees %d tables only_in_a (err %v); want 0", n, err)
	}
}

func TestCleanupDropsDatabase(t *testing.T) {
	var name string
	t.Run("Inner", func(t *testing.T) {
		// A connection still open at the drop must not stop it: close it
		// only after URL's cleanup (cleanups run last-registered first).
		var open *pgx.Conn
		t.Cleanup(func() {
			if open != nil {
				open.Close(context.Background())
			}
		})
		u, err := url.Parse(URL(t))
		if err != nil {
			t.Fatal(err)
		}
		name = strings.TrimPrefix(u.Path, "/")
		if open, err = pgx.Connect(t.Context(), u.String()); err != nil {
			t.Fatalf("connect: %v", err)
		}
	})
	if name == "" {
		t.Fatal("inner test got no database")
	}
	var n int
	err := connect(t, URL(t)).QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n)
	if err != nil || n != 0 {
		t.Fatalf("database %s still exists after its test (count %d, err %v)", name, n, err)
	}
}

// connect opens a connection closed when t ends, before URL's drop.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
