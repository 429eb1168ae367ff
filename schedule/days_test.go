package schedule

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// randomCalendar is a calendar of a few random dates, ranges and perhaps a
// weekday, in 2025-2027.
func randomCalendar(r *rand.Rand) *Calendar {
	c := &Calendar{}
	day := func() time.Time {
		return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, r.IntN(3*365))
	}
	for range r.IntN(20) {
		c.AddDate(day())
	}
	for range r.IntN(4) {
		from := day()
		_ = c.AddRange(from, from.AddDate(0, 0, r.IntN(15)))
	}
	if r.IntN(3) == 0 {
		c.AddWeekday(time.Weekday(r.IntN(7)))
	}
	return c
}

// OnDays keeps exactly the ticks a brute force keeps: each tick of the
// spec whose day in the zone the calendars allow, across zones whose
// clocks change at 02:00, at midnight and by half an hour.
func TestOnDaysAgreesWithABruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 36))
	specs := []string{"0 9 * * *", "30 0 * * *", "0 */6 * * *", "0 0 * * 1-5", "15 2 L * *", "@daily", "0 12 * * 5#2"}
	zones := []string{"UTC", "Europe/Berlin", "America/Santiago", "America/Havana", "Australia/Lord_Howe", "Asia/Beirut"}
	from, to := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 12, 31, 0, 0, 0, 0, time.UTC)
	for i := range 120 {
		loc, _ := time.LoadLocation(zones[i%len(zones)])
		spec := specs[i%len(specs)]
		inner, err := Parse(spec, loc)
		if err != nil {
			t.Fatal(err)
		}
		days := Days{Exclude: []*Calendar{randomCalendar(r)}}
		if i%2 == 0 {
			only := randomCalendar(r)
			only.AddWeekday(time.Weekday(r.IntN(7))) // some days allowed
			days.Only = []*Calendar{only}
		}
		got := Ticks(OnDays(inner, loc, days), from, to, 5000)
		var want []time.Time
		for _, tk := range Ticks(inner, from, to, 5000) {
			if days.Allows(tk.In(loc)) {
				want = append(want, tk)
			}
		}
		if !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Fatalf("%s in %s (case %d): %d ticks, the brute force %d", spec, loc, i, len(got), len(want))
		}
	}
}

func TestCalendarDays(t *testing.T) {
	c := &Calendar{}
	c.AddDate(time.Date(2026, 12, 25, 0, 0, 0, 0, time.UTC))
	if err := c.AddRange(time.Date(2026, 12, 30, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	c.AddWeekday(time.Sunday)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for _, tc := range []struct {
		t    time.Time
		want bool
	}{
		{time.Date(2026, 12, 25, 23, 30, 0, 0, berlin), true}, // the 24th 22:30 UTC: read in the job's zone
		{time.Date(2026, 12, 24, 23, 30, 0, 0, time.UTC), false},
		{time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC), true},
		{time.Date(2027, 1, 2, 23, 59, 0, 0, time.UTC), true},
		{time.Date(2027, 1, 3, 0, 0, 0, 0, time.UTC), true}, // a Sunday
		{time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC), false},
	} {
		if got := c.Contains(tc.t); got != tc.want {
			t.Errorf("Contains(%s) = %v, want %v", tc.t, got, tc.want)
		}
	}
	if err := c.AddRange(time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil {
		t.Error("a range ending before it starts accepted")
	}
	// nothing allowed: no tick, not a loop
	s := OnDays(Func(func(after time.Time) time.Time { return after.Add(time.Hour).Truncate(time.Hour) }), time.UTC,
		Days{Only: []*Calendar{{}}})
	if got := s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); !got.IsZero() {
		t.Errorf("a calendar of no day lets %s through", got)
	}
}

// A day whose midnight its zone's clocks show twice (Amman, 29 October
// 2021: 01:00 +03 back to 00:00 +02) keeps its ticks of the first copy of
// that hour when the day before is excluded: OnDays goes on from the day's
// start, and that start is the first midnight, not the second.
func TestOnDaysKeepsTheTicksOfARepeatedMidnightAfterAnExcludedDay(t *testing.T) {
	amman, err := time.LoadLocation("Asia/Amman")
	if err != nil {
		t.Fatal(err)
	}
	thursday := &Calendar{}
	thursday.AddDate(time.Date(2021, 10, 28, 0, 0, 0, 0, time.UTC))
	for _, spec := range []string{"30 0 * * *", "*/20 0 * * *"} {
		for _, dst := range []DST{DSTVixie, DSTOnce, DSTBoth, DSTSkip} {
			inner, err := ParseDST(spec, amman, dst)
			if err != nil {
				t.Fatal(err)
			}
			days := Days{Exclude: []*Calendar{thursday}}
			from, to := time.Date(2021, 10, 27, 0, 0, 0, 0, amman), time.Date(2021, 10, 31, 0, 0, 0, 0, amman)
			got := Ticks(OnDays(inner, amman, days), from, to, 100)
			var want []time.Time
			for _, tk := range Ticks(inner, from, to, 100) {
				if days.Allows(tk.In(amman)) {
					want = append(want, tk)
				}
			}
			if !slices.EqualFunc(got, want, time.Time.Equal) {
				t.Errorf("%q dst %s in Amman, 28 October 2021 excluded:\n got  %v\n want %v", spec, dst, got, want)
			}
		}
	}
	// the calendar days of a spec meet the same midnight (5#5: the fifth
	// Friday, 29 October 2021)
	s, err := Parse("30 0 * * 5#5", amman)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(time.Date(2021, 10, 27, 0, 0, 0, 0, amman)); got.In(amman).Day() != 29 || got.Month() != time.October {
		t.Errorf("the fifth Friday of October 2021 in Amman: next %s, want the 29th", got.In(amman))
	}
}
