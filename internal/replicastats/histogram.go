package replicastats

import (
	"math"
	"sync/atomic"
)

// Histogram counts observations in fixed buckets: an observation v goes to
// the first bucket whose upper bound is at least v, or past the last one
// (+Inf). Safe for concurrent use.
type Histogram struct {
	bounds []float64       // ascending upper bounds
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum    atomic.Uint64   // the float64 bits of the sum
}

// NewHistogram returns an empty histogram over bounds, ascending upper
// bounds that the histogram keeps (the caller must not change them).
func NewHistogram(bounds []float64) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe counts v.
func (h *Histogram) Observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Snapshot is a histogram read at once.
type Snapshot struct {
	// Bounds are the buckets' upper bounds, ascending (shared: not to be
	// changed).
	Bounds []float64
	// Cumulative[i] counts the observations at most Bounds[i].
	Cumulative []uint64
	// Count counts every observation (those above the last bound too).
	Count uint64
	// Sum is the sum of the observations.
	Sum float64
}

// Snapshot reads h. Observations that land while it reads may be counted
// in Count and not yet in Sum, or the other way round, never in a bucket
// and not in Count.
func (h *Histogram) Snapshot() Snapshot {
	s := Snapshot{Bounds: h.bounds, Cumulative: make([]uint64, len(h.bounds))}
	for i := range h.counts {
		s.Count += h.counts[i].Load()
		if i < len(h.bounds) {
			s.Cumulative[i] = s.Count
		}
	}
	s.Sum = math.Float64frombits(h.sum.Load())
	return s
}

// ExponentialBucketsRange returns count bounds from lo to hi, each a
// constant factor above the one before (count >= 2, 0 < lo < hi): the
// bounds Prometheus's function of that name computes, so that a histogram
// keeps its buckets whoever exports it.
func ExponentialBucketsRange(lo, hi float64, count int) []float64 {
	growth := math.Pow(hi/lo, 1.0/float64(count-1))
	out := make([]float64, count)
	for i := range out {
		out[i] = lo * math.Pow(growth, float64(i))
	}
	return out
}
