package schedule

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorhill/cronexpr"
	"github.com/robfig/cron/v3"
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustParse(t testing.TB, spec string, loc *time.Location) Schedule {
	t.Helper()
	s, err := Parse(spec, loc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// day returns midnight starting the given date in loc.
func day(t testing.TB, date string, loc *time.Location) time.Time {
	t.Helper()
	d, err := time.ParseInLocation(time.DateOnly, date, loc)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// dayTicks returns the ticks of spec in loc during the local day date.
func dayTicks(t testing.TB, spec, zone, date string) []time.Time {
	t.Helper()
	loc := mustLoad(t, zone)
	start := day(t, date, loc)
	end := day(t, start.AddDate(0, 0, 1).Format(time.DateOnly), loc)
	return Ticks(mustParse(t, spec, loc), start.Add(-time.Nanosecond), end.Add(-time.Nanosecond), 10000)
}

func format(ts []time.Time) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.Format(time.RFC3339)
	}
	return strings.Join(s, " ")
}

func TestParseScheduleRejects(t *testing.T) {
	for _, tc := range []struct {
		spec, want string
	}{
		{"", "empty spec"},
		{"   ", "empty spec"},
		{"* * * *", "4 fields: expected 5"},
		{"0 * * * * * *", "7 fields: expected 5"},
		{"CRON_TZ=Europe/Berlin 0 3 * * *", "CRON_TZ= or TZ= prefix"},
		{"TZ=UTC 0 3 * * *", "CRON_TZ= or TZ= prefix"},
		{"@every 0s", "not a whole number of seconds of at least 1s"},
		{"@every 1500ms", "interval 1.5s is not a whole number of seconds"},
		{"@every 500ms", "not a whole number of seconds of at least 1s"},
		{"@every -5s", "not a whole number of seconds of at least 1s"},
		{"@every", "@every: time: invalid duration"},
		{"@every five", "@every: time: invalid duration"},
		{"@fortnightly", `unknown descriptor "@fortnightly"`},
		{"@everyday", `unknown descriptor "@everyday"`},
		{"61 * * * *", `minute "61": expected 0-59`},
		{"0 0 30 2 *", "never fires"},
		{"0 0 31 4,6,9,11 *", "never fires"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			_, err := Parse(tc.spec, time.UTC)
			if err == nil {
				t.Fatal("accepted")
			}
			prefix := fmt.Sprintf("schedule: %q: ", tc.spec)
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want prefix %q and %q", err, prefix, tc.want)
			}
		})
	}
}

func TestEveryAlignedToEpoch(t *testing.T) {
	s := mustParse(t, "@every 7s", nil)
	// Two replicas started at different instants agree on the ticks.
	a := Ticks(s, time.Date(2026, 5, 1, 10, 0, 0, 123, time.UTC), time.Date(2026, 5, 1, 10, 2, 0, 0, time.UTC), 100)
	b := Ticks(s, time.Date(2026, 5, 1, 9, 59, 58, 0, time.UTC), time.Date(2026, 5, 1, 10, 2, 0, 0, time.UTC), 100)
	if len(a) == 0 || format(a) != format(b[len(b)-len(a):]) {
		t.Fatalf("replicas disagree:\n%s\n%s", format(a), format(b))
	}
	for _, tick := range b {
		if tick.Unix()%7 != 0 || tick.Nanosecond() != 0 {
			t.Fatalf("tick %v is not a multiple of 7s since the epoch", tick)
		}
	}
	for _, tc := range []struct {
		spec  string
		after time.Time
		want  time.Time
	}{
		{"@every 7s", time.Unix(700, 0), time.Unix(707, 0)}, // strictly after
		{"@every 7s", time.Unix(700, 1), time.Unix(707, 0)},
		{"@every 7s", time.Unix(699, 999999999), time.Unix(700, 0)},
		{"@every 7s", time.Unix(-1, 0), time.Unix(0, 0)},
		{"@every 7s", time.Unix(-8, 5), time.Unix(-7, 0)},
		{"@every 7s", time.Unix(-7, 0), time.Unix(0, 0)},
		{"@every 1m", time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC), time.Date(2026, 5, 1, 10, 1, 0, 0, time.UTC)},
		{"@every 1m", time.Date(2026, 5, 1, 10, 0, 31, 0, time.UTC), time.Date(2026, 5, 1, 10, 1, 0, 0, time.UTC)},
		{"  @every\t1h30m ", time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC), time.Date(2026, 5, 1, 10, 30, 0, 0, time.UTC)},
	} {
		if got := mustParse(t, tc.spec, nil).Next(tc.after); !got.Equal(tc.want) {
			t.Errorf("%s Next(%v) = %v, want %v", tc.spec, tc.after.UTC(), got.UTC(), tc.want.UTC())
		}
	}
}

func TestEveryIgnoresZone(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	after := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC) // spans the Berlin jump
	until := after.Add(6 * time.Hour)
	utc := Ticks(mustParse(t, "@every 1h", time.UTC), after, until, 100)
	local := Ticks(mustParse(t, "@every 1h", berlin), after, until, 100)
	if len(utc) != 6 || len(local) != 6 {
		t.Fatalf("got %d and %d ticks, want 6", len(utc), len(local))
	}
	for i := range utc {
		if !utc[i].Equal(local[i]) || local[i].Location() != berlin {
			t.Fatalf("tick %d: %v (UTC) vs %v (Berlin)", i, utc[i], local[i])
		}
	}
}

func TestScheduleTicks(t *testing.T) {
	for _, tc := range []struct {
		name, spec, zone, from string
		n                      int
		want                   string
	}{
		{"every minute", "* * * * *", "UTC", "2026-05-01T10:00:30Z", 3,
			"2026-05-01T10:01:00Z 2026-05-01T10:02:00Z 2026-05-01T10:03:00Z"},
		{"seconds field", "*/20 30 10 * * *", "UTC", "2026-05-01T10:00:00Z", 4,
			"2026-05-01T10:30:00Z 2026-05-01T10:30:20Z 2026-05-01T10:30:40Z 2026-05-02T10:30:00Z"},
		{"seconds list", "5,10 0 0 * * *", "UTC", "2026-05-01T00:00:05Z", 2,
			"2026-05-01T00:00:10Z 2026-05-02T00:00:05Z"},
		{"@yearly", "@yearly", "UTC", "2026-05-01T00:00:00Z", 2,
			"2027-01-01T00:00:00Z 2028-01-01T00:00:00Z"},
		{"@annually", "@annually", "UTC", "2026-05-01T00:00:00Z", 1, "2027-01-01T00:00:00Z"},
		{"@monthly", "@monthly", "UTC", "2026-05-01T00:00:00Z", 2,
			"2026-06-01T00:00:00Z 2026-07-01T00:00:00Z"},
		{"@weekly", "@weekly", "UTC", "2026-05-01T00:00:00Z", 2, // Sundays
			"2026-05-03T00:00:00Z 2026-05-10T00:00:00Z"},
		{"@daily", "@daily", "UTC", "2026-05-01T00:00:00Z", 2,
			"2026-05-02T00:00:00Z 2026-05-03T00:00:00Z"},
		{"@midnight", "@midnight", "UTC", "2026-05-01T00:00:00Z", 1, "2026-05-02T00:00:00Z"},
		{"@hourly", "@hourly", "UTC", "2026-05-01T00:10:00Z", 2,
			"2026-05-01T01:00:00Z 2026-05-01T02:00:00Z"},
		{"names", "0 9 * JAN,JUL MON-FRI", "UTC", "2026-05-01T00:00:00Z", 2,
			"2026-07-01T09:00:00Z 2026-07-02T09:00:00Z"},
		{"dom or dow", "0 0 13 * 5", "UTC", "2026-05-01T00:00:00Z", 3, // 13th or Friday
			"2026-05-08T00:00:00Z 2026-05-13T00:00:00Z 2026-05-15T00:00:00Z"},
		{"29 February", "0 0 29 2 *", "UTC", "2026-05-01T00:00:00Z", 2,
			"2028-02-29T00:00:00Z 2032-02-29T00:00:00Z"},
		{"29 February over 2100", "0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z", 1,
			"2104-02-29T00:00:00Z"},
		{"29 February over 2100 wildcard", "*/30 * 29 2 *", "UTC", "2096-03-01T00:00:00Z", 1,
			"2104-02-29T00:00:00Z"},
		{"Tokyo", "0 9 * * *", "Asia/Tokyo", "2026-04-30T12:00:00Z", 2,
			"2026-05-01T09:00:00+09:00 2026-05-02T09:00:00+09:00"},
		{"Kolkata", "30 8 * * *", "Asia/Kolkata", "2026-05-01T00:00:00Z", 1,
			"2026-05-01T08:30:00+05:30"},
		{"New York", "0 9 * * MON", "America/New_York", "2026-05-01T00:00:00Z", 1,
			"2026-05-04T09:00:00-04:00"},
		{"New York winter", "0 9 * * MON", "America/New_York", "2026-12-01T00:00:00Z", 1,
			"2026-12-07T09:00:00-05:00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loc := mustLoad(t, tc.zone)
			from, err := time.Parse(time.RFC3339, tc.from)
			if err != nil {
				t.Fatal(err)
			}
			got := Ticks(mustParse(t, tc.spec, loc), from, from.AddDate(20, 0, 0), tc.n)
			if format(got) != tc.want {
				t.Fatalf("%q from %s:\n got %s\nwant %s", tc.spec, tc.from, format(got), tc.want)
			}
			for _, tick := range got {
				if tick.Location() != loc {
					t.Fatalf("tick %v not in %v", tick, loc)
				}
			}
		})
	}
}

// TestDST pins the ticks on transition days: Europe/Berlin springs forward on
// 2026-03-29 (02:00 CET -> 03:00 CEST) and falls back on 2026-10-25 (03:00
// CEST -> 02:00 CET); America/New_York on 2026-03-08 (02:00 EST -> 03:00 EDT)
// and 2026-11-01 (02:00 EDT -> 01:00 EST).
func TestDST(t *testing.T) {
	for _, tc := range []struct {
		name, spec, zone, date, want string
	}{
		// Fixed-time specs: a skipped tick runs at the jump, a repeated one once.
		{"Berlin spring 02:30 jumps", "30 2 * * *", "Europe/Berlin", "2026-03-29", "2026-03-29T03:00:00+02:00"},
		{"Berlin spring 02:00 jumps", "0 2 * * *", "Europe/Berlin", "2026-03-29", "2026-03-29T03:00:00+02:00"},
		{"Berlin spring 03:00 real", "0 3 * * *", "Europe/Berlin", "2026-03-29", "2026-03-29T03:00:00+02:00"},
		{"Berlin spring jumped and real merge", "0,30 2,3 * * *", "Europe/Berlin", "2026-03-29",
			"2026-03-29T03:00:00+02:00 2026-03-29T03:30:00+02:00"},
		{"Berlin spring list", "30 2,3 * * *", "Europe/Berlin", "2026-03-29",
			"2026-03-29T03:00:00+02:00 2026-03-29T03:30:00+02:00"},
		{"Berlin spring before gap", "59 1 * * *", "Europe/Berlin", "2026-03-29", "2026-03-29T01:59:00+01:00"},
		{"Berlin spring seconds", "59 59 2 * * *", "Europe/Berlin", "2026-03-29", "2026-03-29T03:00:00+02:00"},
		{"Berlin spring @daily", "@daily", "Europe/Berlin", "2026-03-29", "2026-03-29T00:00:00+01:00"},
		{"Berlin fall 02:30 once", "30 2 * * *", "Europe/Berlin", "2026-10-25", "2026-10-25T02:30:00+02:00"},
		{"Berlin fall 02:00,03:00", "0 2,3 * * *", "Europe/Berlin", "2026-10-25",
			"2026-10-25T02:00:00+02:00 2026-10-25T03:00:00+01:00"},
		{"New York spring 02:30 jumps", "30 2 * * *", "America/New_York", "2026-03-08", "2026-03-08T03:00:00-04:00"},
		{"New York fall 02:30", "30 2 * * *", "America/New_York", "2026-11-01", "2026-11-01T02:30:00-05:00"},
		{"New York fall 01:30 once", "30 1 * * *", "America/New_York", "2026-11-01", "2026-11-01T01:30:00-04:00"},
		{"New York fall 01:00,01:59", "0,59 1 * * *", "America/New_York", "2026-11-01",
			"2026-11-01T01:00:00-04:00 2026-11-01T01:59:00-04:00"},
		// Wildcard specs follow absolute time.
		{"Berlin spring half-hourly at 02", "*/30 2 * * *", "Europe/Berlin", "2026-03-29", ""},
		{"Berlin fall half-hourly at 02", "*/30 2 * * *", "Europe/Berlin", "2026-10-25",
			"2026-10-25T02:00:00+02:00 2026-10-25T02:30:00+02:00 2026-10-25T02:00:00+01:00 2026-10-25T02:30:00+01:00"},
		{"Berlin spring hours 1-3", "0 1-3 * * *", "Europe/Berlin", "2026-03-29",
			"2026-03-29T01:00:00+01:00 2026-03-29T03:00:00+02:00"},
		{"New York fall hourly at 01", "0 0-2 * * *", "America/New_York", "2026-11-01",
			"2026-11-01T00:00:00-04:00 2026-11-01T01:00:00-04:00 2026-11-01T01:00:00-05:00 2026-11-01T02:00:00-05:00"},
		{"New York spring hourly", "0 * * * *", "America/New_York", "2026-03-08",
			"2026-03-08T00:00:00-05:00 2026-03-08T01:00:00-05:00 2026-03-08T03:00:00-04:00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := dayTicks(t, tc.spec, tc.zone, tc.date)
			if tc.spec == "0 * * * *" {
				got = got[:3]
			}
			if format(got) != tc.want {
				t.Fatalf("%q in %s on %s:\n got %s\nwant %s", tc.spec, tc.zone, tc.date, format(got), tc.want)
			}
		})
	}
}

func TestDSTTickCounts(t *testing.T) {
	for _, tc := range []struct {
		spec, zone, date string
		want             int
	}{
		{"*/30 * * * *", "Europe/Berlin", "2026-03-29", 46},
		{"*/30 * * * *", "Europe/Berlin", "2026-10-25", 50},
		{"*/15 * * * *", "Europe/Berlin", "2026-03-29", 92},
		{"*/30 * * * *", "America/New_York", "2026-03-08", 46},
		{"*/30 * * * *", "America/New_York", "2026-11-01", 50},
		{"0 * * * *", "Europe/Berlin", "2026-03-29", 23},
		{"0 * * * *", "Europe/Berlin", "2026-10-25", 25},
		{"@hourly", "America/New_York", "2026-11-01", 25},
		{"0 * * * *", "America/New_York", "2026-03-08", 23},
		{"*/30 * * * *", "Europe/Berlin", "2026-05-01", 48},
		{"0 0,12 * * *", "Europe/Berlin", "2026-10-25", 2},
		{"30 2 * * *", "Europe/Berlin", "2026-05-01", 1},
	} {
		if got := len(dayTicks(t, tc.spec, tc.zone, tc.date)); got != tc.want {
			t.Errorf("%q in %s on %s: %d ticks, want %d", tc.spec, tc.zone, tc.date, got, tc.want)
		}
	}
}

// TestDSTStepsThroughRepeatedHour checks Next from every instant of a
// fall-back hour, not only from the start of the day.
func TestDSTStepsThroughRepeatedHour(t *testing.T) {
	ny := mustLoad(t, "America/New_York")
	s := mustParse(t, "30 1 * * *", ny)
	first := time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC) // 01:30 EDT
	next := time.Date(2026, 11, 2, 6, 30, 0, 0, time.UTC)  // 01:30 EST the next day
	for after := first.Add(-30 * time.Minute); after.Before(first.Add(3 * time.Hour)); after = after.Add(time.Minute) {
		want := first
		if !after.Before(first) {
			want = next
		}
		if got := s.Next(after); !got.Equal(want) {
			t.Fatalf("Next(%v) = %v, want %v", after.In(ny), got, want.In(ny))
		}
	}
}

// TestRobfigDSTBehavior records what robfig/cron v3 alone does on transition
// days, which is what the wrapper corrects (documented in the README).
func TestRobfigDSTBehavior(t *testing.T) {
	for _, tc := range []struct {
		spec, zone, date, want string
	}{
		{"30 2 * * *", "Europe/Berlin", "2026-03-29", ""}, // skipped
		{"30 2 * * *", "America/New_York", "2026-03-08", ""},
		{"30 2 * * *", "Europe/Berlin", "2026-10-25", "2026-10-25T02:30:00+02:00 2026-10-25T02:30:00+01:00"}, // twice
		{"30 1 * * *", "America/New_York", "2026-11-01", "2026-11-01T01:30:00-04:00 2026-11-01T01:30:00-05:00"},
	} {
		loc := mustLoad(t, tc.zone)
		raw, err := parser.Parse(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		raw.(*cron.SpecSchedule).Location = loc
		start := day(t, tc.date, loc)
		got := Ticks(raw, start, start.Add(24*time.Hour), 10)
		if format(got) != tc.want {
			t.Errorf("robfig %q in %s on %s:\n got %s\nwant %s", tc.spec, tc.zone, tc.date, format(got), tc.want)
		}
	}
}

// specMatches reports whether the wall time w (fields read in UTC) matches s.
func specMatches(s *cron.SpecSchedule, w time.Time) bool {
	bit := func(field uint64, v int) bool { return field&(1<<uint(v)) != 0 }
	if !bit(s.Second, w.Second()) || !bit(s.Minute, w.Minute()) || !bit(s.Hour, w.Hour()) || !bit(s.Month, int(w.Month())) {
		return false
	}
	const star = 1 << 63
	dom, dow := bit(s.Dom, w.Day()), bit(s.Dow, int(w.Weekday()))
	if s.Dom&star != 0 || s.Dow&star != 0 {
		return dom && dow
	}
	return dom || dow
}

// oracleTicks computes the ticks of a minute-granular spec in (start, end] by
// reading the wall clock of every minute. A wildcard spec ticks at each minute
// whose wall time matches. A fixed-time spec ticks at the first minute whose
// wall time reaches a matching wall time not reached before: that is its only
// or first occurrence, or the jump over a gap that skips it.
func oracleTicks(s *cron.SpecSchedule, fixed bool, loc *time.Location, start, end time.Time) []time.Time {
	var ticks []time.Time
	reached := wallOf(start.In(loc))
	for t := start.Add(time.Minute); !t.After(end); t = t.Add(time.Minute) {
		w := wallOf(t.In(loc))
		switch {
		case !fixed:
			if specMatches(s, w) {
				ticks = append(ticks, t.In(loc))
			}
		case w.After(reached):
			for v := reached.Add(time.Minute); !v.After(w); v = v.Add(time.Minute) {
				if specMatches(s, v) {
					ticks = append(ticks, t.In(loc))
					break
				}
			}
			reached = w
		}
	}
	return ticks
}

// TestDSTOracle compares ticks around every transition of a year, in zones
// with unusual rules, with ticks computed by brute force.
func TestDSTOracle(t *testing.T) {
	specs := []string{
		"30 2 * * *", "0 0 * * *", "0,30 0,1,2,3 * * *", "45 23 * * *", "15 1,2 * * SUN", "@daily",
		"*/30 * * * *", "0 * * * *", "*/15 2 * * *", "0 */2 * * *", "0 0-3 * * *", "* 0 * * *", "*/7 1-3 * * *",
	}
	for _, tc := range []struct {
		zone string
		year int
	}{
		{"Europe/Berlin", 2026},
		{"America/New_York", 2026},
		{"Australia/Lord_Howe", 2026}, // 30-minute shifts
		{"America/Santiago", 2026},    // transitions at midnight
		{"America/Havana", 2026},      // midnight skipped and repeated
		{"America/Sao_Paulo", 2018},   // midnight skipped
		{"Africa/Casablanca", 2026},   // DST suspended for Ramadan
		{"Antarctica/Troll", 2026},    // 2-hour shifts
		{"Pacific/Apia", 2011},        // a whole day skipped
		{"Asia/Tokyo", 2026},          // no transitions
	} {
		loc := mustLoad(t, tc.zone)
		// The transitions of the year, plus one ordinary instant.
		points := []time.Time{time.Date(tc.year, 6, 15, 12, 0, 0, 0, loc)}
		for t := time.Date(tc.year, 1, 1, 0, 0, 0, 0, loc); t.Year() == tc.year; {
			_, end := t.ZoneBounds()
			if end.IsZero() {
				break
			}
			if end.Year() == tc.year {
				points = append(points, end)
			}
			t = end
		}
		for _, spec := range specs {
			raw, err := parser.Parse(spec)
			if err != nil {
				t.Fatal(err)
			}
			s := mustParse(t, spec, loc)
			_, fixed := s.(*fixedSchedule)
			for _, p := range points {
				start, end := p.Add(-30*time.Hour).Truncate(time.Hour), p.Add(30*time.Hour)
				want := oracleTicks(raw.(*cron.SpecSchedule), fixed, loc, start, end)
				got := Ticks(s, start, end, 10000)
				if format(got) != format(want) {
					t.Errorf("%q in %s around %v:\n only got: %s\nonly want: %s", spec, tc.zone, p, format(minus(got, want)), format(minus(want, got)))
				}
			}
		}
	}
}

// minus returns the times of a that are not in b.
func minus(a, b []time.Time) []time.Time {
	var out []time.Time
	for _, t := range a {
		if !slices.ContainsFunc(b, t.Equal) {
			out = append(out, t)
		}
	}
	return out
}

func TestFixedTime(t *testing.T) {
	for spec, want := range map[string]bool{
		"30 2 * * *":      true,
		"0 0,12 * * *":    true,
		"0 30 2 * * *":    true,
		"0,30 2,3 1 * *":  true,
		"@daily":          true,
		"@midnight":       true,
		"@weekly":         true,
		"@monthly":        true,
		"@yearly":         true,
		"@annually":       true,
		"@hourly":         false,
		"* 30 2 * * *":    false,
		"*/15 * * * *":    false,
		"0 * * * *":       false,
		"0 ? * * *":       false,
		"0 1-3 * * *":     false,
		"0 1,3-4 * * *":   false,
		"0-30/10 2 * * *": false,
	} {
		s := mustParse(t, spec, time.UTC)
		if _, got := s.(*fixedSchedule); got != want {
			t.Errorf("%q fixed-time = %v, want %v", spec, got, want)
		}
	}
}

func TestTicksBounds(t *testing.T) {
	s := mustParse(t, "@every 10s", nil)
	after := time.Unix(100, 0)
	if got := Ticks(s, after, time.Unix(130, 0), 10); format(got) != format([]time.Time{time.Unix(110, 0).UTC(), time.Unix(120, 0).UTC(), time.Unix(130, 0).UTC()}) {
		t.Fatalf("(100, 130] = %s", format(got))
	}
	if got := Ticks(s, after, time.Unix(1000, 0), 2); len(got) != 2 {
		t.Fatalf("max 2: %d ticks", len(got))
	}
	if got := Ticks(s, after, after, 10); len(got) != 0 {
		t.Fatalf("empty interval: %s", format(got))
	}
	never := Func(func(time.Time) time.Time { return time.Time{} })
	if got := Ticks(never, after, time.Unix(1000, 0), 10); len(got) != 0 {
		t.Fatalf("never: %s", format(got))
	}
}

func TestShortestInterval(t *testing.T) {
	from := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		spec string
		want time.Duration
	}{
		{"@every 7s", 7 * time.Second},
		{"*/15 * * * *", 15 * time.Minute},
		{"0 0,12 * * *", 12 * time.Hour},
		{"0 9,17 * * *", 8 * time.Hour},
		{"@daily", 24 * time.Hour},
		{"@weekly", 7 * 24 * time.Hour},
		{"@monthly", 28 * 24 * time.Hour},
		{"*/20 * * * * *", 20 * time.Second},
	} {
		if got := ShortestInterval(mustParse(t, tc.spec, time.UTC), from); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.spec, got, tc.want)
		}
	}
	once := Func(func(after time.Time) time.Time {
		if after.Before(from) {
			return from
		}
		return time.Time{}
	})
	if got := ShortestInterval(once, from.Add(-time.Hour)); got != 0 {
		t.Errorf("single tick: %v, want 0", got)
	}
}

func TestJitter(t *testing.T) {
	const max = 30 * time.Second
	seen := map[time.Duration]bool{}
	for i := range 1000 {
		job := fmt.Sprintf("job-%d", i)
		j := Jitter(job, max)
		if j < 0 || j >= max {
			t.Fatalf("Jitter(%q) = %v, out of [0, %v)", job, j, max)
		}
		if Jitter(job, max) != j {
			t.Fatalf("Jitter(%q) not stable", job)
		}
		seen[j] = true
	}
	if len(seen) < 990 {
		t.Errorf("only %d distinct offsets for 1000 jobs", len(seen))
	}
	// FNV-1a 64 of "backup" is fixed, so the offset is the same on every
	// replica and every release.
	if got, want := Jitter("backup", time.Hour), time.Duration(0x8f75c61dfd19093f%uint64(time.Hour)); got != want {
		t.Errorf("Jitter(backup, 1h) = %v, want %v", got, want)
	}
	for _, m := range []time.Duration{0, -time.Second} {
		if got := Jitter("backup", m); got != 0 {
			t.Errorf("Jitter(backup, %v) = %v, want 0", m, got)
		}
	}
	if got := Jitter("backup", time.Nanosecond); got != 0 {
		t.Errorf("Jitter(backup, 1ns) = %v, want 0", got)
	}
}

func ExampleParse() {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	s, _ := Parse("30 2 * * *", berlin)
	// 2026-03-29: the clocks jump from 02:00 to 03:00, so 02:30 runs at the jump.
	fmt.Println(s.Next(time.Date(2026, 3, 28, 12, 0, 0, 0, berlin)))
	// 2026-10-25: 02:30 happens twice; the job runs once.
	for _, t := range Ticks(s, time.Date(2026, 10, 25, 0, 0, 0, 0, berlin), time.Date(2026, 10, 25, 12, 0, 0, 0, berlin), 10) {
		fmt.Println(t)
	}
	// Output:
	// 2026-03-29 03:00:00 +0200 CEST
	// 2026-10-25 02:30:00 +0200 CEST
}

func TestNilLocationIsUTC(t *testing.T) {
	got := mustParse(t, "0 9 * * *", nil).Next(epoch)
	if want := time.Date(2026, 5, 2, 9, 0, 0, 0, time.UTC); !got.Equal(want) || got.Location() != time.UTC {
		t.Fatalf("Next = %v, want %v", got, want)
	}
}

var epoch = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// randomSpec builds a cron spec from the syntax baton and gorhill/cronexpr
// both read alike: numbers, lists, ranges and steps in every field, L and
// steps in the day of month, D#N, DL and 7 (Sunday) in the day of week.
// It leaves out what they read differently: "*/1" in a day field
// (unrestricted for robfig/cron and baton, restricted for cronexpr), a
// weekday range ending in 7 (empty for cronexpr) and steps above a field's
// maximum (refused by cronexpr).
func randomSpec(r *rand.Rand) string {
	num := func(lo, hi int) int { return lo + r.IntN(hi-lo+1) }
	part := func(lo, hi int) string {
		a := num(lo, hi)
		b := num(a, hi)
		switch r.IntN(6) {
		case 0:
			return fmt.Sprintf("%d-%d", a, b)
		case 1:
			return fmt.Sprintf("%d-%d/%d", a, b, num(2, 5))
		case 2:
			return fmt.Sprintf("%d/%d", a, num(2, min(7, hi)))
		case 3:
			return fmt.Sprintf("*/%d", num(2, 6))
		default:
			return strconv.Itoa(a)
		}
	}
	list := func(lo, hi int, extra func() string) string {
		if r.IntN(4) == 0 {
			return "*"
		}
		parts := make([]string, 1+r.IntN(3))
		for i := range parts {
			if extra != nil && r.IntN(3) == 0 {
				parts[i] = extra()
			} else {
				parts[i] = part(lo, hi)
			}
		}
		return strings.Join(parts, ",")
	}
	fields := []string{
		list(0, 59, nil),
		list(0, 23, nil),
		list(1, 31, func() string { return "L" }),
		list(1, 12, nil),
		list(0, 6, func() string {
			switch r.IntN(3) {
			case 0:
				return fmt.Sprintf("%dL", num(0, 7))
			case 1:
				return fmt.Sprintf("%d#%d", num(0, 7), num(1, 5))
			}
			return "7"
		}),
	}
	if r.IntN(5) == 0 { // a seconds field
		fields = append([]string{list(0, 59, nil)}, fields...)
	}
	return strings.Join(fields, " ")
}

// Baton's ticks agree with an independent implementation, gorhill/cronexpr,
// over random specs with L, D#N, DL, 7, lists, ranges and steps, in zones
// without daylight saving time (where baton's DST rules do not apply), from
// instants in 2024 to 2040. Both read the day fields as Vixie cron does: with
// both restricted, a day matching either runs.
func TestScheduleAgreesWithCronexpr(t *testing.T) {
	zones := []*time.Location{time.UTC, mustLoad(t, "Asia/Tokyo"), mustLoad(t, "Asia/Kolkata"), mustLoad(t, "Asia/Kathmandu"), mustLoad(t, "America/Bogota")}
	r := rand.New(rand.NewPCG(22, 2040))
	from := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	until := time.Date(2041, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	// cronexpr searches up to 2099 only
	cronexprEnd := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	const specs, ticks = 1500, 6
	compared := 0
	for range specs {
		spec := randomSpec(r)
		loc := zones[r.IntN(len(zones))]
		start := time.Unix(from+r.Int64N(until-from), 0).In(loc)
		s, err := Parse(spec, loc)
		if err != nil {
			if strings.Contains(err.Error(), "never fires") {
				continue // "0 0 31 2 *": cronexpr has no answer either
			}
			t.Fatalf("%q: %v", spec, err)
		}
		other := spec
		if len(strings.Fields(spec)) == 6 {
			other += " *" // cronexpr reads 7 fields as seconds ... year
		}
		expr, err := cronexpr.Parse(other)
		if err != nil {
			t.Fatalf("cronexpr refuses %q: %v", other, err)
		}
		got, want := start, start
		for i := range ticks {
			got, want = s.Next(got), expr.Next(want)
			if want.IsZero() && got.After(cronexprEnd) {
				break
			}
			if !got.Equal(want) {
				t.Fatalf("%q in %s from %s: tick %d is %s, cronexpr says %s", spec, loc, start.Format(time.RFC3339), i, got.Format(time.RFC3339), want.Format(time.RFC3339))
			}
			compared++
		}
	}
	t.Logf("%d specs, %d ticks compared", specs, compared)
}

// A spec robfig/cron refuses is explained in words: the field, what it
// holds, what it takes, and the name probably meant.
func TestBadSpecSaysWhatIsWrongInWords(t *testing.T) {
	for spec, want := range map[string]string{
		"0 9 * * Mnday": `day of week "Mnday": expected 0-7 or SUN-SAT`,
		"0 9 * * Mndy":  `(did you mean MON?)`,
		"@evry 5m":      `unknown descriptor "@evry" (did you mean @every?)`,
		"@fortnightly":  `unknown descriptor "@fortnightly": expected one of @yearly`,
		"61 * * * *":    `minute "61": expected 0-59`,
		"0 25 * * *":    `hour "25": expected 0-23`,
		"0 9 * Jnu *":   `month "Jnu": expected 1-12 or JAN-DEC, a range (a-b), a step (*/n) or a list (a,b) (did you mean JUN?)`,
		"*/0 * * * *":   `minute "*/0": step "0": expected a whole number of at least 1`,
		"0 9 * *":       `4 fields: expected 5`,
		"0 9 1-x * *":   `day of month "1-x": "x": expected 1-31, L`,
	} {
		_, err := Parse(spec, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", spec, err, want)
		}
	}
	for _, spec := range []string{"0 0 L * *", "0 0 * * 5L", "0 0 * * 5#3", "0 0 * * 1-Fri", "0 9 * jan,Feb MON-fri"} {
		if _, err := Parse(spec, nil); err != nil {
			t.Errorf("%q: %v", spec, err)
		}
	}
}
