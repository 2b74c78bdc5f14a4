// Package pgtest gives tests a real PostgreSQL: URL returns the connection
// URL of a fresh, empty database that is dropped when the test ends, so
// tests are isolated from each other and may run in parallel.
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		url := pgtest.URL(t) // postgres://postgres@127.0.0.1:54xyz/shardtail_test_...
//		pool, err := pgxpool.New(t.Context(), url)
//		...
//	}
//
// # Where the server comes from
//
// If SHARDTAIL_TEST_POSTGRES_URL is set (CI's .ci/run starts a server and
// sets it), databases are created on that server; its user needs CREATEDB.
// Otherwise the first URL call of a test binary starts a throwaway cluster
// with internal/localpg (max_connections 200): initdb into a new directory
// under os.TempDir() (/tmp when the tests run as root and TMPDIR is not
// world-traversable; initdb and postgres then run as the OS user postgres),
// postgres listening on 127.0.0.1 at a free port, durability off because
// the data dies with the test. localpg's doc says more.
//
// # Lifetime
//
// Main runs the tests and then stops the cluster (fast shutdown, SIGKILL
// after a timeout) and removes its directory. A test binary that does not
// call Main, or dies, leaves that to the kernel: postgres gets SIGQUIT when
// the thread that started it exits (Pdeathsig), and the next cluster
// started on the machine removes directories whose owner process is gone.
//
// # Failures
//
// pgtest never skips: a test that asks for PostgreSQL and cannot get one
// fails, saying how to install it (apt-get install -y postgresql) and
// quoting the server's log when the server would not start.
package pgtest
