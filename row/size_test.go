package row

import "testing"

// TestSize pins the estimate: byte budgets (queue and result-size limits)
// are configured in bytes of it, so a change moves every limit.
func TestSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		row  Row
		want int64
	}{
		{"Empty", nil, 0},
		{"Fixed", Row{int64(1), nil, true, Timestamp(3)}, 4 * 16},
		{"Variable", Row{"abc", []byte{1, 2}, Numeric("1.5"), JSON(`{}`)}, (16 + 3) + (24 + 2) + (16 + 3) + (16 + 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.row.Size(); got != tc.want {
				t.Errorf("Row.Size() = %d, want %d", got, tc.want)
			}
			u := Update{Row: tc.row, T: 7, Diff: -1}
			if got, want := u.Size(), updateOverhead+tc.want; got != want {
				t.Errorf("Update.Size() = %d, want %d", got, want)
			}
		})
	}
}
