package bench

import (
	"math"
	"slices"
)

// Dist summarises a sample of durations or latencies (in the unit of the
// samples: seconds for snapshot times, milliseconds for write latencies).
type Dist struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// NewDist summarises xs, sorting it in place.
func NewDist(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	slices.Sort(xs)
	return Dist{N: len(xs), P50: quantile(xs, 0.50), P95: quantile(xs, 0.95), P99: quantile(xs, 0.99), Max: xs[len(xs)-1]}
}

// quantile is the nearest-rank quantile of sorted xs.
func quantile(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
