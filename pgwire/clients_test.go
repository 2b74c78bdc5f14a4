package pgwire

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Tests with real client programs: psql and node-postgres (`make test`
// installs pg into testdata/clients and points NODE_PATH at it). A missing
// client fails the test rather than skipping it.

// psqlResult is the outcome of one psql run.
type psqlResult struct {
	stdout, stderr string
	code           int
}

// runPsql runs psql -c for each command against ts, as user with password.
func runPsql(t *testing.T, ts *testServer, user, password, sslmode, stdin string, commands ...string) psqlResult {
	t.Helper()
	path, err := exec.LookPath("psql")
	if err != nil {
		t.Fatal("psql not installed: apt-get install -y postgresql-client (make test's CI script does)")
	}
	host, port := ts.host()
	args := []string{"-X", "-A", "-t", "-v", "ON_ERROR_STOP=1"}
	for _, c := range commands {
		args = append(args, "-c", c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8",
		"PGHOST=" + host, "PGPORT=" + port, "PGUSER=" + user, "PGDATABASE=materialize",
		"PGSSLMODE=" + sslmode, "PGCONNECT_TIMEOUT=5", "PGPASSWORD=" + password}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	res := psqlResult{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("psql: %v", err)
	}
	return res
}

func TestPsql(t *testing.T) {
	for _, auth := range []AuthMethod{AuthSCRAM, AuthCleartext} {
		t.Run(auth.String(), func(t *testing.T) {
			b := authBackend()
			ts := startServer(t, b, Config{Auth: auth, TLSConfig: selfSignedTLS(t)})
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
					res := runPsql(t, ts, "bob", "secret", tc.sslmode, tc.stdin, tc.commands...)
					if res.code != tc.code || res.stdout != tc.stdout || !strings.Contains(res.stderr, tc.stderr) {
						t.Errorf("psql %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q",
							tc.commands, res.code, res.stdout, res.stderr, tc.code, tc.stdout, tc.stderr)
					}
				})
			}
			if !strings.Contains(b.copiedData(), "from psql\nsecond line\n") {
				t.Errorf("copy in received %q", b.copiedData())
			}
			t.Run("WrongPassword", func(t *testing.T) {
				res := runPsql(t, ts, "bob", "wrong", "disable", "", "select 1")
				if res.code != 2 || !strings.Contains(res.stderr, `password authentication failed for user "bob"`) {
					t.Errorf("exit %d, stderr %q", res.code, res.stderr)
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
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node not installed: install Node.js 20 (make test runs npm install in testdata/clients)")
	}
	if err := exec.Command(node, "-e", "require('pg')").Run(); err != nil {
		t.Fatal("node-postgres not found: run `make test` (it installs testdata/clients) or set NODE_PATH to a node_modules with pg")
	}
	ts := startServer(t, authBackend(), Config{})
	host, port := ts.host()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "-e", nodeScript)
	cmd.Env = append(os.Environ(), "H="+host, "P="+port)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node: %v\n%s", err, stderr)
	}
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
