package main

import (
	"testing"
	"time"
)

func TestCronSpecFiresOnEveryEpochAlignedMultipleOfThePeriod(t *testing.T) {
	from := time.Date(2026, 11, 28, 10, 7, 13, 500_000_000, time.UTC)
	for _, period := range []time.Duration{time.Second, 20 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute} {
		spec, err := cronSpec(period)
		if err != nil {
			t.Fatalf("%v: %v", period, err)
		}
		s, err := cronParser.Parse(spec)
		if err != nil {
			t.Fatalf("%v: spec %q: %v", period, spec, err)
		}
		want := nextInstant(from, period)
		for k := range 3 {
			got := s.Next(want.Add(-time.Nanosecond))
			if k == 0 {
				got = s.Next(from)
			}
			if !got.Equal(want) {
				t.Fatalf("period %v (%q): next %v, want %v", period, spec, got, want)
			}
			want = want.Add(period)
		}
	}
}

func TestCronSpecRefusesPeriodsThatDoNotAlign(t *testing.T) {
	for _, period := range []time.Duration{7 * time.Second, 1500 * time.Millisecond, 7 * time.Minute} {
		if _, err := cronSpec(period); err == nil {
			t.Fatalf("period %v: no error", period)
		}
	}
}
