package pgwire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shardtail/shardtail/internal/testsupport/clients"
)

// Tests with real client programs: psql and node-postgres (`make test`
// installs pg into testdata/clients and points NODE_PATH at it). A missing
// client fails the test rather than skipping it.

func TestPsql(t *testing.T) {
	for _, auth := range []AuthMethod{AuthSCRAM, AuthCleartext} {
		t.Run(auth.String(), func(t *testing.T) {
			b := authBackend()
			ts := startServer(t, b, Config{Auth: auth, TLSConfig: selfSigned(t)})
			host, port := ts.host()
			for _, tc := range []struct {
				name     string
				sslmode  string
				stdin    string
				commands []string
				stdout   string
				stderr   string // substring
				code     int
			}{
				{name: "Select", sslmode: "disable", commands: []string{"select 3"}, stdout: "1\n2\n3\n"},
				{name: "SelectTLS", sslmode: "require", commands: []string{"select 2"}, stdout: "1\n2\n"},
				{name: "Echo", sslmode: "disable", commands: []string{"echo héllo wörld"}, stdout: "héllo wörld\n"},
				{name: "MultiStatement", sslmode: "disable", commands: []string{"select 1; select 2"}, stdout: "1\n1\n2\n"},
				{name: "SeveralCommands", sslmode: "disable", commands: []string{"select 1", "begin", "select 2", "commit"}, stdout: "1\nBEGIN\n1\n2\nCOMMIT\n"},
				{name: "CopyOut", sslmode: "disable", commands: []string{"copy out"}, stdout: "line1\nline2\nline3\n"},
				{name: "CopyIn", sslmode: "prefer", stdin: "from psql\nsecond line\n", commands: []string{"copy in"}, stdout: "COPY 2\n"},
				{name: "Notice", sslmode: "disable", commands: []string{"notice"}, stdout: "1\n", stderr: "NOTICE:  streaming SUBSCRIBE rows directly requires"},
				{name: "Error", sslmode: "disable", commands: []string{"error 42P01"}, code: 1,
					stderr: "ERROR:  fake error 42P01\nLINE 1: error 42P01\n          ^\nDETAIL:  fake detail\nHINT:  fake hint\n"},
				{name: "Empty", sslmode: "disable", commands: []string{";"}, stdout: ""},
			} {
				t.Run(tc.name, func(t *testing.T) {
					res := clients.Psql(t, clients.Conn{Host: host, Port: port, User: "bob", Password: "secret", SSLMode: tc.sslmode}, tc.stdin, nil, tc.commands...)
					if res.Code != tc.code || res.Stdout != tc.stdout || !strings.Contains(res.Stderr, tc.stderr) {
						t.Errorf("psql %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q",
							tc.commands, res.Code, res.Stdout, res.Stderr, tc.code, tc.stdout, tc.stderr)
					}
				})
			}
			if !strings.Contains(b.copiedData(), "from psql\nsecond line\n") {
				t.Errorf("copy in received %q", b.copiedData())
			}
			t.Run("WrongPassword", func(t *testing.T) {
				res := clients.Psql(t, clients.Conn{Host: host, Port: port, User: "bob", Password: "wrong", SSLMode: "disable"}, "", nil, "select 1")
				if res.Code != 2 || !strings.Contains(res.Stderr, `password authentication failed for user "bob"`) {
					t.Errorf("exit %d, stderr %q", res.Code, res.Stderr)
				}
			})
		})
	}
}

// nodeScript exercises node-postgres: simple protocol without parameters,
// extended protocol with them and with a named statement, errors, notices.
const nodeScript = `
const { Client } = require('pg');
(async () => {
  const c = new Client({ host: process.env.H, port: +process.env.P, user: 'bob', password: 'secret', database: 'materialize', application_name: 'nodetest' });
  const out = {};
  c.on('notice', n => { out.notice = n.code; });
  await c.connect();
  out.simple = (await c.query('select 3')).rows.map(r => r.n);
  out.param = (await c.query('echo $1', ['hi there'])).rows[0].echo;
  out.named = (await c.query({ name: 'two', text: 'select 2', values: [] })).rows.map(r => r.n);
  out.namedAgain = (await c.query({ name: 'two', text: 'select 2', values: [] })).rowCount;
  try { await c.query('error 42P01'); } catch (e) { out.code = e.code; out.detail = e.detail; out.hint = e.hint; }
  try { await c.query('error 22012', ['x']); } catch (e) { out.code2 = e.code; } // one parameter too many: a Bind error
  await c.query('notice');
  out.after = (await c.query('select 1')).rowCount;
  await c.end();
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e); process.exit(1); });
`

func TestNodePostgres(t *testing.T) {
	node := clients.Node(t)
	ts := startServer(t, authBackend(), Config{})
	host, port := ts.host()
	out := clients.Script(t, 30*time.Second, host, port, node, "-e", nodeScript)
	var got map[string]any
	must(t, json.Unmarshal(out, &got))
	want := map[string]any{
		"simple": []any{"1", "2", "3"}, "param": "hi there", "named": []any{"1", "2"}, "namedAgain": 2.0,
		"code": "42P01", "detail": "fake detail", "hint": "fake hint", "code2": "08P01", "notice": "01000", "after": 1.0,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("node-postgres:\n got %v\nwant %v", got, want)
	}
}
