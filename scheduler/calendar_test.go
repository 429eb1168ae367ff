package scheduler

import (
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
		// the last day of March 2024 is Berlin's spring-forward day: 02:30
		// does not exist and runs at the jump (03:00 CEST), as for any
		// fixed-time spec
		{"30 2 L * *", berlin, "2024-03-30 00:00", []string{"2024-03-31 03:00", "2024-04-30 02:30"}},
	} {
		s, err := ParseSchedule(tc.spec, tc.loc)
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
		"0 0 * * 8#2":  `"8" is no weekday`,
		"0 0 * * 1#6":  "1 to 5",
		"0 0 * * L":    "needs a weekday before it",
		"0 0 LW * *":   `day of month "LW"`,
		"0 0 L,40 * *": "out of 1-31",
		"0 0 5-1 * 1L": "must go up",
	} {
		_, err := ParseSchedule(spec, utc)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "scheduler: schedule ") {
			t.Errorf("%q: %v, want an error naming %q", spec, err, want)
		}
	}
}
