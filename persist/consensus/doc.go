// Package consensus opens a persist.Consensus from a URL, so that
// configuration and flags name the backend as one string:
//
//	sqlite:///var/lib/shardtail/consensus.db   embedded default (package sqlite)
//	sqlite://data/consensus.db                 a path relative to the working directory
//	postgres://shardtail@db:5432/shardtail     PostgreSQL or CockroachDB (package postgres);
//	postgresql://...                           pgx's URL parameters apply (sslmode, pool_max_conns, ...)
//	mem://                                     in memory, for tests (package mem)
//
//	c, err := consensus.Open(ctx, cfg.ConsensusURL)
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//
// The backends live in their own packages and know nothing of this one;
// this package only parses and dispatches, and holds no policy. Every
// backend also has Watch(ctx) (<-chan string, error), the persist.Watcher
// doorbell: check for it with a type assertion.
//
// A sqlite URL's path is percent-decoded (sqlite:///srv/my%20data/c.db) and
// takes no parameters; each mem:// is a new, empty instance.
package consensus
