package bench

import (
	"fmt"
	"slices"
)

// Runs: the full suite repeats each headline measurement and reports the
// median with its min–max, so that one noisy run on a shared machine is
// seen as such.
const (
	DefaultRuns      = 3
	DefaultQuickRuns = 1
)

// medianRun returns the run whose key is the median (the lower middle of an
// even count), or the zero T for no runs.
func medianRun[T any](runs []T, key func(T) float64) T {
	var zero T
	if len(runs) == 0 {
		return zero
	}
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b T) int {
		ka, kb := key(a), key(b)
		switch {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	return sorted[(len(sorted)-1)/2]
}

// spread is the median, minimum and maximum of one figure over the runs
// that measured it; n is how many did.
type spread struct {
	med, lo, hi float64
	n           int
}

// spreadOf summarises f over runs, skipping nil runs and unmeasured
// (negative) values.
func spreadOf[T any](runs []*T, f func(*T) float64) spread {
	var xs []float64
	for _, r := range runs {
		if r == nil {
			continue
		}
		if v := f(r); v >= 0 {
			xs = append(xs, v)
		}
	}
	return spreadValues(xs)
}

// spreadValues summarises xs, all measured; it sorts xs.
func spreadValues(xs []float64) spread {
	if len(xs) == 0 {
		return spread{med: -1, lo: -1, hi: -1}
	}
	slices.Sort(xs)
	return spread{med: xs[(len(xs)-1)/2], lo: xs[0], hi: xs[len(xs)-1], n: len(xs)}
}

// text is the median formatted, with "(min–max)" after it when more than
// one run measured it, or a dash when none did.
func (s spread) text(format func(float64) string) string {
	switch {
	case s.n == 0:
		return "—"
	case s.n == 1:
		return format(s.med)
	}
	return fmt.Sprintf("%s (%s–%s)", format(s.med), format(s.lo), format(s.hi))
}
