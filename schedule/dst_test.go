package schedule

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// dstZones are zones with transitions of every kind: whole hours at 02:00
// (Berlin, New York), half an hour (Lord Howe), at midnight (Santiago,
// Havana, Beirut), and a whole skipped day (Apia, December 2011).
var dstZones = []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "America/Havana", "Asia/Beirut", "Pacific/Apia"}

// dstSpecs are fixed-time and wildcard specs that meet the transitions.
var dstSpecs = []string{"30 2 * * *", "0 2 * * *", "15,45 1,2 * * *", "0 0 * * *", "30 0 * * *", "*/15 * * * *", "0 * * * *", "45 * * * *", "0 0-3 * * *", "59 23 * * *", "0 12 * * *"}

// dstOracle computes, minute by minute, the ticks of spec in (from, to]
// under dst: each wall time the spec names (read with robfig/cron in UTC)
// has the instants whose wall clock in loc shows it; none (a skipped
// time: its jump is the first instant after it), one, or two (repeated).
func dstOracle(t *testing.T, spec string, loc *time.Location, dst DST, from, to time.Time) []time.Time {
	t.Helper()
	wall, err := parser.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	occ := map[time.Time][]time.Time{} // wall time -> instants, in order
	start, end := from.Add(-26*time.Hour).Truncate(time.Minute), to.Add(26*time.Hour)
	var instants []time.Time
	for i := start; !i.After(end); i = i.Add(time.Minute) {
		instants = append(instants, i)
		w := wallOf(i.In(loc))
		occ[w] = append(occ[w], i)
	}
	fixed := isFixedTime(spec)
	var out []time.Time
	add := func(i time.Time) {
		if i.After(from) && !i.After(to) && !slices.ContainsFunc(out, i.Equal) {
			out = append(out, i)
		}
	}
	w0, w1 := wallOf(start.In(loc)).Add(2*time.Hour), wallOf(end.In(loc)).Add(-2*time.Hour)
	// each wall time the spec names, in order (robfig/cron steps the wall
	// clock as UTC, where no minute is skipped or repeated; zero: none in
	// five years)
	for w := wall.Next(w0.Add(-time.Second)); !w.IsZero() && !w.After(w1); w = wall.Next(w) {
		is := occ[w]
		switch {
		case len(is) == 0: // skipped: at the jump, or not at all
			if dst == DSTSkip || dst == DSTVixie && !fixed {
				continue
			}
			for _, i := range instants {
				if wallOf(i.In(loc)).After(w) {
					add(i)
					break
				}
			}
		case len(is) == 1:
			add(is[0])
		default: // repeated: once, or every copy
			add(is[0])
			if dst == DSTBoth || dst == DSTVixie && !fixed {
				for _, i := range is[1:] {
					add(i)
				}
			}
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// Every policy yields, on the transition days of zones of every kind, the
// ticks a minute-by-minute oracle finds for it.
func TestDSTPoliciesAgreeWithAnOracleOnTransitionDays(t *testing.T) {
	for _, zone := range dstZones {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		// the transitions of 2011 (Apia's skipped day) and 2026
		var days []time.Time
		for _, y := range []int{2011, 2026} {
			for i := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC); i.Year() == y; {
				_, end := i.In(loc).ZoneBounds()
				if end.IsZero() || end.Year() != y {
					break
				}
				days = append(days, end)
				i = end
			}
		}
		if len(days) == 0 {
			continue
		}
		for _, dst := range []DST{DSTVixie, DSTOnce, DSTSkip, DSTBoth} {
			for _, spec := range dstSpecs {
				s, err := ParseDST(spec, loc, dst)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range days {
					from, to := d.Add(-6*time.Hour), d.Add(6*time.Hour)
					got := Ticks(s, from, to, 1000)
					want := dstOracle(t, spec, loc, dst, from, to)
					if !slices.EqualFunc(got, want, time.Time.Equal) {
						t.Errorf("%s %s dst %s around %s:\n got %v\nwant %v", zone, spec, dst, d.In(loc), fmtTimes(got, loc), fmtTimes(want, loc))
					}
				}
			}
		}
	}
}

func fmtTimes(ts []time.Time, loc *time.Location) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.In(loc).Format("01-02 15:04 MST")
	}
	return out
}

// The policies on Berlin's days, said plainly, from midnight to 03:59 by
// the wall clock: the spring day skips 02:00-03:00, the autumn day
// repeats it.
func TestDSTPoliciesOnBerlinsDays(t *testing.T) {
	loc, _ := time.LoadLocation("Europe/Berlin")
	spring := time.Date(2026, 3, 29, 0, 0, 0, 0, loc)
	autumn := time.Date(2026, 10, 25, 0, 0, 0, 0, loc)
	for _, tc := range []struct {
		spec string
		dst  DST
		day  time.Time
		want string
	}{
		{"30 2 * * *", DSTVixie, spring, "[03:00 CEST]"},
		{"30 2 * * *", DSTOnce, spring, "[03:00 CEST]"},
		{"30 2 * * *", DSTSkip, spring, "[]"},
		{"30 2 * * *", DSTBoth, spring, "[03:00 CEST]"},
		{"30 2 * * *", DSTVixie, autumn, "[02:30 CEST]"},
		{"30 2 * * *", DSTOnce, autumn, "[02:30 CEST]"},
		{"30 2 * * *", DSTSkip, autumn, "[02:30 CEST]"},
		{"30 2 * * *", DSTBoth, autumn, "[02:30 CEST 02:30 CET]"},
		{"30 * * * *", DSTVixie, spring, "[00:30 CET 01:30 CET 03:30 CEST]"},
		{"30 * * * *", DSTOnce, spring, "[00:30 CET 01:30 CET 03:00 CEST 03:30 CEST]"},
		{"30 * * * *", DSTSkip, spring, "[00:30 CET 01:30 CET 03:30 CEST]"},
		{"30 * * * *", DSTVixie, autumn, "[00:30 CEST 01:30 CEST 02:30 CEST 02:30 CET 03:30 CET]"},
		{"30 * * * *", DSTOnce, autumn, "[00:30 CEST 01:30 CEST 02:30 CEST 03:30 CET]"},
		{"30 * * * *", DSTSkip, autumn, "[00:30 CEST 01:30 CEST 02:30 CEST 03:30 CET]"},
		{"30 * * * *", DSTBoth, autumn, "[00:30 CEST 01:30 CEST 02:30 CEST 02:30 CET 03:30 CET]"},
	} {
		s, err := ParseDST(tc.spec, loc, tc.dst)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		y, m, d := tc.day.Date()
		for _, at := range Ticks(s, tc.day.Add(-time.Second), time.Date(y, m, d, 3, 59, 0, 0, loc), 10) {
			got = append(got, at.In(loc).Format("15:04 MST"))
		}
		if g := fmt.Sprint(got); g != tc.want {
			t.Errorf("%q dst %s on %s: %s, want %s", tc.spec, tc.dst, tc.day.Format("2006-01-02"), g, tc.want)
		}
	}
}

func TestParseDSTRefusesWhatItCannotMean(t *testing.T) {
	if _, err := ParseDST("@every 1h", time.UTC, DSTOnce); err == nil {
		t.Error("dst once for @every accepted")
	}
	if _, err := ParseDST("0 2 * * *", time.UTC, DST("twice")); err == nil {
		t.Error("dst twice accepted")
	}
	if _, err := ParseDST("@every 1h", time.UTC, ""); err != nil {
		t.Errorf("@every with the default dst: %v", err)
	}
}
