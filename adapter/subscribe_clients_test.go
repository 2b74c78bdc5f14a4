package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardtail/shardtail/internal/testsupport/clients"
	"github.com/shardtail/shardtail/internal/testsupport/testserver"
)

// Real clients consuming SUBSCRIBE, on both paths: psql streaming COPY,
// a pgx cursor loop and a node-postgres cursor loop, each seeing rows
// inserted while it runs.

var subscribePaths = []struct {
	name string
	flag string
}{{"FastPath", "on"}, {"Dataflow", "off"}}

// TestPsqlCopySubscribe streams COPY (SUBSCRIBE ...) TO STDOUT through
// psql while rows are inserted, until UP TO completes it.
func TestPsqlCopySubscribe(t *testing.T) {
	for _, p := range subscribePaths {
		t.Run(p.name, func(t *testing.T) {
			s := testserver.Start(t, testserver.Options{})
			c := connect(t, s)
			execAll(t, c, "CREATE TABLE t (k int8 NOT NULL, v text)", "INSERT INTO t VALUES (1, 'before')",
				"ALTER SYSTEM SET enable_subscribe_persist_fast_path = "+p.flag)
			host, port := s.HostPort()
			upTo := time.Now().UnixMilli() + 5000
			cmd := exec.Command("psql", "-X", "-h", host, "-p", port, "-U", "materialize", "materialize",
				"-c", fmt.Sprintf("COPY (SUBSCRIBE t WITH (PROGRESS) UP TO %d) TO STDOUT", upTo))
			cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10")
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Write once the SUBSCRIBE runs, so that its snapshot holds
			// only the first row however late psql connects.
			if err := waitFor(20*time.Second, func() error {
				rows, err := tryQueryRows(c, "SELECT session_id FROM mz_internal.mz_subscriptions")
				if err == nil && len(rows) == 0 {
					err = errors.New("psql's SUBSCRIBE is not running yet")
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			execAll(t, c, "INSERT INTO t VALUES (2, 'during')", "DELETE FROM t WHERE k = 1")
			if err := cmd.Wait(); err != nil {
				t.Fatalf("psql: %v\n%s", err, out.String())
			}
			text := out.String()
			for _, want := range []string{"\tf\t1\t1\tbefore", "\tf\t1\t2\tduring", "\tf\t-1\t1\tbefore", "\tt\t\\N\t\\N\t\\N"} {
				if !strings.Contains(text, want) {
					t.Fatalf("psql output lacks %q:\n%s", want, text)
				}
			}
		})
	}
}

// TestPgxCursorLoop is the canonical client loop: DECLARE a cursor and
// FETCH with a timeout, forever, seeing each change once.
func TestPgxCursorLoop(t *testing.T) {
	for _, p := range subscribePaths {
		t.Run(p.name, func(t *testing.T) {
			s := testserver.Start(t, testserver.Options{})
			w, r := connect(t, s), connect(t, s)
			execAll(t, w, "CREATE TABLE t (k int8 NOT NULL)", "INSERT INTO t VALUES (0)")
			execAll(t, r, "SET enable_subscribe_persist_fast_path = "+p.flag, "BEGIN", "DECLARE c CURSOR FOR SUBSCRIBE t")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			seen := map[string]int{}
			for i := 1; i <= 5; i++ {
				execAll(t, w, fmt.Sprintf("INSERT INTO t VALUES (%d)", i))
				for seen[fmt.Sprint(i)] == 0 {
					rows, err := r.Query(ctx, "FETCH ALL c WITH (timeout = '1s')", pgx.QueryExecModeSimpleProtocol)
					if err != nil {
						t.Fatal(err)
					}
					for rows.Next() {
						v := rows.RawValues()
						seen[string(v[2])] += 1
					}
					if err := rows.Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			for k := 0; k <= 5; k++ {
				if n := seen[fmt.Sprint(k)]; n != 1 {
					t.Fatalf("row %d seen %d times: %v", k, n, seen)
				}
			}
		})
	}
}

// TestNodePostgresCursorLoop runs the same loop with node-postgres while
// Go inserts rows.
func TestNodePostgresCursorLoop(t *testing.T) {
	node := clients.Node(t)
	for _, p := range subscribePaths {
		t.Run(p.name, func(t *testing.T) {
			s := testserver.Start(t, testserver.Options{})
			w := connect(t, s)
			execAll(t, w, "CREATE TABLE t (k int8 NOT NULL)", "INSERT INTO t VALUES (0)")
			host, port := s.HostPort()
			script := `
const { Client } = require('pg');
(async () => {
  const c = new Client({ host: process.env.H, port: +process.env.P, user: 'materialize', database: 'materialize' });
  await c.connect();
  await c.query("SET enable_subscribe_persist_fast_path = ` + p.flag + `");
  await c.query('BEGIN');
  await c.query('DECLARE c CURSOR FOR SUBSCRIBE t');
  const seen = [];
  while (!seen.includes('3')) {
    const res = await c.query("FETCH ALL c WITH (timeout = '1s')");
    for (const r of res.rows) seen.push(String(r.k));
  }
  await c.query('COMMIT');
  await c.end();
  console.log(JSON.stringify(seen.sort()));
})().catch(e => { console.error(e); process.exit(1); });
`
			cmd := clients.ScriptCommand(context.Background(), host, port, node, "-e", script)
			var out strings.Builder
			cmd.Stdout = &out
			cmd.Stderr = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 3; i++ {
				time.Sleep(100 * time.Millisecond)
				execAll(t, w, fmt.Sprintf("INSERT INTO t VALUES (%d)", i))
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("node: %v\n%s", err, out.String())
				}
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("node did not see the rows:\n%s", out.String())
			}
			if got := strings.TrimSpace(out.String()); got != `["0","1","2","3"]` {
				t.Fatalf("node-postgres saw %s, want each row once", got)
			}
		})
	}
}

// TestPreparedDeclareRunsAgain: with pgx's statement cache a DECLARE is
// prepared once and executed in each transaction; every execution opens a
// new cursor that starts from its own snapshot.
func TestPreparedDeclareRunsAgain(t *testing.T) {
	for _, p := range subscribePaths {
		t.Run(p.name, func(t *testing.T) {
			s := testserver.Start(t, testserver.Options{})
			c := connectMode(t, s, pgx.QueryExecModeCacheStatement)
			execAll(t, c, "CREATE TABLE t (k int8 NOT NULL)", "SET enable_subscribe_persist_fast_path = "+p.flag)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for round := int64(1); round <= 3; round++ {
				execAll(t, c, fmt.Sprintf("INSERT INTO t VALUES (%d)", round), "BEGIN")
				// Query, not Exec: pgx runs an Exec without arguments with
				// the simple protocol.
				rows, err := c.Query(ctx, "DECLARE c CURSOR FOR SUBSCRIBE t")
				if err != nil {
					t.Fatal(err)
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				rows, err = c.Query(ctx, "FETCH ALL c WITH (TIMEOUT '300ms')")
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for rows.Next() {
					n++
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				if n != int(round) {
					t.Fatalf("round %d: the cursor's snapshot has %d rows, want %d", round, n, round)
				}
				execAll(t, c, "COMMIT")
			}
		})
	}
}
