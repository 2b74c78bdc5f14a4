package adapter_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/adapter"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
	blobmem "github.com/shardtail/shardtail/persist/blob/mem"
	consmem "github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/pgwire"
)

// Privileges with --require-password: who may change roles, objects, the
// system and other sessions, checked statement by statement on a role-all
// server and through a proxy process.

// passwordServers is a role-all server and a proxy process in front of it,
// both requiring passwords, on one in-memory storage.
type passwordServers struct {
	up, proxy *testserver.Server
}

// server returns the server a test's statements go to: the upstream, or
// with viaProxy the proxy process.
func (p *passwordServers) server(viaProxy bool) *testserver.Server {
	if viaProxy {
		return p.proxy
	}
	return p.up
}

// startPasswordServers runs setup as the default superuser on a trusting
// server (the only way to give the first roles passwords), then starts a
// role-all server and a proxy process on the same storage, both with
// RequirePassword. The proxy asks for passwords in clear text so that it
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
	proxy := testserver.Start(t, testserver.Options{Blob: blob, Consensus: cons,
		PGWire:  pgwire.Config{Auth: pgwire.AuthCleartext},
		Adapter: func(c *adapter.Config) { c.RequirePassword, c.Upstream = true, addr }})
	return &passwordServers{up: up, proxy: proxy}
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
	for _, viaProxy := range []bool{false, true} {
		t.Run(map[bool]string{false: "RoleAll", true: "Proxy"}[viaProxy], func(t *testing.T) {
			p := startPasswordServers(t,
				"ALTER ROLE materialize PASSWORD 'root'",
				"CREATE ROLE carol LOGIN PASSWORD 'carol-pw'",
				"CREATE ROLE dave LOGIN PASSWORD 'dave-pw'",
				"CREATE TABLE secret (a int8)")
			s := p.server(viaProxy)
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

// The privilege matrix: every kind of statement the server runs, as four
// roles, each cell with the SQLSTATE it must end with ("" for success).
//
// The columns are roles: the owner of the objects the statement names (for
// a role statement: the role acting on itself, {self}); a role granted
// what the statement needs (object privileges granted for the cell, or for
// role statements the CREATEROLE attribute); a role granted nothing; and a
// superuser that owns nothing. Each cell gets fresh objects, named after
// the cell, created by their owner on the role-all server:
//
//	{t} a table holding one row      {v} a view of {t}
//	{m} a materialized view of {t}   {s} a load-generator source
//	{r} a login role                 {su} a superuser role
//	{n} a name for the statement to create
//	{self} the acting role           {ownpid}, {superpid} the process ids
//	                                 of idle sessions of the owner and of
//	                                 a superuser, on the server under test
//
// The statement log is readable by every role; what a role sees there is
// its own statements unless it is a superuser (TestStatementLogVisibility
// checks the rows).

// Matrix columns.
const (
	colOwner = iota
	colGranted
	colNone
	colSuper
)

var privColumns = [4]string{"Owner", "Granted", "NotGranted", "Superuser"}

// The matrix's roles and their passwords.
const (
	privOwner   = "own"
	privGrantee = "grt"
	privCreator = "creator" // CREATEROLE: the granted column of role statements
	privNone    = "nobody"
	privSuper   = "boss"
)

// privSetup creates the matrix's roles (run by startPasswordServers).
var privSetup = []string{
	"ALTER ROLE materialize PASSWORD 'materialize-pw'",
	"CREATE ROLE own LOGIN PASSWORD 'own-pw'",
	"CREATE ROLE grt LOGIN PASSWORD 'grt-pw'",
	"CREATE ROLE creator LOGIN CREATEROLE PASSWORD 'creator-pw'",
	"CREATE ROLE nobody LOGIN PASSWORD 'nobody-pw'",
	"CREATE ROLE boss LOGIN SUPERUSER PASSWORD 'boss-pw'",
}

// privCase is a row of the matrix.
type privCase struct {
	name string
	// stmts run in order as the cell's role; the first error ends the
	// cell (a transaction is rolled back). A statement starting with
	// "COPY FROM:" is COPY ... FROM STDIN fed one row; "COPY TO:" is
	// COPY ... TO STDOUT. One starting with "STREAM:" (a SUBSCRIBE, or a
	// COPY TO of one) succeeds when its first row arrives; it is then
	// canceled with a CancelRequest, which must end it with 57014.
	stmts []string
	// grant is what the owner grants the granted column's role for its
	// cell ("SELECT ON {t}"); empty for none.
	grant string
	// creator makes the CREATEROLE role the granted column (role
	// statements).
	creator bool
	// fresh gives every cell its own objects, for statements that destroy
	// them; the cells of other rows share the row's objects.
	fresh bool
	want  [4]string
}

const denied = "42501"

var privCases = []privCase{
	// DDL on objects: any role creates (there are no schema privileges);
	// a view needs SELECT on what it reads; only the owner drops, alters
	// and grants.
	{name: "CreateTable", stmts: []string{"CREATE TABLE {n} (a int8)"}, want: [4]string{"", "", "", ""}},
	{name: "CreateView", stmts: []string{"CREATE VIEW {n} AS SELECT a FROM {t}"}, grant: "SELECT ON {t}", want: [4]string{"", "", denied, ""}},
	{name: "CreateMaterializedView", stmts: []string{"CREATE MATERIALIZED VIEW {n} AS SELECT a FROM {t}"}, grant: "SELECT ON {t}", want: [4]string{"", "", denied, ""}},
	{name: "CreateSource", stmts: []string{"CREATE SOURCE {n} FROM LOAD GENERATOR COUNTER (TICK INTERVAL '1h')"}, want: [4]string{"", "", "", ""}},
	{name: "DropTable", fresh: true, stmts: []string{"DROP TABLE {t}"}, grant: "ALL ON {t}", want: [4]string{"", denied, denied, ""}},
	{name: "DropView", fresh: true, stmts: []string{"DROP VIEW {v}"}, grant: "SELECT ON {v}", want: [4]string{"", denied, denied, ""}},
	{name: "DropMaterializedView", fresh: true, stmts: []string{"DROP MATERIALIZED VIEW {m}"}, grant: "SELECT ON {m}", want: [4]string{"", denied, denied, ""}},
	{name: "DropSource", fresh: true, stmts: []string{"DROP SOURCE {s}"}, grant: "SELECT ON {s}", want: [4]string{"", denied, denied, ""}},
	{name: "AlterTable", stmts: []string{"ALTER TABLE {t} SET (RETAIN HISTORY FOR '1h')"}, grant: "ALL ON {t}", want: [4]string{"", denied, denied, ""}},
	{name: "AlterMaterializedView", stmts: []string{"ALTER MATERIALIZED VIEW {m} SET (RETAIN HISTORY FOR '1h')"}, grant: "SELECT ON {m}", want: [4]string{"", denied, denied, ""}},
	{name: "Grant", stmts: []string{"GRANT SELECT ON {t} TO nobody"}, grant: "ALL ON {t}", want: [4]string{"", denied, denied, ""}},
	{name: "Revoke", stmts: []string{"REVOKE SELECT ON {t} FROM grt"}, grant: "ALL ON {t}", want: [4]string{"", denied, denied, ""}},

	// DCL: roles.
	{name: "CreateRole", stmts: []string{"CREATE ROLE {n} LOGIN PASSWORD 'x'"}, creator: true, want: [4]string{denied, "", denied, ""}},
	{name: "CreateRoleCreateRole", stmts: []string{"CREATE ROLE {n} CREATEROLE"}, creator: true, want: [4]string{denied, "", denied, ""}},
	{name: "CreateSuperuser", stmts: []string{"CREATE ROLE {n} SUPERUSER"}, creator: true, want: [4]string{denied, denied, denied, ""}},
	{name: "AlterOwnPassword", stmts: []string{"ALTER ROLE {self} PASSWORD '{selfpw}'"}, creator: true, want: [4]string{"", "", "", ""}},
	{name: "AlterSelfSuperuser", stmts: []string{"ALTER ROLE {self} WITH SUPERUSER"}, creator: true, want: [4]string{denied, denied, denied, ""}},
	{name: "AlterSelfSuperuserAndPassword", stmts: []string{"ALTER ROLE {self} SUPERUSER PASSWORD '{selfpw}'"}, creator: true, want: [4]string{denied, denied, denied, ""}},
	{name: "AlterSelfCreateRole", stmts: []string{"ALTER ROLE {self} CREATEROLE"}, creator: true, want: [4]string{denied, "", denied, ""}},
	{name: "AlterSelfLogin", stmts: []string{"ALTER ROLE {self} LOGIN"}, creator: true, want: [4]string{denied, "", denied, ""}},
	{name: "AlterSelfCreateDB", stmts: []string{"ALTER ROLE {self} CREATEDB"}, creator: true, want: [4]string{denied, "", denied, ""}},
	{name: "AlterOtherPassword", stmts: []string{"ALTER ROLE {r} PASSWORD 'stolen'"}, creator: true, want: [4]string{denied, "", denied, ""}},
	{name: "AlterOtherNoLogin", stmts: []string{"ALTER ROLE {r} NOLOGIN"}, creator: true, want: [4]string{denied, "", denied, ""}},
	{name: "AlterOtherSuperuser", stmts: []string{"ALTER ROLE {r} SUPERUSER"}, creator: true, want: [4]string{denied, denied, denied, ""}},
	{name: "AlterSuperuserPassword", stmts: []string{"ALTER ROLE {su} PASSWORD 'stolen'"}, creator: true, want: [4]string{denied, denied, denied, ""}},
	{name: "AlterSuperuserNoSuperuser", stmts: []string{"ALTER ROLE {su} NOSUPERUSER"}, creator: true, want: [4]string{denied, denied, denied, ""}},
	{name: "DropRole", fresh: true, stmts: []string{"DROP ROLE {r}"}, creator: true, want: [4]string{denied, "", denied, ""}},
	{name: "DropSuperuser", fresh: true, stmts: []string{"DROP ROLE {su}"}, creator: true, want: [4]string{denied, denied, denied, ""}},

	// The system.
	{name: "AlterSystemSet", stmts: []string{"ALTER SYSTEM SET max_result_size = '1GB'"}, creator: true, want: [4]string{denied, denied, denied, ""}},
	{name: "AlterSystemReset", stmts: []string{"ALTER SYSTEM RESET max_result_size"}, creator: true, want: [4]string{denied, denied, denied, ""}},

	// Other sessions: the owner's own other session, a superuser's. The
	// granted column is a role with privileges on objects, which give no
	// say over other roles' sessions.
	{name: "CancelOwnRole", stmts: []string{"SELECT pg_cancel_backend({ownpid})"}, grant: "ALL ON {t}", want: [4]string{"", denied, denied, ""}},
	{name: "CancelSuperuser", stmts: []string{"SELECT pg_cancel_backend({superpid})"}, creator: true, want: [4]string{denied, denied, denied, ""}},
	{name: "CancelNoSuchPid", stmts: []string{"SELECT pg_cancel_backend(0)"}, want: [4]string{"", "", "", ""}},

	// Writes. UPDATE and DELETE read the rows they change, so they need
	// SELECT too (as Materialize, which reads then writes).
	{name: "Insert", stmts: []string{"INSERT INTO {t} VALUES (2)"}, grant: "INSERT ON {t}", want: [4]string{"", "", denied, ""}},
	{name: "InsertSelect", stmts: []string{"INSERT INTO {t} SELECT a FROM {t}"}, grant: "INSERT, SELECT ON {t}", want: [4]string{"", "", denied, ""}},
	{name: "InsertSelectWithoutSelect", stmts: []string{"INSERT INTO {t} SELECT a FROM {t}"}, grant: "INSERT ON {t}", want: [4]string{"", denied, denied, ""}},
	{name: "Update", stmts: []string{"UPDATE {t} SET a = 2 WHERE a = 1"}, grant: "UPDATE, SELECT ON {t}", want: [4]string{"", "", denied, ""}},
	{name: "UpdateWithoutSelect", stmts: []string{"UPDATE {t} SET a = 2"}, grant: "UPDATE ON {t}", want: [4]string{"", denied, denied, ""}},
	{name: "Delete", stmts: []string{"DELETE FROM {t} WHERE a = 1"}, grant: "DELETE, SELECT ON {t}", want: [4]string{"", "", denied, ""}},
	{name: "DeleteWithoutSelect", stmts: []string{"DELETE FROM {t}"}, grant: "DELETE ON {t}", want: [4]string{"", denied, denied, ""}},
	{name: "CopyFrom", stmts: []string{"COPY FROM:COPY {t} FROM STDIN"}, grant: "INSERT ON {t}", want: [4]string{"", "", denied, ""}},
	{name: "InsertOnlySelectGranted", stmts: []string{"INSERT INTO {t} VALUES (2)"}, grant: "SELECT ON {t}", want: [4]string{"", denied, denied, ""}},

	// Reads.
	{name: "SelectTable", stmts: []string{"SELECT a FROM {t}"}, grant: "SELECT ON {t}", want: [4]string{"", "", denied, ""}},
	{name: "SelectTableOnlyInsertGranted", stmts: []string{"SELECT a FROM {t}"}, grant: "INSERT ON {t}", want: [4]string{"", denied, denied, ""}},
	{name: "SelectView", stmts: []string{"SELECT a FROM {v}"}, grant: "SELECT ON {v}", want: [4]string{"", "", denied, ""}},
	{name: "SelectMaterializedView", stmts: []string{"SELECT a FROM {m}"}, grant: "SELECT ON {m}", want: [4]string{"", "", denied, ""}},
	{name: "SelectSource", stmts: []string{"SELECT counter FROM {s}"}, grant: "SELECT ON {s}", want: [4]string{"", "", denied, ""}},
	{name: "CopyTo", stmts: []string{"COPY TO:COPY {t} TO STDOUT"}, grant: "SELECT ON {t}", want: [4]string{"", "", denied, ""}},
	{name: "CopySelectTo", stmts: []string{"COPY TO:COPY (SELECT a FROM {t}) TO STDOUT"}, grant: "SELECT ON {t}", want: [4]string{"", "", denied, ""}},
	{name: "SubscribeTable", stmts: []string{"STREAM:SUBSCRIBE {t}"}, grant: "SELECT ON {t}", want: [4]string{"", "", denied, ""}},
	{name: "SubscribeMaterializedView", stmts: []string{"STREAM:SUBSCRIBE {m}"}, grant: "SELECT ON {m}", want: [4]string{"", "", denied, ""}},
	{name: "SubscribeView", stmts: []string{"STREAM:SUBSCRIBE {v}"}, grant: "SELECT ON {v}", want: [4]string{"", "", denied, ""}},
	{name: "CopySubscribeTo", stmts: []string{"STREAM:COPY (SUBSCRIBE {t}) TO STDOUT"}, grant: "SELECT ON {t}", want: [4]string{"", "", denied, ""}},
	{name: "DeclareFetchTable", stmts: []string{"BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE {t}", "FETCH ALL c WITH (timeout = '0s')", "COMMIT"},
		grant: "SELECT ON {t}", want: [4]string{"", "", denied, ""}},
	{name: "DeclareFetchMaterializedView", stmts: []string{"BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE {m}", "FETCH ALL c WITH (timeout = '0s')", "COMMIT"},
		grant: "SELECT ON {m}", want: [4]string{"", "", denied, ""}},
	{name: "DeclareFetchView", stmts: []string{"BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE {v}", "FETCH ALL c WITH (timeout = '0s')", "COMMIT"},
		grant: "SELECT ON {v}", want: [4]string{"", "", denied, ""}},
	{name: "DeclareFetchSelect", stmts: []string{"BEGIN", "DECLARE c CURSOR FOR SELECT a FROM {t}", "FETCH ALL c", "COMMIT"},
		grant: "SELECT ON {t}", want: [4]string{"", "", denied, ""}},

	// Definitions: Materialize shows them to every role with USAGE on the
	// schema, which PUBLIC has on materialize.public.
	{name: "ShowCreateTable", stmts: []string{"SHOW CREATE TABLE {t}"}, want: [4]string{"", "", "", ""}},
	{name: "ShowCreateView", stmts: []string{"SHOW CREATE VIEW {v}"}, want: [4]string{"", "", "", ""}},
	{name: "ShowCreateMaterializedView", stmts: []string{"SHOW CREATE MATERIALIZED VIEW {m}"}, want: [4]string{"", "", "", ""}},
	{name: "ShowColumns", stmts: []string{"SHOW COLUMNS FROM {t}"}, want: [4]string{"", "", "", ""}},

	// The statement log.
	{name: "SelectStatementLog", stmts: []string{"SELECT sql, finished_status FROM mz_internal.mz_recent_activity_log WHERE authenticated_user = '{self}'"},
		creator: true, want: [4]string{"", "", "", ""}},
	{name: "SelectStatementHistory", stmts: []string{"SELECT execution_strategy FROM mz_internal.mz_statement_execution_history"}, want: [4]string{"", "", "", ""}},
}

// TestPrivilegeMatrix runs privCases on a role-all server and through a
// proxy process, with passwords required.
func TestPrivilegeMatrix(t *testing.T) {
	for _, viaProxy := range []bool{false, true} {
		t.Run(map[bool]string{false: "RoleAll", true: "Proxy"}[viaProxy], func(t *testing.T) {
			p := startPasswordServers(t, privSetup...)
			m := newPrivMatrix(t, p, viaProxy)
			cell := 0
			for _, tc := range privCases {
				t.Run(tc.name, func(t *testing.T) {
					var objects map[string]string
					for col, want := range tc.want {
						cell++
						if objects == nil || tc.fresh {
							objects = m.createObjects(t, tc, cell)
						}
						got := m.run(t, tc, col, cell, objects)
						if got != want {
							t.Errorf("%s as %s (%s): got SQLSTATE %q, want %q", tc.name, m.actor(tc, col), privColumns[col], got, want)
						}
					}
				})
			}
		})
	}
}

// privMatrix runs the cells of one server.
type privMatrix struct {
	p        *passwordServers
	s        *testserver.Server // where the statements under test go
	viaProxy bool
	// admin holds the upstream connections that set cells up, by role.
	admin map[string]*pgx.Conn
	// conns holds the connections to s that run cells, by role.
	conns              map[string]*pgx.Conn
	ownPID, superPID   uint32
	ownIdle, superIdle *pgx.Conn
}

func newPrivMatrix(t *testing.T, p *passwordServers, viaProxy bool) *privMatrix {
	t.Helper()
	m := &privMatrix{p: p, s: p.server(viaProxy), viaProxy: viaProxy, admin: map[string]*pgx.Conn{}, conns: map[string]*pgx.Conn{}}
	for _, r := range []string{privOwner, privSuper} {
		m.admin[r] = login(t, p.up, r, r+"-pw")
	}
	for _, r := range []string{privOwner, privGrantee, privCreator, privNone, privSuper} {
		m.conns[r] = login(t, m.s, r, r+"-pw")
	}
	m.ownIdle, m.ownPID = idleSession(t, m.s, privOwner)
	m.superIdle, m.superPID = idleSession(t, m.s, privSuper)
	return m
}

// idleSession opens a session of role on s that stays idle, and returns
// its process id.
func idleSession(t *testing.T, s *testserver.Server, role string) (*pgx.Conn, uint32) {
	t.Helper()
	c := login(t, s, role, role+"-pw")
	var pid uint32
	if err := c.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatalf("pg_backend_pid: %v", err)
	}
	return c, pid
}

// actor returns the role of a column for tc.
func (m *privMatrix) actor(tc privCase, col int) string {
	switch col {
	case colOwner:
		return privOwner
	case colGranted:
		if tc.creator {
			return privCreator
		}
		return privGrantee
	case colNone:
		return privNone
	}
	return privSuper
}

// createObjects creates the objects tc names, as their owners, named
// after cell, and returns their names by placeholder.
func (m *privMatrix) createObjects(t *testing.T, tc privCase, cell int) map[string]string {
	t.Helper()
	names := map[string]string{}
	for _, k := range []string{"t", "v", "m", "s", "r", "su"} {
		names[k] = fmt.Sprintf("%s_%d", k, cell)
	}
	uses := func(k string) bool {
		k = "{" + k + "}"
		return strings.Contains(tc.grant, k) || slices.ContainsFunc(tc.stmts, func(q string) bool { return strings.Contains(q, k) })
	}
	var owned, roles []string
	if uses("t") || uses("v") || uses("m") {
		owned = append(owned, "CREATE TABLE {t} (a int8)", "INSERT INTO {t} VALUES (1)")
	}
	if uses("v") {
		owned = append(owned, "CREATE VIEW {v} AS SELECT a FROM {t}")
	}
	if uses("m") {
		owned = append(owned, "CREATE MATERIALIZED VIEW {m} AS SELECT a FROM {t}")
	}
	if uses("s") {
		owned = append(owned, "CREATE SOURCE {s} FROM LOAD GENERATOR COUNTER (TICK INTERVAL '1h')")
	}
	if uses("r") {
		roles = append(roles, "CREATE ROLE {r} LOGIN PASSWORD 'r-pw'")
	}
	if uses("su") {
		roles = append(roles, "CREATE ROLE {su} LOGIN SUPERUSER PASSWORD 'su-pw'")
	}
	for _, q := range owned {
		mustExec(t, m.admin[privOwner], expandNames(q, names))
	}
	for _, q := range roles {
		mustExec(t, m.admin[privSuper], expandNames(q, names))
	}
	return names
}

// expandNames replaces {k} by names[k] in q.
func expandNames(q string, names map[string]string) string {
	for k, v := range names {
		q = strings.ReplaceAll(q, "{"+k+"}", v)
	}
	return q
}

// run runs one cell on objects: grants the granted column its privileges,
// runs the statements as the column's role and returns the SQLSTATE they
// ended with.
func (m *privMatrix) run(t *testing.T, tc privCase, col, cell int, objects map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	actor := m.actor(tc, col)
	expand := func(q string) string {
		q = expandNames(q, objects)
		q = strings.ReplaceAll(q, "{n}", fmt.Sprintf("n_%d", cell))
		q = strings.ReplaceAll(q, "{self}", actor)
		q = strings.ReplaceAll(q, "{selfpw}", actor+"-pw")
		q = strings.ReplaceAll(q, "{ownpid}", strconv.FormatUint(uint64(m.ownPID), 10))
		return strings.ReplaceAll(q, "{superpid}", strconv.FormatUint(uint64(m.superPID), 10))
	}
	if col == colGranted && tc.grant != "" {
		mustExec(t, m.admin[privOwner], expand("GRANT "+tc.grant+" TO "+actor))
	}
	if m.viaProxy {
		m.syncProxy(t)
	}

	c := m.conns[actor]
	for _, q := range tc.stmts {
		q = expand(q)
		var err error
		switch {
		case strings.HasPrefix(q, "COPY FROM:"):
			_, err = c.PgConn().CopyFrom(ctx, strings.NewReader("7\n"), strings.TrimPrefix(q, "COPY FROM:"))
		case strings.HasPrefix(q, "STREAM:"):
			err = streamFirstRow(ctx, c, strings.TrimPrefix(q, "STREAM:"))
		case strings.HasPrefix(q, "COPY TO:"):
			_, err = c.PgConn().CopyTo(ctx, io.Discard, strings.TrimPrefix(q, "COPY TO:"))
		default:
			_, err = c.Exec(ctx, q)
		}
		if err != nil {
			if code := pgCode(err); code != "" {
				_, _ = c.Exec(ctx, "ROLLBACK")
				return code
			}
			t.Fatalf("%s as %s: %v", q, actor, err)
		}
	}
	return ""
}

// syncProxy waits until the proxy process sees the upstream's catalog, as a
// client of the proxy would after the upstream acknowledged its DDL.
func (m *privMatrix) syncProxy(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.p.proxy.Coordinator.Catalog().Sync(ctx); err != nil {
		t.Fatalf("sync the proxy's catalog: %v", err)
	}
}

// streamFirstRow runs a statement that streams until canceled (SUBSCRIBE,
// COPY (SUBSCRIBE) TO STDOUT): once its first row arrives it sends a
// CancelRequest, as a client's cancel key does, and returns nil if that
// ended the statement with 57014, or the statement's error.
func streamFirstRow(ctx context.Context, c *pgx.Conn, q string) error {
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			go func() { _ = c.PgConn().CancelRequest(context.WithoutCancel(ctx)) }()
		})
	}
	var err error
	if strings.HasPrefix(q, "COPY") {
		_, err = c.PgConn().CopyTo(ctx, writerFunc(func(p []byte) (int, error) { cancel(); return len(p), nil }), q)
	} else {
		var rows pgx.Rows
		if rows, err = c.Query(ctx, q); err == nil {
			for rows.Next() {
				cancel()
			}
			rows.Close()
			err = rows.Err()
		}
	}
	if pgCode(err) == "57014" {
		return nil
	}
	if err == nil {
		return fmt.Errorf("%s ended without being canceled", q)
	}
	return err
}

// writerFunc is an io.Writer calling a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestCancelBackendPrivileges: pg_cancel_backend cancels a running
// statement of the caller's own role or, for a superuser, of anyone's;
// another role's fails with PostgreSQL's 42501 and leaves the statement
// running. A CancelRequest needs no privilege, only the secret key.
func TestCancelBackendPrivileges(t *testing.T) {
	for _, viaProxy := range []bool{false, true} {
		t.Run(map[bool]string{false: "RoleAll", true: "Proxy"}[viaProxy], func(t *testing.T) {
			p := startPasswordServers(t, append(privSetup, "CREATE TABLE t (a int8)", "INSERT INTO t VALUES (1)", "GRANT SELECT ON t TO own")...)
			s := p.server(viaProxy)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			// running starts a SUBSCRIBE as own and returns its
			// connection, its pid and a channel with its end.
			running := func() (*pgx.Conn, uint32, <-chan error) {
				c, pid := idleSession(t, s, privOwner)
				done := make(chan error, 1)
				started, finished := make(chan struct{}), make(chan struct{})
				// Before the connection closes (cleanups run last first).
				t.Cleanup(func() { cancel(); <-finished })
				go func() {
					defer close(finished)
					rows, err := c.Query(ctx, "SUBSCRIBE t")
					if err == nil {
						for rows.Next() {
							select {
							case <-started:
							default:
								close(started)
							}
						}
						rows.Close()
						err = rows.Err()
					}
					done <- err
				}()
				select {
				case <-started:
				case err := <-done:
					t.Fatalf("SUBSCRIBE as own ended before its first row: %v", err)
				}
				return c, pid, done
			}
			cancelAs := func(c *pgx.Conn, pid uint32) (bool, error) {
				var ok bool
				err := c.QueryRow(ctx, fmt.Sprintf("SELECT pg_cancel_backend(%d)", pid)).Scan(&ok)
				return ok, err
			}
			// As clients that interpolate parameters send it: an untyped
			// literal, which PostgreSQL coerces to int4.
			cancelQuotedAs := func(c *pgx.Conn, pid uint32) (bool, error) {
				var ok bool
				err := c.QueryRow(ctx, fmt.Sprintf("SELECT pg_cancel_backend('%d')", pid)).Scan(&ok)
				return ok, err
			}
			wantCanceled := func(done <-chan error, who string) {
				t.Helper()
				select {
				case err := <-done:
					wantCode(t, err, "57014", "the SUBSCRIBE "+who+" canceled")
				case <-ctx.Done():
					t.Fatalf("the SUBSCRIBE %s canceled still runs", who)
				}
			}

			_, pid, done := running()
			nobody := login(t, s, privNone, privNone+"-pw")
			_, err := cancelAs(nobody, pid)
			if pe := wantCode(t, err, denied, "pg_cancel_backend of own's session as nobody"); pe != nil {
				if want := "must be a member of the role whose process is being canceled or member of pg_signal_backend"; pe.Message != want {
					t.Errorf("message: got %q, want %q", pe.Message, want)
				}
			}
			select {
			case err := <-done:
				t.Fatalf("the SUBSCRIBE ended after a refused cancel: %v", err)
			default:
			}
			own := login(t, s, privOwner, privOwner+"-pw")
			if ok, err := cancelAs(own, pid); err != nil || !ok {
				t.Fatalf("pg_cancel_backend of own's other session as own: %v, %v", ok, err)
			}
			wantCanceled(done, "own")

			_, pid, done = running()
			boss := login(t, s, privSuper, privSuper+"-pw")
			if ok, err := cancelQuotedAs(boss, pid); err != nil || !ok {
				t.Fatalf("pg_cancel_backend as a superuser: %v, %v", ok, err)
			}
			wantCanceled(done, "a superuser")

			_, superPID := idleSession(t, s, privSuper)
			_, err = cancelAs(own, superPID)
			if pe := wantCode(t, err, denied, "pg_cancel_backend of a superuser's session as own"); pe != nil {
				if want := "must be a superuser to cancel superuser query"; pe.Message != want {
					t.Errorf("message: got %q, want %q", pe.Message, want)
				}
			}

			// The secret key is authority enough: own's client cancels
			// with a CancelRequest.
			c, _, done := running()
			if err := c.PgConn().CancelRequest(ctx); err != nil {
				t.Fatalf("CancelRequest: %v", err)
			}
			wantCanceled(done, "a CancelRequest")
		})
	}
}

// TestViewReadsAsOwner: a view (or materialized view) reads with its
// owner's privileges, so once the owner may no longer read the table, no
// one reads it through the view, the owner nor those granted the view.
func TestViewReadsAsOwner(t *testing.T) {
	for _, viaProxy := range []bool{false, true} {
		t.Run(map[bool]string{false: "RoleAll", true: "Proxy"}[viaProxy], func(t *testing.T) {
			p := startPasswordServers(t, append(privSetup,
				"CREATE TABLE t (a int8)", "INSERT INTO t VALUES (1)", "GRANT SELECT ON t TO own")...)
			s := p.server(viaProxy)
			ctx := context.Background()
			admin := login(t, p.up, privSuper, privSuper+"-pw")
			owner := login(t, p.up, privOwner, privOwner+"-pw")
			mustExec(t, owner, "CREATE VIEW v AS SELECT a FROM t", "CREATE MATERIALIZED VIEW m AS SELECT a FROM t",
				"GRANT SELECT ON v TO grt", "GRANT SELECT ON m TO grt")
			reads := []string{
				"SELECT a FROM v", "SELECT a FROM m",
				"BEGIN; DECLARE c CURSOR FOR SUBSCRIBE m; FETCH ALL c WITH (timeout = '0s'); COMMIT",
			}
			roles := []string{privOwner, privGrantee}
			conns := map[string]*pgx.Conn{}
			for _, r := range roles {
				conns[r] = login(t, s, r, r+"-pw")
				for _, q := range reads {
					if _, err := conns[r].Exec(ctx, q); err != nil {
						t.Fatalf("%s as %s before the REVOKE: %v", q, r, err)
					}
				}
			}
			mustExec(t, admin, "REVOKE SELECT ON t FROM own")
			if viaProxy {
				if err := p.proxy.Coordinator.Catalog().Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range roles {
				for _, q := range reads {
					_, err := conns[r].Exec(ctx, q)
					wantCode(t, err, denied, q+" as "+r+" after the owner lost SELECT on t")
					_, _ = conns[r].Exec(ctx, "ROLLBACK")
				}
			}
			if _, err := admin.Exec(ctx, "SELECT a FROM v"); err != nil {
				t.Errorf("a superuser reads the view: %v", err)
			}
		})
	}
}

// TestProxyAlterSystemWritesOnce: ALTER SYSTEM through a proxy process is
// the upstream's to apply (and to check); the proxy does not write the
// catalog a second time.
func TestProxyAlterSystemWritesOnce(t *testing.T) {
	p := startPasswordServers(t, privSetup...)
	boss := login(t, p.proxy, privSuper, privSuper+"-pw")
	ctx := context.Background()
	if err := p.proxy.Coordinator.Catalog().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	before := p.up.Coordinator.Catalog().Seq()
	mustExec(t, boss, "ALTER SYSTEM SET max_result_size = '1GB'")
	if err := p.up.Coordinator.Catalog().Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := p.up.Coordinator.Catalog().Seq(), before+1; got != want {
		t.Errorf("catalog version after one ALTER SYSTEM through the proxy: got %v, want %v", got, want)
	}
	if got := p.up.Coordinator.Catalog().State().System["max_result_size"]; got != "1GB" {
		t.Errorf("max_result_size: got %q, want 1GB", got)
	}
}

// TestDropRoleInUse: a role that owns objects or holds grants cannot be
// dropped (2BP01, as PostgreSQL), so a role created again under its name
// cannot inherit them.
func TestDropRoleInUse(t *testing.T) {
	p := startPasswordServers(t, append(privSetup, "CREATE TABLE t (a int8)", "GRANT SELECT ON t TO grt")...)
	boss := login(t, p.up, privSuper, privSuper+"-pw")
	owner := login(t, p.up, privOwner, privOwner+"-pw")
	mustExec(t, owner, "CREATE TABLE mine (a int8)")
	ctx := context.Background()
	for _, r := range []string{privOwner, privGrantee} {
		_, err := boss.Exec(ctx, "DROP ROLE "+r)
		wantCode(t, err, "2BP01", "DROP ROLE "+r)
	}
	mustExec(t, boss, "REVOKE SELECT ON t FROM grt", "DROP ROLE grt", "CREATE ROLE grt LOGIN PASSWORD 'again'")
	grt := login(t, p.up, privGrantee, "again")
	_, err := grt.Exec(ctx, "SELECT a FROM t")
	wantCode(t, err, denied, "SELECT by a new role under a dropped grantee's name")
}

// TestDefaultRoleStaysSuperuser: the default role cannot lose SUPERUSER,
// not by itself nor by another superuser (PostgreSQL's rule for its
// bootstrap superuser): the server starts with no other superuser, and a
// catalog left without one could not be mended through SQL.
func TestDefaultRoleStaysSuperuser(t *testing.T) {
	p := startPasswordServers(t, privSetup...)
	ctx := context.Background()
	for _, who := range []string{"materialize", privSuper} {
		c := login(t, p.up, who, who+"-pw")
		_, err := c.Exec(ctx, "ALTER ROLE materialize NOSUPERUSER")
		wantCode(t, err, denied, "ALTER ROLE materialize NOSUPERUSER as "+who)
	}
	if r := p.up.Coordinator.Catalog().State().Roles["materialize"]; r == nil || !r.Superuser {
		t.Fatalf("materialize after the denied ALTER ROLEs: %+v", r)
	}
	root := login(t, p.up, "materialize", "materialize-pw")
	mustExec(t, root, "ALTER ROLE materialize PASSWORD 'again'", "ALTER ROLE boss NOSUPERUSER")
}

// TestDroppedRoleCreatesNothing: a session whose role was dropped after it
// logged in cannot create objects: they would be owned by no role, and by
// whichever role is created next under the name (the hole DROP ROLE's
// 2BP01 closes for existing objects). Through a tail process the upstream
// refuses it too, or refuses its new upstream connection (08006).
func TestDroppedRoleCreatesNothing(t *testing.T) {
	p := startPasswordServers(t, privSetup...)
	ctx := context.Background()
	boss := login(t, p.up, privSuper, privSuper+"-pw")
	mustExec(t, boss, "CREATE ROLE carol LOGIN PASSWORD 'carol-pw'", "CREATE TABLE shared (a int8)", "GRANT SELECT ON shared TO PUBLIC")
	for _, s := range []*testserver.Server{p.up, p.proxy} {
		carol := login(t, s, "carol", "carol-pw")
		mustExec(t, carol, "SELECT a FROM shared")
		mustExec(t, boss, "DROP ROLE carol")
		for _, q := range []string{"CREATE TABLE orphan (a int8)", "CREATE VIEW orphan AS SELECT a FROM shared",
			"CREATE MATERIALIZED VIEW orphan AS SELECT a FROM shared"} {
			_, err := carol.Exec(ctx, q)
			if code := pgCode(err); code != "42704" && (s == p.up || code != "08006") {
				t.Errorf("%s by a dropped role: got %v, want 42704", q, err)
			}
		}
		if it := p.up.Coordinator.Catalog().State().Items["orphan"]; it != nil {
			t.Fatalf("a dropped role created %+v", it)
		}
		mustExec(t, boss, "CREATE ROLE carol LOGIN PASSWORD 'carol-pw'")
	}
}

// TestPublicRoleReserved: no role may be named public (42939, as
// PostgreSQL and Materialize), the name grants to PUBLIC are kept under: a
// role of that name could not be dropped while any grant to PUBLIC exists.
func TestPublicRoleReserved(t *testing.T) {
	p := startPasswordServers(t, privSetup...)
	ctx := context.Background()
	for _, s := range []*testserver.Server{p.up, p.proxy} {
		boss := login(t, s, privSuper, privSuper+"-pw")
		for _, q := range []string{"CREATE ROLE public", "CREATE ROLE PUBLIC LOGIN PASSWORD 'x'"} {
			_, err := boss.Exec(ctx, q)
			wantCode(t, err, "42939", q)
		}
	}
	if _, ok := p.up.Coordinator.Catalog().State().Roles["public"]; ok {
		t.Fatal("a role named public was created")
	}
}

// TestEmptyPasswordIsNone: an empty PASSWORD string sets no password but
// clears it, as in PostgreSQL (with its notice), so that --require-password
// refuses the role rather than let it in with an empty password.
func TestEmptyPasswordIsNone(t *testing.T) {
	p := startPasswordServers(t, append(privSetup, "CREATE ROLE emp LOGIN PASSWORD ''")...)
	boss := login(t, p.up, privSuper, privSuper+"-pw")
	mustExec(t, boss, "CREATE ROLE emp2 LOGIN PASSWORD 'x'", "ALTER ROLE emp2 PASSWORD ''")
	for _, r := range []string{"emp", "emp2"} {
		if v := p.up.Coordinator.Catalog().State().Roles[r].Verifier; v != "" {
			t.Errorf("%s's verifier after PASSWORD '': %q", r, v)
		}
		for _, s := range []*testserver.Server{p.up, p.proxy} {
			for _, pw := range []string{"", "x"} {
				_, err := connectWith(t, s, r, pw, pgx.QueryExecModeSimpleProtocol)
				wantCode(t, err, "28P01", r+" with password "+strconv.Quote(pw))
			}
		}
	}
}
