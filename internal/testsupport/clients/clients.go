// Package clients runs the real client programs that tests talk to a
// server with: psql, node-postgres and psycopg2. A missing client fails
// the test rather than skipping it: CI installs them all (`make test`
// installs node-postgres into testdata/clients and exports NODE_PATH).
//
//	res := clients.Psql(t, clients.Conn{Host: host, Port: port}, "", nil, "SELECT 1")
//	if res.Code != 0 || res.Stdout != "1\n" { ... }
//
//	out := clients.Script(t, 30*time.Second, host, port, clients.Node(t), "-e", script)
//
// The package imports nothing of ours, so any package's in-package tests
// (pgwire's included) may use it.
package clients

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// psqlTimeout bounds one psql run.
const psqlTimeout = 30 * time.Second

// Conn says where psql connects and as whom.
type Conn struct {
	// Host and Port are the server's address.
	Host, Port string
	// User and Database default to materialize.
	User, Database string
	// Password, when set, is PGPASSWORD.
	Password string
	// SSLMode, when set, is PGSSLMODE; psql's default is prefer.
	SSLMode string
}

// PsqlResult is the outcome of one psql run.
type PsqlResult struct {
	Stdout, Stderr string
	// Code is psql's exit status.
	Code int
}

// Psql runs psql -X -A -t -v ON_ERROR_STOP=1 against c with stdin, the
// extra arguments, and one -c per command. The environment holds only
// PATH, a UTF-8 locale and the connection, so the caller's PG* variables
// and ~/.psqlrc do not leak in.
func Psql(t testing.TB, c Conn, stdin string, extra []string, commands ...string) PsqlResult {
	t.Helper()
	path, err := exec.LookPath("psql")
	if err != nil {
		t.Fatal("psql not installed: apt-get install -y postgresql-client (the CI script does)")
	}
	args := append([]string{"-X", "-A", "-t", "-v", "ON_ERROR_STOP=1"}, extra...)
	for _, cmd := range commands {
		args = append(args, "-c", cmd)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "PGCONNECT_TIMEOUT=5",
		"PGHOST=" + c.Host, "PGPORT=" + c.Port,
		"PGUSER=" + or(c.User, "materialize"), "PGDATABASE=" + or(c.Database, "materialize")}
	if c.Password != "" {
		env = append(env, "PGPASSWORD="+c.Password)
	}
	if c.SSLMode != "" {
		env = append(env, "PGSSLMODE="+c.SSLMode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), psqlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	res := PsqlResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("psql: %v", err)
	}
	return res
}

// Node returns the path of node once it has checked that node-postgres
// loads (NODE_PATH), failing t otherwise.
func Node(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node not installed: install Node.js 20 (make test then installs node-postgres into testdata/clients)")
	}
	if out, err := exec.Command(node, "-e", "require('pg')").CombinedOutput(); err != nil {
		t.Fatalf("node-postgres not found (NODE_PATH=%q): run `make test`, which installs testdata/clients and exports NODE_PATH: %v\n%s",
			os.Getenv("NODE_PATH"), err, out)
	}
	return node
}

// Python returns the path of the system python3 once it has checked that
// psycopg2 loads, failing t otherwise.
func Python(t testing.TB) string {
	t.Helper()
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import psycopg2").CombinedOutput(); err != nil {
		t.Fatalf("psycopg2 not available for %s: apt-get install -y python3-psycopg2 (the CI script does): %v\n%s", python, err, out)
	}
	return python
}

// ScriptCommand returns the command that runs a client script (node -e
// script, python3 -c script) against the server at host:port, which the
// script reads from the environment variables H and P. ctx kills it.
func ScriptCommand(ctx context.Context, host, port, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "H="+host, "P="+port)
	return cmd
}

// Script runs a client script to completion within timeout, as
// ScriptCommand, and returns its stdout; it fails t with the script's
// stderr when the script fails.
func Script(t testing.TB, timeout time.Duration, host, port, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := ScriptCommand(ctx, host, port, name, args...).Output()
	if err != nil {
		var stderr []byte
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("%s: %v\n%s", name, err, stderr)
	}
	return out
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
