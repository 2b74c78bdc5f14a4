package row

import (
	"cmp"
	"slices"
)

// CompareUpdate orders updates by row, then time.
func CompareUpdate(a, b Update) int {
	if c := Compare(a.Row, b.Row); c != 0 {
		return c
	}
	return cmp.Compare(a.T, b.T)
}

// Consolidate sorts updates by (row, time), sums the diffs of equal
// (row, time) pairs and drops those that sum to zero. It reuses the backing
// array of updates and returns the consolidated prefix.
func Consolidate(updates []Update) []Update {
	slices.SortFunc(updates, CompareUpdate)
	out := updates[:0]
	for _, u := range updates {
		if n := len(out); n > 0 && out[n-1].T == u.T && Equal(out[n-1].Row, u.Row) {
			out[n-1].Diff += u.Diff
			continue
		}
		if n := len(out); n > 0 && out[n-1].Diff == 0 {
			out[n-1] = u
			continue
		}
		out = append(out, u)
	}
	if n := len(out); n > 0 && out[n-1].Diff == 0 {
		out = out[:n-1]
	}
	clear(updates[len(out):])
	return out
}

// IsConsolidated reports whether updates are sorted by (row, time) with no
// duplicate pair and no zero diff.
func IsConsolidated(updates []Update) bool {
	for i, u := range updates {
		if u.Diff == 0 {
			return false
		}
		if i > 0 && CompareUpdate(updates[i-1], u) >= 0 {
			return false
		}
	}
	return true
}

// SortByTime orders updates by time, keeping the relative order of updates
// at the same time (stable).
func SortByTime(updates []Update) {
	slices.SortStableFunc(updates, func(a, b Update) int { return cmp.Compare(a.T, b.T) })
}
