package consensus

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/persist/consensus/postgres"
	"github.com/shardtail/shardtail/persist/consensus/sqlite"
)

// Schemes, as Open accepts them (case-insensitively).
const (
	SchemeSQLite     = "sqlite"
	SchemePostgres   = "postgres"
	SchemePostgreSQL = "postgresql"
	SchemeMem        = "mem"
)

// example ends URL errors with a URL that works.
const example = "e.g. sqlite:///var/lib/shardtail/consensus.db, postgres://user@host:5432/db or mem://"

// Open opens the Consensus that rawURL names; see the package
// documentation for the forms.
func Open(ctx context.Context, rawURL string) (persist.Consensus, error) {
	t, err := parse(rawURL)
	if err != nil {
		return nil, err
	}
	switch t.scheme {
	case SchemeSQLite:
		return sqlite.Open(ctx, sqlite.Config{Path: t.path})
	case SchemePostgres:
		return postgres.Open(ctx, rawURL)
	default: // SchemeMem
		return mem.New(), nil
	}
}

// target is a parsed consensus URL.
type target struct {
	scheme string // SchemeSQLite, SchemePostgres (for postgresql too) or SchemeMem
	path   string // SchemeSQLite's file
}

// parse checks rawURL and says which backend it names. Its errors show no
// more than the scheme of a postgres URL, which may carry a password.
func parse(rawURL string) (target, error) {
	if rawURL == "" {
		return target{}, fmt.Errorf("%w: empty; want one like %s", ErrInvalidURL, example)
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || scheme == "" {
		return target{}, fmt.Errorf("%w: %q has no scheme://; want one like %s", ErrInvalidURL, rawURL, example)
	}
	switch strings.ToLower(scheme) {
	case SchemeSQLite:
		if strings.ContainsAny(rest, "?#") {
			return target{}, fmt.Errorf("%w: %q: a sqlite URL takes no parameters (percent-encode ? and # in the path)", ErrInvalidURL, rawURL)
		}
		path, err := url.PathUnescape(rest)
		if err != nil {
			return target{}, fmt.Errorf("%w: %q: %v", ErrInvalidURL, rawURL, err)
		}
		if path == "" {
			return target{}, fmt.Errorf("%w: %q names no file; want sqlite:///absolute/path.db or sqlite://relative/path.db", ErrInvalidURL, rawURL)
		}
		return target{scheme: SchemeSQLite, path: path}, nil
	case SchemePostgres, SchemePostgreSQL:
		if rest == "" {
			return target{}, fmt.Errorf("%w: %s:// names no server; want postgres://user@host:port/db", ErrInvalidURL, scheme)
		}
		return target{scheme: SchemePostgres}, nil
	case SchemeMem:
		if rest != "" {
			return target{}, fmt.Errorf("%w: %q: nothing may follow mem://", ErrInvalidURL, rawURL)
		}
		return target{scheme: SchemeMem}, nil
	}
	return target{}, fmt.Errorf("%w: unsupported scheme %q; want sqlite, postgres, postgresql or mem (%s)", ErrInvalidURL, scheme, example)
}
