package schedule

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// Calendar specs tick on the right days, follow the DST rules of other
// fixed-time specs, and refuse what they cannot mean with an error naming
// the field.
func TestCalendarSpecs(t *testing.T) {
	utc := time.UTC
	berlin := mustLoad(t, "Europe/Berlin")
	day := func(loc *time.Location, s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		spec string
		loc  *time.Location
		from string
		want []string // local wall times
	}{
		{"0 0 L * *", utc, "2024-01-15 00:00", []string{"2024-01-31 00:00", "2024-02-29 00:00", "2024-03-31 00:00", "2024-04-30 00:00"}},
		{"0 9 * * 1#2", utc, "2026-11-25 00:00", []string{"2026-12-14 09:00", "2027-01-11 09:00", "2027-02-08 09:00"}},
		{"0 18 * * 5L", utc, "2026-11-25 00:00", []string{"2026-11-27 18:00", "2026-12-25 18:00", "2027-01-29 18:00"}},
		{"0 18 * * FRIL", utc, "2026-11-28 00:00", []string{"2026-12-25 18:00"}},
		{"0 12 15,L * *", utc, "2026-02-01 00:00", []string{"2026-02-15 12:00", "2026-02-28 12:00", "2026-03-15 12:00"}},
		{"0 0 1 * 5L", utc, "2026-11-25 00:00", []string{"2026-11-27 00:00", "2026-12-01 00:00", "2026-12-25 00:00"}},
		{"0 7 * * 0#1,SAT#1", utc, "2026-11-25 00:00", []string{"2026-12-05 07:00", "2026-12-06 07:00", "2027-01-02 07:00"}},
		// 29 February on a Friday: the fifth Friday of a February
		{"0 0 * 2 5#5", utc, "2026-11-25 00:00", []string{"2036-02-29 00:00", "2064-02-29 00:00", "2092-02-29 00:00", "2104-02-29 00:00"}},
		// the longest gap: 40 years, as 2100 is no leap year
		{"0 0 * FEB FRI#5", utc, "2188-03-01 00:00", []string{"2228-02-29 00:00"}},
		// 7 is Sunday, alone, in ranges, lists, with L and #
		{"0 0 * * 7", utc, "2026-11-25 00:00", []string{"2026-11-29 00:00", "2026-12-06 00:00"}},
		{"0 0 * * 5-7", utc, "2026-11-25 00:00", []string{"2026-11-27 00:00", "2026-11-28 00:00", "2026-11-29 00:00", "2026-12-04 00:00"}},
		{"0 0 * * 3,7", utc, "2026-11-25 00:00", []string{"2026-11-29 00:00", "2026-12-02 00:00", "2026-12-06 00:00"}},
		{"0 0 * * 7L", utc, "2026-11-25 00:00", []string{"2026-11-29 00:00", "2026-12-27 00:00"}},
		{"0 0 * * 7#1", utc, "2026-11-25 00:00", []string{"2026-12-06 00:00", "2027-01-03 00:00"}},
		{"0 0 * * 1-7/2", utc, "2026-11-25 00:00", []string{"2026-11-27 00:00", "2026-11-29 00:00", "2026-11-30 00:00"}},
		// steps beside L and #; "a/s" in day of week stops at Saturday, as
		// robfig/cron reads it without L
		{"0 0 1-10/4,L * *", utc, "2026-02-01 00:00", []string{"2026-02-05 00:00", "2026-02-09 00:00", "2026-02-28 00:00", "2026-03-01 00:00"}},
		{"0 0 25/2,L 2 *", utc, "2026-01-01 00:00", []string{"2026-02-25 00:00", "2026-02-27 00:00", "2026-02-28 00:00", "2027-02-25 00:00"}},
		{"0 0 * * 5/2,1#1", utc, "2026-11-25 00:00", []string{"2026-11-27 00:00", "2026-12-04 00:00", "2026-12-07 00:00"}},
		{"0 0 * * */3,0L", utc, "2026-11-25 00:00", []string{"2026-11-28 00:00", "2026-11-29 00:00", "2026-12-02 00:00"}},
		// the last day of March 2024 is Berlin's spring-forward day: 02:30
		// does not exist and runs at the jump (03:00 CEST), as for any
		// fixed-time spec
		{"30 2 L * *", berlin, "2024-03-30 00:00", []string{"2024-03-31 03:00", "2024-04-30 02:30"}},
	} {
		s, err := Parse(tc.spec, tc.loc)
		if err != nil {
			t.Fatalf("%q: %v", tc.spec, err)
		}
		at := day(tc.loc, tc.from)
		for _, w := range tc.want {
			at = s.Next(at)
			if got := at.In(tc.loc).Format("2006-01-02 15:04"); got != w {
				t.Errorf("%q in %s: got %s, want %s", tc.spec, tc.loc, got, w)
				break
			}
		}
	}
	for spec, want := range map[string]string{
		"0 0 * * 8#2":      `"8" is no weekday`,
		"0 0 * * 1#6":      "1 to 5",
		"0 0 * * L":        "needs a weekday before it",
		"0 0 LW * *":       `day of month "LW"`,
		"0 0 L,40 * *":     "out of 1-31",
		"0 0 5-1 * 1L":     "must go up",
		"0 0 * * 8":        `"8": 8 is out of 0-7`,
		"0 0 * * 5-8":      `"5-8": 8 is out of 0-7`,
		"0 0 L/2 * *":      "L takes no step",
		"0 0 1L * *":       "L stands alone in day of month",
		"0 0 * * 5L/2":     "a step applies to a number, a range or *, not to D#N or DL",
		"0 0 * * 1#2/2":    "not to D#N or DL",
		"0 0 1-10/0,L * *": "the step after / must be a whole number of at least 1",
		"0 0 1-40/2,L * *": `"1-40/2": 40 is out of 1-31`,
		"0 0 x,L * *":      `"x" is no number`,
	} {
		_, err := Parse(spec, utc)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "schedule: ") {
			t.Errorf("%q: %v, want an error naming %q", spec, err, want)
		}
	}
}

// dayByDay is calendarSchedule.Next as a plain walk: from a tick on a day
// the filter refuses, go on from the end of that day.
func dayByDay(s *calendarSchedule, after time.Time) time.Time {
	t := after
	for range calendarHorizonYears * 366 {
		n := s.inner.Next(t)
		if n.IsZero() {
			return n
		}
		local := n.In(s.loc)
		if s.match(local) {
			return n
		}
		y, m, d := local.Date()
		t = time.Date(y, m, d+1, 0, 0, 0, 0, s.loc).Add(-time.Nanosecond)
		if !t.After(n) {
			t = n
		}
	}
	return time.Time{}
}

// Next skips to the next day the filter takes on the calendar alone; its
// ticks are those of a day-by-day walk, also in zones whose transitions
// skip or repeat midnight (Santiago, Havana, Beirut) or a whole day (Apia).
func TestCalendarSkipMatchesDayByDayWalk(t *testing.T) {
	var zones []*time.Location
	for _, z := range []string{"Europe/Berlin", "America/Santiago", "Australia/Lord_Howe", "Pacific/Apia", "America/New_York", "Asia/Beirut", "America/Havana"} {
		zones = append(zones, mustLoad(t, z))
	}
	r := rand.New(rand.NewPCG(5, 7))
	compared := 0
	for range 1500 {
		spec := randomSpec(r)
		loc := zones[r.IntN(len(zones))]
		s, err := Parse(spec, loc)
		if err != nil {
			continue
		}
		cs, ok := s.(*calendarSchedule)
		if !ok {
			continue
		}
		start := time.Unix(time.Date(2005, 1, 1, 0, 0, 0, 0, time.UTC).Unix()+r.Int64N(20*365*86400), 0)
		got, want := start, start
		for range 6 {
			got, want = cs.Next(got), dayByDay(cs, want)
			if !got.Equal(want) {
				t.Fatalf("%q in %s from %v: Next gives %v, a day-by-day walk %v", spec, loc, start, got, want)
			}
			compared++
		}
	}
	if compared < 1000 {
		t.Fatalf("only %d ticks compared", compared)
	}
}
