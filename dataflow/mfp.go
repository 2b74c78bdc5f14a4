package dataflow

import "github.com/shardtail/shardtail/row"

// Apply maps updates through m, keeping each update's time and diff and
// dropping the rows m filters out; with a nil m it returns updates as they
// are. It is the one loop every consumer of an MFP runs: a subscribe's
// snapshot and listen batches, a materialized view's evaluation and steady
// batches, and a SELECT's chunks. The result does not share updates'
// backing array (unless m is nil), so the caller may consolidate it in
// place.
func Apply(m MFP, updates []row.Update) ([]row.Update, error) {
	if m == nil {
		return updates, nil
	}
	out := updates[:0:0]
	for _, u := range updates {
		r, ok, err := m.Apply(u.Row)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, row.Update{Row: r, T: u.T, Diff: u.Diff})
		}
	}
	return out, nil
}
