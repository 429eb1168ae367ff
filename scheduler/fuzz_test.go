package scheduler

import (
	"strings"
	"testing"
	"time"
)

// fuzzZones are the zones FuzzSchedule evaluates specs in: no DST, the
// common European and American rules, a 30-minute DST shift, a zone whose
// offset is not a whole hour, and one that skipped a whole day.
var fuzzZones = []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "Pacific/Apia"}

// FuzzSchedule: any spec either parses or fails with an error naming it
// (never a panic), and a parsed schedule's ticks, followed from any instant
// in any zone, strictly increase: a tick is never produced twice and never
// before the one before it, and Next(t) is always after t and a whole second.
// Ticks over the same window agree with Next.
func FuzzSchedule(f *testing.F) {
	for _, s := range []string{
		"*/5 * * * *", "0 2 * * *", "30 2 * * 0", "0 0 1 * *", "0 0 29 2 *", "@every 90s",
		"@hourly", "@daily", "@weekly", "@monthly", "@yearly", "0 30 1,2,3 * * *",
		"15 3 * 3,10 0", "0 0 30 2 *", "61 * * * *", "CRON_TZ=UTC 0 * * * *", "@every 0s",
		"*/7 1-3 * * 1-5", "0 0 * * 7", "@every 1s", "0 0 L * *", "",
		"0 9 * * 1#2", "0 18 * * 5L", "30 2 L * *", "0 0 15,L * 0#1", "0 0 * * 1#6",
		"0 0 * 2 5#5", "0 0 * * 5-7", "0 0 * * 7L", "0 0 1-10/2,L * *", "0 0 * * 1/2,5L", "0 0 L/2 * *",
	} {
		f.Add(s, uint8(1), int64(1710032400)) // near Berlin's and New York's spring-forward in 2024
		f.Add(s, uint8(2), int64(1730602800)) // New York's fall-back in 2024
	}
	f.Fuzz(func(t *testing.T, spec string, zone uint8, from int64) {
		if len(spec) > 200 {
			return
		}
		loc, err := time.LoadLocation(fuzzZones[int(zone)%len(fuzzZones)])
		if err != nil {
			t.Skip(err)
		}
		s, err := ParseSchedule(spec, loc)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "schedule: ") {
				t.Fatalf("error %q does not name the schedule", err)
			}
			return
		}
		// instants from 1970 to 2200, whole seconds or not
		start := time.Unix(0, 0).Add(time.Duration(from%(230*365*86400)) * time.Second).Add(time.Duration(uint64(from)%1000) * time.Millisecond)
		if start.Before(time.Unix(0, 0)) {
			start = time.Unix(0, 0).Add(-start.Sub(time.Unix(0, 0)))
		}
		prev := start
		var ticks []time.Time
		for range 40 {
			next := s.Next(prev)
			if next.IsZero() {
				break
			}
			if !next.After(prev) {
				t.Fatalf("%q in %s: Next(%v) = %v, not after it", spec, loc, prev, next)
			}
			if next.Nanosecond() != 0 {
				t.Fatalf("%q: tick %v is not a whole second", spec, next)
			}
			for _, seen := range ticks {
				if seen.Equal(next) {
					t.Fatalf("%q in %s: tick %v produced twice", spec, loc, next)
				}
			}
			ticks = append(ticks, next)
			prev = next
		}
		if len(ticks) > 1 {
			got := Ticks(s, start, ticks[len(ticks)-1], len(ticks)+1)
			if len(got) != len(ticks) {
				t.Fatalf("%q: Ticks over the window = %d ticks, Next gave %d", spec, len(got), len(ticks))
			}
			for i := range got {
				if !got[i].Equal(ticks[i]) {
					t.Fatalf("%q: Ticks[%d] = %v, Next gave %v", spec, i, got[i], ticks[i])
				}
			}
		}
	})
}
