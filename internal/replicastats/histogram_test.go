package replicastats_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/batonhq/baton/internal/replicastats"
)

// The buckets are Prometheus's, bound for bound, and an observation lands
// in the bucket a Prometheus histogram puts it in, a bound's own value
// included: dashboards keep their buckets whoever exports them.
func TestHistogramCountsAsPrometheusDoes(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		n      int
	}{{0.001, 60, 16}, {0.001, 86400, 20}} {
		bounds := replicastats.ExponentialBucketsRange(c.lo, c.hi, c.n)
		if want := prometheus.ExponentialBucketsRange(c.lo, c.hi, c.n); !slices.Equal(bounds, want) {
			t.Fatalf("ExponentialBucketsRange(%v, %v, %d) = %v, want %v", c.lo, c.hi, c.n, bounds, want)
		}
		ours := replicastats.NewHistogram(bounds)
		theirs := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Buckets: bounds})
		values := []float64{0, c.lo / 2, c.lo, bounds[3], bounds[3] * 1.0001, c.hi, c.hi * 2, 1e12}
		for _, v := range values {
			theirs.Observe(v)
			ours.Observe(v)
		}
		var m dto.Metric
		if err := theirs.Write(&m); err != nil {
			t.Fatal(err)
		}
		s := ours.Snapshot()
		if s.Count != m.Histogram.GetSampleCount() || s.Sum != m.Histogram.GetSampleSum() {
			t.Errorf("count %d sum %v, want %d and %v", s.Count, s.Sum, m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum())
		}
		for i, b := range m.Histogram.Bucket {
			if s.Bounds[i] != b.GetUpperBound() || s.Cumulative[i] != b.GetCumulativeCount() {
				t.Errorf("bucket %d: le %v holds %d, want le %v holding %d", i, s.Bounds[i], s.Cumulative[i], b.GetUpperBound(), b.GetCumulativeCount())
			}
		}
	}
}

// A family makes one value per key, also under concurrent first use.
func TestFamilyMakesOneValuePerKey(t *testing.T) {
	made := 0
	f := replicastats.NewFamily[string](func() *int { made++; return new(int) })
	var wg sync.WaitGroup
	got := make([]*int, 8)
	for i := range got {
		wg.Go(func() { got[i] = f.Get("a") })
	}
	wg.Wait()
	f.Get("b")
	keys := 0
	f.Each(func(string, *int) { keys++ })
	if made != 2 || keys != 2 || slices.ContainsFunc(got, func(p *int) bool { return p != got[0] }) {
		t.Errorf("made %d values for 2 keys, %d listed, one value for \"a\": %v", made, keys, !slices.ContainsFunc(got, func(p *int) bool { return p != got[0] }))
	}
}
