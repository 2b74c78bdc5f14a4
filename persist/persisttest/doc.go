// Package persisttest holds the acceptance suites for persist's location
// interfaces: TestBlob for persist.Blob and TestConsensus for
// persist.Consensus. Each suite pins the contract written on its interface,
// and every implementation runs the same suite from its own tests, the real
// servers included, so that a backend that passes is interchangeable with
// any other:
//
//	func TestBlob(t *testing.T) {
//		persisttest.TestBlob(t, func(t *testing.T) persist.Blob {
//			b, err := file.Open(t.Context(), t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			return b
//		})
//	}
//
// The constructor passed to a suite returns a new, empty instance on each
// call; the suite calls it once per subtest and closes what it returns.
//
// The package is imported only by tests; it depends on nothing but persist
// and the standard library.
package persisttest
