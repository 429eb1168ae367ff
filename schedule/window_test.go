package schedule

import (
	"testing"
	"time"
)

// A window with a start only (a runtime schedule's, from its put on) gives
// the same ticks as the schedule filtered by brute force: none before its
// start, every one from it on, the start's own instant included, whatever
// the start's precision and location; a start beyond the years unix ns can
// hold is kept as it is.
func TestWindowFromAStartOnly(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"*/5 * * * *", "@every 90s", "30 2 * * *"} {
		s, err := Parse(spec, berlin)
		if err != nil {
			t.Fatal(err)
		}
		for _, start := range []time.Time{
			time.Date(2026, 3, 29, 1, 58, 12, 345678901, time.UTC), // Berlin's spring forward
			time.Date(2026, 10, 25, 0, 55, 0, 0, time.UTC),         // and back
			time.Date(2026, 12, 2, 7, 35, 0, 0, berlin),            // on a tick of the first
			time.Date(2400, 1, 1, 0, 0, 0, 1, time.UTC),            // beyond unix ns
		} {
			w := Window(s, start, time.Time{})
			for _, after := range []time.Time{start.Add(-26 * time.Hour), start.Add(-time.Nanosecond), start, start.Add(7 * time.Minute)} {
				want := s.Next(after)
				for !want.IsZero() && want.Before(start) {
					want = s.Next(want)
				}
				if got := w.Next(after); !got.Equal(want) {
					t.Errorf("%s from %v: Next(%v) = %v, want %v", spec, start, after, got, want)
				}
			}
		}
	}
}
