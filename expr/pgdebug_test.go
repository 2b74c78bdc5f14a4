package expr

import (
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/pgtest"
)

// TestPostgresDebug prints PostgreSQL's and shardtail's results for the
// expressions in $EXPR_DEBUG (separated by ";;"); a tool for triage.
func TestPostgresDebug(t *testing.T) {
	src := os.Getenv("EXPR_DEBUG")
	if src == "" {
		t.Skip("EXPR_DEBUG not set")
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.PgConn().Exec(ctx, pgSetup).Close(); err != nil {
		t.Fatal(err)
	}
	for _, e := range strings.Split(src, ";;") {
		st, _ := shardtailEval(e)
		t.Logf("%s\n   postgres:  %s\n   shardtail: %s", e, postgresEval(ctx, conn.PgConn(), e), st)
	}
}
