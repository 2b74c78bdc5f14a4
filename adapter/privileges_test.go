package adapter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/internal/testserver"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/pgwire"
)

// Privileges with --require-password: who may change roles, objects, the
// system and other sessions, checked statement by statement on a role-all
// server and through a tail process.

// passwordServers is a role-all server and a tail process in front of it,
// both requiring passwords, on one in-memory storage.
type passwordServers struct {
	up, tail *testserver.Server
}

// server returns the server a test's statements go to: the upstream, or
// with viaTail the tail process.
func (p *passwordServers) server(viaTail bool) *testserver.Server {
	if viaTail {
		return p.tail
	}
	return p.up
}

// startPasswordServers runs setup as the default superuser on a trusting
// server (the only way to give the first roles passwords), then starts a
// role-all server and a tail process on the same storage, both with
// RequirePassword. The tail asks for passwords in clear text so that it
// logs its sessions in upstream as the client's role.
func startPasswordServers(t testing.TB, setup ...string) *passwordServers {
	t.Helper()
	blob, cons := blobmem.New(), consmem.New()
	boot := testserver.Start(t, testserver.Options{Blob: blob, Consensus: cons})
	admin := connectMode(t, boot, pgx.QueryExecModeSimpleProtocol)
	mustExec(t, admin, setup...)
	admin.Close(context.Background())
	boot.Stop()

	require := func(c *adapter.Config) { c.RequirePassword = true }
	up := testserver.Start(t, testserver.Options{Blob: blob, Consensus: cons, Adapter: require})
	addr := up.Addr
	tail := testserver.Start(t, testserver.Options{Blob: blob, Consensus: cons,
		PGWire:  pgwire.Config{Auth: pgwire.AuthCleartext},
		Adapter: func(c *adapter.Config) { c.RequirePassword, c.Upstream = true, addr }})
	return &passwordServers{up: up, tail: tail}
}

// login connects as user with its password and fails the test otherwise.
func login(t testing.TB, s *testserver.Server, user, password string) *pgx.Conn {
	t.Helper()
	c, err := connectWith(t, s, user, password, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("login as %s: %v", user, err)
	}
	return c
}

// TestRoleSelfEscalation: an ordinary login role may change its own
// password, and nothing else about itself or other roles: not SUPERUSER,
// not CREATEROLE, not LOGIN; it may not create, alter or drop other roles.
// Issue 12: ALTER ROLE carol WITH SUPERUSER made carol a superuser.
func TestRoleSelfEscalation(t *testing.T) {
	for _, viaTail := range []bool{false, true} {
		t.Run(map[bool]string{false: "RoleAll", true: "Tail"}[viaTail], func(t *testing.T) {
			p := startPasswordServers(t,
				"ALTER ROLE materialize PASSWORD 'root'",
				"CREATE ROLE carol LOGIN PASSWORD 'carol-pw'",
				"CREATE ROLE dave LOGIN PASSWORD 'dave-pw'",
				"CREATE TABLE secret (a int8)")
			s := p.server(viaTail)
			ctx := context.Background()
			carol := login(t, s, "carol", "carol-pw")
			for _, q := range []string{
				"ALTER ROLE carol WITH SUPERUSER",
				"ALTER ROLE carol SUPERUSER PASSWORD 'carol-pw'",
				"ALTER ROLE carol CREATEROLE",
				"ALTER ROLE carol NOLOGIN",
				"ALTER ROLE carol LOGIN",
				"ALTER ROLE materialize NOSUPERUSER",
				"ALTER ROLE dave PASSWORD 'stolen'",
				"ALTER ROLE dave NOLOGIN",
				"CREATE ROLE mallory LOGIN PASSWORD 'm'",
				"DROP ROLE dave",
				"DROP TABLE secret",
				"ALTER SYSTEM SET max_result_size = '1GB'",
			} {
				_, err := carol.Exec(ctx, q)
				wantCode(t, err, "42501", q+" as carol")
			}
			roles := p.up.Coordinator.Catalog().State().Roles
			if r := roles["carol"]; r == nil || r.Superuser || !r.Login {
				t.Fatalf("carol after the denied ALTER ROLEs: %+v", r)
			}
			if _, ok := roles["mallory"]; ok {
				t.Errorf("carol created a role")
			}
			if _, err := connectWith(t, s, "dave", "dave-pw", pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Errorf("dave's password after carol's denied change: %v", err)
			}

			// Her own password she may change, and only that.
			if _, err := carol.Exec(ctx, "ALTER ROLE carol PASSWORD 'carol-new'"); err != nil {
				t.Fatalf("carol changes her own password: %v", err)
			}
			if _, err := connectWith(t, s, "carol", "carol-pw", pgx.QueryExecModeSimpleProtocol); err == nil {
				t.Errorf("carol's old password still logs in")
			}
			login(t, s, "carol", "carol-new")
		})
	}
}

// waitCatalog waits until the tail's catalog has caught up with the
// upstream's (a role just created there logs in at the tail).
func waitCatalog(t testing.TB, p *passwordServers) {
	t.Helper()
	want := p.up.Coordinator.Catalog().Seq()
	if err := waitFor(10*time.Second, func() error {
		if got := p.tail.Coordinator.Catalog().Seq(); got < want {
			return fmt.Errorf("tail catalog at %v, upstream at %v", got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
