package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardtail/shardtail/consumer"
	"github.com/shardtail/shardtail/consumer/pgsink"
)

func init() {
	registerSink("postgres", "land collections in PostgreSQL tables, exactly once", (*Main).sinkPostgres)
}

const sinkPostgresUsage = `shardtail sink postgres: land collections in PostgreSQL tables, exactly once

Each collection lands in a table of the target keyed by --key: the snapshot
with COPY into a new table swapped in at commit, then per batch the upserts
and deletes and the checkpoint (table shardtail_sink_checkpoints, row
--name) in one transaction. SIGTERM commits what is closed and exits;
SIGKILL loses nothing. Rejected rows follow --on-reject.

Usage:
  shardtail sink postgres --source URL --collection NAME [--collection NAME…] --target URL [--table NAME…] --key COL[,COL…] [flags]

Example:
  shardtail sink postgres --source postgres://materialize@127.0.0.1:6875/materialize \
    --collection orders --target postgres://app@db/app --key id --http-listen 127.0.0.1:9187

Flags:
`

// sinkPostgres runs `shardtail sink postgres`.
func (m *Main) sinkPostgres(ctx context.Context, args []string) error {
	var f sinkFlags
	fs := m.newSinkFlagSet("postgres", sinkPostgresUsage, &f)
	var tables stringList
	target := fs.String("target", "", "target PostgreSQL URL (required)")
	fs.Var(&tables, "table", "target table of each --collection, in order (default: the collection's name)")
	key := fs.String("key", "", "primary key columns, comma-separated, of every collection (required)")
	name := fs.String("name", "shardtail", "this sink's row in shardtail_sink_checkpoints; two processes with one name fence each other")
	onReject := fs.String("on-reject", "dead-letter", "rows the target rejects: dead-letter (table shardtail_sink_dead_letters), stall or skip")
	if err := parseSinkFlags(fs, args); err != nil {
		return err
	}
	policy, err := pgsink.ParseRejectPolicy(*onReject)
	if err != nil {
		return err
	}
	cfg, err := f.config()
	switch {
	case err != nil:
		return err
	case *target == "":
		return errors.New("--target is required")
	case *key == "":
		return errors.New("--key is required")
	case len(tables) > 0 && len(tables) != len(f.collections):
		return fmt.Errorf("%d --table for %d --collection", len(tables), len(f.collections))
	}
	var pt []pgsink.Table
	for i, c := range f.collections {
		t := pgsink.Table{Name: c, Key: strings.Split(*key, ",")}
		if len(tables) > 0 {
			t.Name = tables[i]
		}
		pt = append(pt, t)
		cfg.Sources[i].Envelope = t.Envelope()
	}
	return m.runSink(ctx, &f, cfg, func(ctx context.Context, reg prometheus.Registerer) (consumer.Sink, consumer.Checkpoint, func(), error) {
		s, err := pgsink.New(ctx, pgsink.Config{URL: *target, Name: *name, Tables: pt, OnReject: policy, Registerer: reg})
		if err != nil {
			return nil, nil, nil, err
		}
		return s, s, func() { s.Close(context.WithoutCancel(ctx)) }, nil
	})
}
