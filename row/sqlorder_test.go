package row

import (
	"math/rand/v2"
	"testing"
)

func TestCompareSQLNumeric(t *testing.T) {
	vals := []string{"-100.5", "-100", "-2", "-1.75", "-1.5", "-0.001", "0", "0.001", "0.5", "1", "1.25", "9", "10", "100.01", "NaN"}
	for i, a := range vals {
		for j, b := range vals {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := CompareSQL(Numeric(a), Numeric(b)); got != want {
				t.Errorf("CompareSQL(%s, %s) = %d, want %d", a, b, got, want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		x, y := rng.IntN(2001)-1000, rng.IntN(2001)-1000
		a, _ := NormalizeNumeric(itoaScaled(x))
		b, _ := NormalizeNumeric(itoaScaled(y))
		want := 0
		if x < y {
			want = -1
		} else if x > y {
			want = 1
		}
		if got := CompareSQL(a, b); got != want {
			t.Fatalf("CompareSQL(%s, %s) = %d, want %d", a, b, got, want)
		}
	}
}

// itoaScaled renders x/100 as a decimal.
func itoaScaled(x int) string {
	neg := x < 0
	if neg {
		x = -x
	}
	s := ""
	if neg {
		s = "-"
	}
	return s + itoa(x/100) + "." + string(rune('0'+x%100/10)) + string(rune('0'+x%10))
}

func itoa(x int) string {
	if x == 0 {
		return "0"
	}
	var b []byte
	for x > 0 {
		b = append([]byte{byte('0' + x%10)}, b...)
		x /= 10
	}
	return string(b)
}
