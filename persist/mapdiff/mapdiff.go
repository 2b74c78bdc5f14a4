// Package mapdiff computes and applies the change between two versions of a
// map. Versioned state that is written as diffs (a shard's State in persist,
// the adapter's catalog) uses it so that a version costs what changed, not
// the size of the map.
//
// Values are compared with ==, so for maps of pointers the versions must be
// copy-on-write: a changed entry is a new pointer, never an old one
// modified in place (a modification in place would not be seen).
package mapdiff

// Diff returns the entries of new that are absent from old or differ from
// old's (set, nil when there are none) and the keys of old absent from new
// (del). Apply(old, set, del) makes old equal to new.
func Diff[K comparable, V comparable](old, new map[K]V) (set map[K]V, del []K) {
	for k, v := range new {
		if ov, ok := old[k]; !ok || ov != v {
			if set == nil {
				set = make(map[K]V)
			}
			set[k] = v
		}
	}
	for k := range old {
		if _, ok := new[k]; !ok {
			del = append(del, k)
		}
	}
	return set, del
}

// Apply changes m in place: it deletes the keys in del, then stores the
// entries of set.
func Apply[K comparable, V any](m map[K]V, set map[K]V, del []K) {
	for _, k := range del {
		delete(m, k)
	}
	for k, v := range set {
		m[k] = v
	}
}
