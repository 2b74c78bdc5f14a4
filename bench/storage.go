package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/shardtail/shardtail/internal/fakes3"
)

// Kinds of SharedStorage.
const (
	// StorageS3 is the production shape: an S3-compatible server over
	// HTTP on loopback (gofakes3, in memory, inside this process) and a
	// throwaway PostgreSQL cluster as consensus.
	StorageS3 = "s3"
	// StorageFile is one host's: a blob directory and one SQLite file,
	// which several processes on a host may share.
	StorageFile = "file"
)

// sharedBucket is the bucket of StorageS3 (S3 bucket names need three
// characters or more).
const sharedBucket = "shardtail-bench"

// SharedStorage is the blob store and consensus that a role-all Server and
// its tail processes share: pass Blob and Consensus in ServerOptions. Close
// stops what it started and removes its files.
type SharedStorage struct {
	// Kind is StorageS3 or StorageFile.
	Kind string
	// Blob and Consensus are the --blob and --consensus URLs.
	Blob, Consensus string
	// Postgres is the consensus server of StorageS3; nil for StorageFile.
	Postgres *Postgres

	s3  *fakes3.Server // StorageS3
	dir string         // StorageFile
}

// StartSharedStorage starts storage of the given kind. StorageS3 returns
// ErrNoPostgres when PostgreSQL's binaries are missing.
func StartSharedStorage(ctx context.Context, kind string) (*SharedStorage, error) {
	switch kind {
	case StorageFile:
		dir, err := os.MkdirTemp("", "shardtail-bench-shared-*")
		if err != nil {
			return nil, fmt.Errorf("shared storage dir: %w", err)
		}
		return &SharedStorage{
			Kind: kind, dir: dir,
			Blob:      "file://" + filepath.Join(dir, "blob"),
			Consensus: "sqlite://" + filepath.Join(dir, "consensus.db"),
		}, nil
	case StorageS3:
		// A handful of pooled connections per process, and psql.
		pg, err := StartPostgres(ctx, 50)
		if err != nil {
			return nil, err
		}
		s3, err := fakes3.Start(sharedBucket)
		if err != nil {
			pg.Stop()
			return nil, fmt.Errorf("s3: %w", err)
		}
		return &SharedStorage{
			Kind: kind, Postgres: pg, s3: s3,
			Blob:      s3.URL("bench"),
			Consensus: pg.URL,
		}, nil
	}
	return nil, fmt.Errorf("%w: storage %q (want %s or %s)", ErrConfig, kind, StorageS3, StorageFile)
}

// ConsensusCPU is a probe of the consensus server's CPU time: all of
// PostgreSQL, its live backends included. The zero probe for StorageFile,
// whose consensus (SQLite) runs inside the shardtail processes.
func (s *SharedStorage) ConsensusCPU() CPUProbe {
	if s.Postgres == nil {
		return CPUProbe{}
	}
	return CPUProbe{PID: s.Postgres.PID, Tree: true}
}

// Describe says what the storage is, for the report.
func (s *SharedStorage) Describe() string {
	if s.Kind == StorageS3 {
		return "S3 over HTTP on loopback (gofakes3, in memory, in the bench process) and a PostgreSQL consensus (a throwaway local cluster, fsync off)"
	}
	return "one blob directory and one SQLite consensus file, shared by both processes"
}

// Close stops the S3 server and PostgreSQL, and removes the files.
func (s *SharedStorage) Close() error {
	var errs []error
	if s.s3 != nil {
		errs = append(errs, s.s3.Close())
	}
	if s.Postgres != nil {
		errs = append(errs, s.Postgres.Stop())
	}
	if s.dir != "" {
		errs = append(errs, os.RemoveAll(s.dir))
	}
	return errors.Join(errs...)
}
