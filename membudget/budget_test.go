package membudget

import "testing"

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "268435456": 256 << 20, "256MiB": 256 << 20, "1.5GiB": 3 << 29, "2 KB": 2000, "10B": 10} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
		if want > 0 {
			if back, err := ParseSize(FormatSize(want)); err != nil || back != want {
				t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", want, back, err)
			}
		}
	}
	for _, in := range []string{"", "-1", "MiB", "12XB", "1e30GiB", "NaN", "Inf"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) succeeded, want an error", in)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"256MiB", "1.5 GiB", "0", "7B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
	})
}

func TestBudgetTotalAndOver(t *testing.T) {
	b := New(100)
	a, c := b.Holder("a"), b.Holder("c")
	src := int64(10)
	b.AddSource("src", func() int64 { return src })
	a.Add(50)
	c.Add(30)
	if got := b.Total(); got != 90 {
		t.Fatalf("Total = %d, want 90", got)
	}
	if b.Over() {
		t.Fatal("Over at 90 of 100")
	}
	src = 21
	if got := b.Excess(); got != 1 {
		t.Fatalf("Excess = %d, want 1", got)
	}
	b.SetLimit(0)
	if b.Over() {
		t.Fatal("an unlimited budget is never over")
	}
	var nilBudget *Budget
	nilBudget.Holder("x").Add(5) // a nil budget counts nothing
	if nilBudget.Over() || nilBudget.Total() != 0 {
		t.Fatal("nil budget not inert")
	}
}
