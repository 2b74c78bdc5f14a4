package mapdiff_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/shardtail/shardtail/persist/mapdiff"
)

func TestDiffApply(t *testing.T) {
	old := map[string]int{"keep": 1, "change": 2, "drop": 3}
	new := map[string]int{"keep": 1, "change": 20, "add": 4}
	set, del := mapdiff.Diff(old, new)
	if want := map[string]int{"change": 20, "add": 4}; !maps.Equal(set, want) {
		t.Errorf("set = %v, want %v", set, want)
	}
	if want := []string{"drop"}; !slices.Equal(del, want) {
		t.Errorf("del = %v, want %v", del, want)
	}
	got := maps.Clone(old)
	mapdiff.Apply(got, set, del)
	if !maps.Equal(got, new) {
		t.Errorf("Apply(old, Diff(old, new)) = %v, want %v", got, new)
	}
	if set, del := mapdiff.Diff(new, new); set != nil || del != nil {
		t.Errorf("Diff(m, m) = %v, %v, want nothing", set, del)
	}
}
