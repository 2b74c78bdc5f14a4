package membudget

import (
	"reflect"
	"runtime/debug"
	"testing"
)

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

// victim is a Victim holding bytes of a holder.
type victim struct {
	h     *Holder
	bytes int64
	ended *[]int64
}

func (v *victim) MemoryBytes() int64 { return v.bytes }
func (v *victim) EndOverBudget(int64) {
	*v.ended = append(*v.ended, v.bytes)
	v.h.Add(-v.bytes)
	v.bytes = 0
}

// TestEnforceOrder: Enforce runs the stages in order while over the
// budget, then ends victims largest first, and no more than needed.
func TestEnforceOrder(t *testing.T) {
	b := New(0)
	h := b.Holder("h")
	var log []string
	var ended []int64
	// Registered out of order: Enforce sorts them.
	b.AddStage(StageDetach, func() { log = append(log, "detach"); h.Add(-10) })
	removeShrink := b.AddStage(StageShrink, func() { log = append(log, "shrink"); h.Add(-10) })
	removeCache := b.AddStage(StageCache, func() { log = append(log, "cache"); h.Add(-10) })
	for _, n := range []int64{5, 30, 20} {
		h.Add(n)
		b.AddVictim(&victim{h: h, bytes: n, ended: &ended})
	}
	h.Add(50) // 105 in all: 50 the stages free, 55 the victims hold

	b.SetLimit(60) // the stages free 30, one victim the other 15
	b.Enforce()
	if got, want := log, []string{"cache", "shrink", "detach"}; !reflect.DeepEqual(got, want) {
		t.Errorf("stages ran %v, want %v", got, want)
	}
	if got, want := ended, []int64{30}; !reflect.DeepEqual(got, want) {
		t.Errorf("ended victims of %v bytes, want %v (the largest only)", got, want)
	}
	if b.Over() || b.Ended() != 1 {
		t.Errorf("after Enforce: total %d of %d, ended %d; want within, 1", b.Total(), b.Limit(), b.Ended())
	}

	log, ended = nil, nil
	removeShrink()
	removeCache()
	b.SetLimit(b.Total() - 1) // the detach stage is enough
	b.Enforce()
	if got, want := log, []string{"detach"}; !reflect.DeepEqual(got, want) || len(ended) != 0 {
		t.Errorf("stages ran %v and ended %v; want %v and none", got, ended, want)
	}
	log = nil
	b.SetLimit(b.Total() + 1)
	b.Enforce() // within the budget: nothing runs
	if len(log) != 0 {
		t.Errorf("stages ran %v within the budget", log)
	}
}

// TestApplyRuntimeLimit: the runtime's soft limit is the budget plus the
// headroom, and left alone when unlimited or when GOMEMLIMIT is set.
func TestApplyRuntimeLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	t.Setenv("GOMEMLIMIT", "")
	if got := ApplyRuntimeLimit(0); got != 0 || debug.SetMemoryLimit(-1) != prev {
		t.Errorf("an unlimited budget set a runtime limit (%d)", got)
	}
	const budget = 256 << 20
	if got, want := ApplyRuntimeLimit(budget), int64(budget+RuntimeHeadroom); got != want || debug.SetMemoryLimit(-1) != want {
		t.Errorf("ApplyRuntimeLimit = %d, runtime limit %d; want %d", got, debug.SetMemoryLimit(-1), want)
	}
	debug.SetMemoryLimit(prev)
	t.Setenv("GOMEMLIMIT", "1GiB")
	if got := ApplyRuntimeLimit(budget); got != 0 || debug.SetMemoryLimit(-1) != prev {
		t.Errorf("with GOMEMLIMIT set, ApplyRuntimeLimit = %d", got)
	}
}

// TestTransientHoldersEndNoVictim: a transient holder's bytes make the
// stages run, but no victim is ended for them.
func TestTransientHoldersEndNoVictim(t *testing.T) {
	b := New(100)
	h, tr := b.Holder("h"), b.TransientHolder("t")
	if again := b.TransientHolder("t"); again != tr {
		t.Fatal("TransientHolder made a second counter for one name")
	}
	var shed int
	b.AddStage(StageShrink, func() { shed++ })
	var ended []int64
	h.Add(80)
	b.AddVictim(&victim{h: h, bytes: 80, ended: &ended})
	tr.Add(50) // 130 in all, 80 without the transient bytes
	b.Enforce()
	if shed != 1 || len(ended) != 0 {
		t.Fatalf("over the budget by transient bytes only: %d stage runs and victims ended %v; want 1 and none", shed, ended)
	}
	h.Add(30) // 110 without the transient bytes
	b.Enforce()
	if got, want := ended, []int64{80}; !reflect.DeepEqual(got, want) {
		t.Fatalf("over the budget without the transient bytes: ended %v, want %v", got, want)
	}
}

// TestHolderPeak: a holder remembers the most it held at once, also when
// charged from many goroutines.
func TestHolderPeak(t *testing.T) {
	h := New(0).Holder(HolderCatchUp)
	h.Add(100)
	h.Add(-60)
	h.Add(30)
	if got := h.Peak(); got != 100 {
		t.Fatalf("peak %d after +100 -60 +30, want 100", got)
	}
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 1000 {
				h.Add(10)
				h.Add(-10)
			}
		}()
	}
	for range 8 {
		<-done
	}
	if got, now := h.Peak(), h.Bytes(); got < 100 || got > 70+8*10 || now != 70 {
		t.Fatalf("peak %d, bytes %d; want the peak in [100, 150] and 70 held", got, now)
	}
	if (*Holder)(nil).Peak() != 0 {
		t.Fatal("a nil holder has a peak")
	}
}
