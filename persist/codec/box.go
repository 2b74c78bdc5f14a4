package codec

import "unsafe"

// Boxing a value into a row.Datum (an interface) copies it to a fresh heap
// object: one allocation per int64, string, timestamp... outside the few
// values the runtime caches. Decoding a million-row snapshot would make
// millions of tiny objects. Instead each batch decodes a column into one
// typed slab ([]int64, []string, ...) and every datum points into it, which
// is exactly the interface value the compiler would build, minus the copy.
//
// This relies on the layout of an empty interface (a type word and a data
// pointer, runtime.eface), unchanged since Go 1.0 and relied on by reflect2,
// go-json and sonic, and on two rules this package keeps:
//   - T is not pointer-shaped (pointers, maps, chans, funcs, and
//     single-pointer structs and arrays store the pointer itself in the data
//     word); every T used here is a number, string, slice or byte array.
//   - A slab element is never written after it is boxed: interface values
//     are immutable, so nothing else may change what they point at.
//
// TestSlabBoxing checks the result is indistinguishable from ordinary boxing.

// eface is the runtime layout of an interface{} value.
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

// slab holds one column's values of one batch.
type slab[T any] struct {
	vals []T
	typ  unsafe.Pointer // T's type word
}

func newSlab[T any](n int) slab[T] {
	var zero any = *new(T)
	return slab[T]{vals: make([]T, n), typ: (*eface)(unsafe.Pointer(&zero)).typ}
}

// box stores v at slab index j and returns it as a datum that points there.
func (s slab[T]) box(j int, v T) any {
	s.vals[j] = v
	var d any
	*(*eface)(unsafe.Pointer(&d)) = eface{typ: s.typ, data: unsafe.Pointer(&s.vals[j])}
	return d
}
