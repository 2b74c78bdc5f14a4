package server

import (
	"testing"

	"github.com/shardtail/shardtail/persist"
)

// TestPartCacheBytes: the part cache takes the bound given, else persist's
// default, at most a sixteenth of a memory budget.
func TestPartCacheBytes(t *testing.T) {
	for _, tc := range []struct{ configured, budget, want int64 }{
		{0, 0, 0}, // persist's default
		{0, 8 << 30, persist.DefaultPartCacheBytes},
		{0, 256 << 20, 16 << 20},
		{0, 8, 1},
		{-1, 256 << 20, -1},
		{64 << 20, 256 << 20, 64 << 20},
	} {
		if got := partCacheBytes(tc.configured, tc.budget); got != tc.want {
			t.Errorf("partCacheBytes(%d, %d) = %d, want %d", tc.configured, tc.budget, got, tc.want)
		}
	}
}
