package dataflow

import (
	"context"
	"errors"
	"io"

	"github.com/shardtail/shardtail/persist"
	"github.com/shardtail/shardtail/row"
)

// snapshot reads r's whole snapshot at asOf through m (nil for the rows as
// stored), every update stamped asOf.
func snapshot(ctx context.Context, r *persist.Reader, asOf uint64, m MFP) ([]row.Update, error) {
	cur, err := r.Snapshot(ctx, asOf)
	if err != nil {
		return nil, err
	}
	defer cur.Close()
	var out []row.Update
	for {
		chunk, err := cur.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		mapped, err := Apply(m, chunk)
		if err != nil {
			return nil, err
		}
		out = append(out, mapped...)
	}
}
