package stats

import (
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 100; i >= 1; i-- {
		s = append(s, time.Duration(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50}, {99, 99}, {100, 100}, {0.1, 1}} {
		if got := Percentile(s, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if Percentile(nil, 50) != 0 || Max(nil) != 0 {
		t.Error("empty input should give 0")
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{3, math.NaN(), 1, 2, 10})
	if s.Median != 2.5 || s.Min != 1 || s.Max != 10 || s.N != 4 {
		t.Errorf("got %+v", s)
	}
	if s := Summarize([]float64{math.NaN()}); !math.IsNaN(s.Median) || s.N != 0 {
		t.Errorf("all-NaN input: got %+v", s)
	}
}
