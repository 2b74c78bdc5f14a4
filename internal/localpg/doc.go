// Package localpg runs a throwaway PostgreSQL cluster on loopback: the
// server behind internal/testsupport/pgtest's test databases and the
// benchmark's peer and consensus (bench.StartPostgres). It is a production
// helper rather than a test harness because `shardtail bench` ships in the
// binary and starts PostgreSQL; the serving path does not link it. The
// process supervision (process group, Pdeathsig, stop then kill) is
// internal/childproc's, shared with bench.StartServer.
//
//	s, err := localpg.Start(ctx, localpg.Options{MaxConnections: 200})
//	if err != nil {
//		return err // errors.Is(err, localpg.ErrNoBinaries): PostgreSQL is not installed
//	}
//	defer s.Stop()
//	conn, err := pgx.Connect(ctx, s.URL) // postgres://postgres@127.0.0.1:54xyz/postgres
//
// # What Start does
//
// Start finds the server binaries (initdb and postgres in PATH, symlinks
// resolved as on Debian where PATH has wrappers, else the newest
// /usr/lib/postgresql/*/bin), initdbs a cluster into a new directory, and
// starts postgres listening on 127.0.0.1 at a free port, with its unix
// socket in that directory and durability off (fsync, synchronous_commit,
// full_page_writes) because the data dies with the server. It returns once
// postgres accepts connections. Another process may take the free port
// between the probe and postgres's bind; Start then tries other ports.
//
// initdb and postgres refuse to run as root. When the caller does (as in
// containers and CI), both run as the "postgres" OS user, and the directory
// is created world-traversable (0755) and owned by that user; its parents
// must be traversable too, so os.TempDir() is used only if they are, else
// /tmp.
//
// # Lifetime and the caller's duties
//
// The server outlives Start's context: the context bounds only initdb and
// the wait for readiness. The caller calls Stop once, which shuts postgres
// down (fast shutdown, then immediate, then SIGKILL after timeouts) and
// removes the directory. A caller that dies without Stop leaves that to the
// kernel: postgres gets SIGQUIT when the thread that started it exits
// (Pdeathsig), and the next Start, in any process, removes directories
// whose owner process and postmaster are both gone. postgres runs in a
// process group of its own, so a terminal's Ctrl-C reaches only the caller,
// which decides when to stop it.
package localpg
