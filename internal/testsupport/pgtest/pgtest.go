package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardtail/shardtail/internal/localpg"
)

// EnvURL names the environment variable holding the URL of a PostgreSQL
// server to create test databases on, instead of starting one.
const EnvURL = "SHARDTAIL_TEST_POSTGRES_URL"

// adminTimeout bounds each CREATE or DROP DATABASE, connection included.
const adminTimeout = time.Minute

// maxConnections is the throwaway server's max_connections: room for the
// parallel tests of a package, each with a pool.
const maxConnections = 200

// installHint ends every "cannot get PostgreSQL" message.
const installHint = "install PostgreSQL (Debian/Ubuntu: apt-get install -y postgresql) " +
	"or set " + EnvURL + " to the URL of a server whose user may CREATE DATABASE"

var (
	// mu guards the throwaway server across URL calls and Main.
	mu        sync.Mutex
	started   bool            // mu must be held.
	serverURL string          // mu must be held. The admin URL; set once started and err is nil.
	serverErr error           // mu must be held.
	srv       *localpg.Server // mu must be held. Nil when EnvURL is used.

	databases atomic.Int64
)

// URL returns the URL of a new, empty database, dropped (forcibly, closing
// any connection left) when t ends. It fails t if PostgreSQL is
// unavailable.
func URL(t testing.TB) string {
	t.Helper()
	admin, err := adminURL()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	name := fmt.Sprintf("shardtail_test_%d_%d_%s", os.Getpid(), databases.Add(1), randomHex(4))
	if err := createDatabase(admin, name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(admin, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("pgtest: %v", err) // unreachable: adminURL parsed it
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}

// Main runs the tests of m, then stops the throwaway server if URL started
// one, runs the other cleanups (e.g. testbin.Remove), and exits; a failed
// cleanup fails the run. Call it from TestMain.
func Main(m *testing.M, cleanups ...func() error) {
	code := m.Run()
	for _, cleanup := range append([]func() error{stop}, cleanups...) {
		if err := cleanup(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// adminURL returns the URL of the server's maintenance database, starting
// the throwaway server on first use. A failure to start is remembered:
// every later call fails the same way, without retrying.
func adminURL() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		serverURL, serverErr = findServer()
	}
	return serverURL, serverErr
}

// findServer returns EnvURL, checked, or starts a throwaway server.
// mu must be held.
func findServer() (string, error) {
	if env := os.Getenv(EnvURL); env != "" {
		u, err := url.Parse(env)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return "", fmt.Errorf("%s must be a postgres:// URL, got %q", EnvURL, redact(env))
		}
		return env, nil
	}
	s, err := localpg.Start(context.Background(), localpg.Options{MaxConnections: maxConnections})
	if err != nil {
		return "", fmt.Errorf("start a throwaway PostgreSQL: %w\n%s", err, installHint)
	}
	srv = s
	return s.URL, nil
}

// stop stops the throwaway server, if any; URL fails afterwards.
func stop() error {
	mu.Lock()
	defer mu.Unlock()
	started, serverErr = true, errors.New("the test binary is shutting down")
	if srv == nil {
		return nil
	}
	s := srv
	srv = nil
	return s.Stop()
}

func createDatabase(admin, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	// Concurrent CREATE DATABASEs (other test binaries on a shared server)
	// can collide on the template database: 55006 object_in_use. Retry.
	var err error
	for attempt := range 20 {
		err = adminExec(ctx, admin, sql)
		if !isCode(err, "55006") {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create database %s: %w", name, err)
		case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
		}
	}
	if err != nil {
		return fmt.Errorf("create database %s on %s: %w", name, redact(admin), err)
	}
	return nil
}

func dropDatabase(admin, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	// WITH (FORCE) (PostgreSQL 13+) closes connections a test left open.
	err := adminExec(ctx, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	if isCode(err, "42601") { // syntax_error: an older server
		err = adminExec(ctx, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize())
	}
	if err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// adminExec runs sql on a connection of its own: CREATE and DROP DATABASE
// cannot run in a transaction, and a short-lived connection holds no lock
// on the maintenance database between calls.
func adminExec(ctx context.Context, admin, sql string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func isCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

// redact hides the password of a URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if strings.Contains(s, "@") {
			return "(unparsable URL)"
		}
		return s
	}
	return u.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
