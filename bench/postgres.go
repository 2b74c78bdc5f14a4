package bench

import (
	"context"
	"errors"

	"github.com/shardtail/shardtail/internal/localpg"
)

// Postgres is a throwaway PostgreSQL cluster: the peer of the report, which
// runs the same storm as SELECT * from fresh connections, and the consensus
// of StorageS3. It is internal/localpg's server, the one internal/testsupport/pgtest
// gives tests: URL (user postgres, database postgres), PID (the
// postmaster's; its CPU time includes the backends that have exited, its
// children) and Version (`postgres --version`) are set, and Stop shuts it
// down and removes the cluster.
type Postgres struct {
	*localpg.Server
}

// StartPostgres initdbs a cluster and starts postgres on a free loopback
// port, allowing maxConns connections. It returns ErrNoPostgres when the
// binaries are missing.
func StartPostgres(ctx context.Context, maxConns int) (*Postgres, error) {
	s, err := localpg.Start(ctx, localpg.Options{MaxConnections: maxConns})
	if errors.Is(err, localpg.ErrNoBinaries) {
		return nil, ErrNoPostgres
	}
	if err != nil {
		return nil, err
	}
	return &Postgres{s}, nil
}

// CPU is a probe of the postmaster's CPU time, its exited backends
// included.
func (p *Postgres) CPU() CPUProbe { return CPUProbe{PID: p.PID} }
