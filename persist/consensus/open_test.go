package consensus

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardtail/shardtail/internal/testsupport/pgtest"
	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/persist/consensus/mem"
	"github.com/shardtail/shardtail/persist/consensus/postgres"
	"github.com/shardtail/shardtail/persist/consensus/sqlite"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestParse(t *testing.T) {
	tests := []struct {
		url    string
		want   target
		errHas string // substring of the error; "" for success
	}{
		{"sqlite:///var/lib/shardtail/consensus.db", target{SchemeSQLite, "/var/lib/shardtail/consensus.db"}, ""},
		{"sqlite://relative/path.db", target{SchemeSQLite, "relative/path.db"}, ""},
		{"sqlite://consensus.db", target{SchemeSQLite, "consensus.db"}, ""},
		{"sqlite://../up/c.db", target{SchemeSQLite, "../up/c.db"}, ""},
		{"SQLite:///x.db", target{SchemeSQLite, "/x.db"}, ""},
		{"sqlite:///srv/my%20data/c%3F.db", target{SchemeSQLite, "/srv/my data/c?.db"}, ""},
		{"postgres://user@host:5432/db?sslmode=disable", target{scheme: SchemePostgres}, ""},
		{"postgresql://user:pw@host/db", target{scheme: SchemePostgres}, ""},
		{"mem://", target{scheme: SchemeMem}, ""},

		{"", target{}, "empty"},
		{"/var/lib/consensus.db", target{}, "no scheme"},
		{"sqlite:consensus.db", target{}, "no scheme"},
		{"://x", target{}, "no scheme"},
		{"sqlite://", target{}, "names no file"},
		{"sqlite:///x.db?mode=ro", target{}, "no parameters"},
		{"sqlite:///x%zz.db", target{}, "invalid URL escape"},
		{"postgres://", target{}, "names no server"},
		{"mem://name", target{}, "nothing may follow"},
		{"mysql://user:secret@host/db", target{}, "unsupported scheme \"mysql\""},
	}
	for _, tt := range tests {
		got, err := parse(tt.url)
		if tt.errHas == "" {
			if err != nil || got != tt.want {
				t.Errorf("parse(%q) = %+v, %v; want %+v", tt.url, got, err, tt.want)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidURL) || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("parse(%q) error = %v; want ErrInvalidURL saying %q", tt.url, err, tt.errHas)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("parse(%q) error shows the password: %v", tt.url, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"sqlite:///a.db", "sqlite://a/b.db", "postgres://u@h/d", "mem://", "sqlite:///%41", "x://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidURL) {
				t.Fatalf("parse(%q) = %v; want ErrInvalidURL", s, err)
			}
			return
		}
		switch got.scheme {
		case SchemeSQLite:
			if got.path == "" {
				t.Fatalf("parse(%q): sqlite with an empty path", s)
			}
		case SchemePostgres, SchemeMem:
			if got.path != "" {
				t.Fatalf("parse(%q): %s with a path %q", s, got.scheme, got.path)
			}
		default:
			t.Fatalf("parse(%q): scheme %q", s, got.scheme)
		}
	})
}

// TestOpen opens each backend by URL and checks it works and is the right
// type, with the Watch doorbell.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		url  string
		want func(persist.Consensus) bool
	}{
		{"Mem", "mem://", func(c persist.Consensus) bool { _, ok := c.(*mem.Consensus); return ok }},
		{"SQLiteAbsolute", "sqlite://" + filepath.Join(dir, "abs.db"), func(c persist.Consensus) bool { _, ok := c.(*sqlite.Consensus); return ok }},
		{"SQLiteRelative", "sqlite://rel.db", func(c persist.Consensus) bool { _, ok := c.(*sqlite.Consensus); return ok }},
		{"Postgres", pgtest.URL(t), func(c persist.Consensus) bool { _, ok := c.(*postgres.Consensus); return ok }},
	}
	t.Chdir(dir)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Open(t.Context(), tt.url)
			if err != nil {
				t.Fatalf("Open(%s): %v", tt.url, err)
			}
			defer c.Close()
			if !tt.want(c) {
				t.Fatalf("Open(%s) = %T", tt.url, c)
			}
			if _, ok := c.(interface {
				Watch(ctx context.Context) (<-chan string, error)
			}); !ok {
				t.Errorf("%T has no Watch", c)
			}
			ok, err := c.CompareAndSet(t.Context(), "k", nil, persist.VersionedData{SeqNo: 1, Data: []byte("x")})
			if err != nil || !ok {
				t.Fatalf("CAS = %v, %v; want committed", ok, err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "rel.db")); err != nil {
		t.Errorf("sqlite://rel.db did not create rel.db in the working directory: %v", err)
	}
}

func TestOpenUnsupported(t *testing.T) {
	if _, err := Open(t.Context(), "mysql://h/db"); !errors.Is(err, ErrInvalidURL) {
		t.Fatalf("Open(mysql://) = %v; want ErrInvalidURL", err)
	}
}
