// Package redistest gives tests a real Redis: Start runs Debian's
// redis-server as a child process on a free loopback port, with its own
// data directory under t.TempDir() and appendonly on with appendfsync
// always (so a restart, even after SIGKILL, keeps every write Redis
// acknowledged), and stops it when the test ends.
//
//	srv := redistest.Start(t)
//	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
//	...
//	srv.Kill(t)    // SIGKILL: the crash a sink must survive
//	srv.Restart(t) // same port, same data directory
//
// A server per test is cheap (redis-server starts in milliseconds) and
// isolates tests that run in parallel: no shared keyspace, no FLUSHALL.
//
// # Lifetime
//
// The server runs under internal/childproc: its own process group, and
// SIGKILL from the kernel if the test binary dies without stopping it
// (Pdeathsig), so no server outlives the test that started it.
//
// # Failures
//
// redistest never skips: a test that asks for Redis and cannot get one
// fails, saying how to install it (apt-get install -y redis-server, which
// scripts/prereqs.sh does) and quoting the server's log.
package redistest
