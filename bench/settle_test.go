package bench

import (
	"context"
	"testing"
)

// TestSettleRSS: (e)'s RSS is the first of two readings in a row that
// agree (within 1 MiB or 1%) once a collection has completed since the
// storm, or the last at the bound.
func TestSettleRSS(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		name                string
		readings            []int64
		gcs                 []int64 // at the call, then at each reading
		max                 int
		wantFirst, wantLast int64
		wantReadings        int
	}{
		{"scavenged then flat", []int64{400 * mb, 300 * mb, 250 * mb, 249 * mb, 100 * mb}, []int64{5, 6, 6, 6, 6, 6}, 20, 400 * mb, 249 * mb, 4},
		{"within one percent", []int64{1000 * mb, 991 * mb}, []int64{5, 6, 6}, 20, 1000 * mb, 991 * mb, 2},
		{"small server, within 1 MiB", []int64{50 * mb, 49 * mb}, []int64{5, 6, 6}, 20, 50 * mb, 49 * mb, 2},
		{"flat until a collection", []int64{300 * mb, 300 * mb, 300 * mb, 250 * mb, 250 * mb}, []int64{5, 5, 5, 5, 6, 6}, 20, 300 * mb, 250 * mb, 5},
		{"never settles: the last at the bound", []int64{400 * mb, 300 * mb, 200 * mb, 100 * mb}, []int64{5, 6, 6, 6, 6}, 3, 400 * mb, 200 * mb, 3},
		{"no collection: the last at the bound", []int64{300 * mb, 300 * mb, 300 * mb, 300 * mb}, []int64{5, 5, 5, 5, 5}, 3, 300 * mb, 300 * mb, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := 0
			read := func() (int64, error) {
				v := tc.readings[i]
				i++
				return v, nil
			}
			j := 0
			gcs := func() (int64, error) {
				v := tc.gcs[j]
				j++
				return v, nil
			}
			first, last, n, err := settleRSS(context.Background(), read, gcs, 0, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			if first != tc.wantFirst || last != tc.wantLast || n != tc.wantReadings {
				t.Errorf("settleRSS = first %d MiB, last %d MiB after %d readings; want %d, %d after %d",
					first/mb, last/mb, n, tc.wantFirst/mb, tc.wantLast/mb, tc.wantReadings)
			}
		})
	}
}
