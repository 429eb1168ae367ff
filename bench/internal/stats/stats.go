// Package stats holds the small statistics lockbench needs: percentiles of
// latency samples and the median/min/max summary of one metric over
// repetitions.
package stats

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of samples by the
// nearest-rank method, or 0 when there are none. It sorts samples in place.
func Percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	slices.Sort(samples)
	rank := int(math.Ceil(p / 100 * float64(len(samples))))
	rank = min(max(rank, 1), len(samples))
	return samples[rank-1]
}

// Max returns the largest sample, or 0 when there are none.
func Max(samples []time.Duration) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	return slices.Max(samples)
}

// Summary is one metric over the repetitions of a cell.
type Summary struct {
	Median, Min, Max float64
	N                int // repetitions that produced a value
}

// Summarize returns the median, minimum and maximum of values; NaN values
// (repetitions where the metric was undefined) are left out.
func Summarize(values []float64) Summary {
	vs := make([]float64, 0, len(values))
	for _, v := range values {
		if !math.IsNaN(v) {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return Summary{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	slices.Sort(vs)
	n := len(vs)
	med := vs[n/2]
	if n%2 == 0 {
		med = (vs[n/2-1] + vs[n/2]) / 2
	}
	return Summary{Median: med, Min: vs[0], Max: vs[n-1], N: n}
}
