package adapter_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// TestRoleConnectionLimit checks CONNECTION LIMIT as Postgres has it: past
// the limit a login gets FATAL 53300 `too many connections for role "r"`,
// a closed session frees its place, ALTER ROLE changes the limit (-1 lifts
// it), and superusers are exempt.
func TestRoleConnectionLimit(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	admin := connectMode(t, s, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, admin, "CREATE ROLE r LOGIN CONNECTION LIMIT 2", "CREATE ROLE su LOGIN SUPERUSER CONNECTION LIMIT 0")

	login := func(user string) *pgx.Conn {
		t.Helper()
		c, err := connectWith(t, s, user, "", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatalf("login as %s: %v", user, err)
		}
		return c
	}
	refused := func(user, what string) {
		t.Helper()
		c, err := connectWith(t, s, user, "", pgx.QueryExecModeSimpleProtocol)
		if err == nil {
			c.Close(context.Background())
		}
		if pe := wantCode(t, err, "53300", what); pe != nil {
			if want := `too many connections for role "` + user + `"`; pe.Message != want || pe.Severity != "FATAL" {
				t.Errorf("%s: got %s %q, want FATAL %q", what, pe.Severity, pe.Message, want)
			}
		}
	}

	first, _ := login("r"), login("r")
	refused("r", "a third session with CONNECTION LIMIT 2")
	first.Close(context.Background())
	// The server ends the closed session after the client has gone.
	if err := waitFor(5*time.Second, func() error {
		_, err := connectWith(t, s, "r", "", pgx.QueryExecModeSimpleProtocol)
		return err
	}); err != nil {
		t.Fatalf("a login after a session of r closed: %v", err)
	}

	mustExec(t, admin, "ALTER ROLE r CONNECTION LIMIT 3")
	login("r")
	refused("r", "a fourth session with CONNECTION LIMIT 3")
	mustExec(t, admin, "ALTER ROLE r CONNECTION LIMIT -1")
	login("r")
	mustExec(t, admin, "ALTER ROLE r CONNECTION LIMIT 0")
	refused("r", "a session with CONNECTION LIMIT 0")

	// Superusers are exempt, as in Postgres.
	login("su")
	login("su")

	_, err := admin.Exec(context.Background(), "ALTER ROLE r CONNECTION LIMIT -2")
	if pe := wantCode(t, err, "22023", "CONNECTION LIMIT -2"); pe != nil && pe.Message != "invalid connection limit: -2" {
		t.Errorf("CONNECTION LIMIT -2: got %q", pe.Message)
	}
}
