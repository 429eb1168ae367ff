package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Calendar specs: robfig/cron's parser knows no "last day of the month" or
// "nth weekday", and takes weekdays 0-6 only, so a spec that uses L, # or
// the weekday 7 is split in two. Its day fields go to a calendar filter of
// baton's own; the rest, with both day fields set to "*", goes to
// robfig/cron as any spec does (so times of day, DST and the fixed-time rules
// are the same as for other specs), and Next skips the days the filter
// refuses.
//
// Day of month: "L" the last day, besides numbers 1-31, ranges and steps
// ("1-10/2,15,L"). Day of week: "D#N" the Nth weekday D of the month (1#2:
// the second Monday; N 1..5), "DL" the last weekday D (5L: the last Friday),
// besides numbers 0-7 (0 and 7 Sunday), names SUN-SAT, ranges and steps
// ("1-5/2,0L"). A step applies to a number, a range or "*" ("a/s" runs from a
// to the field's maximum, Saturday in the day of week), never to L, DL or
// D#N.
//
// Days follow robfig/cron's rule, which is Vixie cron's: with both day
// fields restricted a day matches either. A field is unrestricted when one of
// its parts is "*" or "?" without a step above 1 (so "*/2" restricts, as in
// robfig/cron; Vixie cron counts any field starting with "*" as
// unrestricted).

// dayMatcher tells whether a date (its year, month and day read in any zone)
// matches one day field.
type dayMatcher func(d time.Time) bool

// calendarSchedule is a schedule whose days a calendar filter picks.
type calendarSchedule struct {
	inner    Schedule // the spec with "*" in both day fields
	loc      *time.Location
	months   uint64     // bit m set: the inner spec runs in month m
	dom, dow dayMatcher // nil: "*"
}

// calendarHorizonYears bounds how far Next looks for a day the filter takes.
// The sparsest calendar spec that fires, D#5 in February (29 February on
// the weekday D), fires at most 40 years apart (a 28-year cycle broken by
// 2100, which is no leap year: 29 February falls on a Friday in 2188, then
// in 2228).
const calendarHorizonYears = 41

func (s *calendarSchedule) Next(after time.Time) time.Time {
	limit := after.AddDate(calendarHorizonYears, 0, 0)
	for t := after; t.Before(limit); {
		n := s.inner.Next(t)
		if n.IsZero() {
			return n
		}
		local := n.In(s.loc)
		if s.match(local) {
			return n
		}
		// Not this day: go on from the start of the next day that the
		// filter takes, found on the calendar alone.
		day, ok := s.nextDay(local, limit)
		if !ok {
			break
		}
		y, m, d := day.Date()
		// the day's first instant: its midnight's first occurrence when the
		// clocks show it twice (time.Date may give the second)
		t = resolveWall(time.Date(y, m, d, 0, 0, 0, 0, time.UTC), s.loc).Add(-time.Nanosecond)
		if !t.After(n) { // a midnight before n (a fall-back across midnight)
			t = n
		}
	}
	return time.Time{}
}

// nextDay returns the first date after local's that the filter and the
// month field take, as a UTC midnight, if one comes before limit.
func (s *calendarSchedule) nextDay(local, limit time.Time) (time.Time, bool) {
	y, m, d := local.Date()
	end := limit.In(s.loc)
	for day := time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC); !day.After(end); {
		if s.months&(1<<uint(day.Month())) == 0 {
			day = time.Date(day.Year(), day.Month()+1, 1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if s.match(day) {
			return day, true
		}
		day = day.AddDate(0, 0, 1)
	}
	return time.Time{}, false
}

func (s *calendarSchedule) match(d time.Time) bool {
	switch {
	case s.dom != nil && s.dow != nil:
		return s.dom(d) || s.dow(d)
	case s.dom != nil:
		return s.dom(d)
	case s.dow != nil:
		return s.dow(d)
	}
	return true
}

// monthsOf returns the month field of a schedule parsed by robfig/cron.
func monthsOf(s Schedule) uint64 {
	switch s := s.(type) {
	case *fixedSchedule:
		return s.wall.Month
	case *absoluteSchedule:
		return s.wall.Month
	case *dstSchedule:
		return s.wall.Month
	}
	return ^uint64(0)
}

// calendarSpec splits spec when a day field uses L, # or the weekday 7: it
// returns the spec for robfig/cron (day fields "*") and the filter's
// matchers; ok is false for a spec robfig/cron takes as it is.
func calendarSpec(spec string) (inner string, dom, dow dayMatcher, ok bool, err error) {
	f := strings.Fields(spec)
	if len(f) != 5 && len(f) != 6 || strings.HasPrefix(spec, "@") {
		return "", nil, nil, false, nil
	}
	di, wi := len(f)-3, len(f)-1
	if !strings.ContainsAny(strings.ToUpper(f[di]), "L") && !strings.ContainsAny(strings.ToUpper(f[wi]), "L#") && !beyondSaturday(f[wi]) {
		return "", nil, nil, false, nil
	}
	if dom, err = domMatcher(f[di]); err != nil {
		return "", nil, nil, true, fieldErr("day of month", f[di], err)
	}
	if dow, err = dowMatcher(f[wi]); err != nil {
		return "", nil, nil, true, fieldErr("day of week", f[wi], err)
	}
	f[di], f[wi] = "*", "*"
	return strings.Join(f, " "), dom, dow, true, nil
}

// beyondSaturday reports whether a day-of-week field names a number above
// 6 in a value or a range: 7 (Sunday, which robfig/cron refuses) or a number
// baton's own parser should refuse with its range, 0-7.
func beyondSaturday(field string) bool {
	for part := range strings.SplitSeq(field, ",") {
		values, _, _ := strings.Cut(part, "/")
		for v := range strings.SplitSeq(values, "-") {
			if n, err := strconv.Atoi(v); err == nil && n > 6 {
				return true
			}
		}
	}
	return false
}

// fieldErr names the field of err, and the field's text unless err quotes
// all of it already.
func fieldErr(name, field string, err error) error {
	if strings.HasPrefix(err.Error(), strconv.Quote(field)) {
		return fmt.Errorf("%s %w", name, err)
	}
	return fmt.Errorf("%s %q: %w", name, field, err)
}

func lastDay(d time.Time) int {
	y, m, _ := d.Date()
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// domMatcher parses a day-of-month field: "*", "?", numbers 1-31, ranges
// a-b, steps (*/s, a/s, a-b/s) and L, separated by commas. It returns nil for
// an unrestricted field.
func domMatcher(field string) (dayMatcher, error) {
	var days uint64 // bit d: day d
	last := false
	for part := range strings.SplitSeq(field, ",") {
		if strings.EqualFold(part, "L") {
			last = true
			continue
		}
		if up := strings.ToUpper(part); strings.Contains(up, "L") {
			if strings.HasPrefix(up, "L/") {
				return nil, fmt.Errorf("%q: L takes no step (L is one day, the last of the month)", part)
			}
			return nil, fmt.Errorf("%q: L stands alone in day of month (the last day: \"L\"; 15th and last: \"15,L\")", part)
		}
		bits, star, err := valuesOf(part, 1, 31, 31, nil)
		if err != nil {
			return nil, err
		}
		if star {
			return nil, nil
		}
		days |= bits
	}
	return func(d time.Time) bool {
		return days&(1<<uint(d.Day())) != 0 || last && d.Day() == lastDay(d)
	}, nil
}

var weekdays = map[string]int{"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}

// dowMatcher parses a day-of-week field: "*", "?", weekdays 0-7 or SUN-SAT,
// ranges, steps, D#N and DL, separated by commas. It returns nil for an
// unrestricted field.
func dowMatcher(field string) (dayMatcher, error) {
	var days uint64 // bit w: weekday w (0 Sunday)
	var ms []dayMatcher
	for part := range strings.SplitSeq(field, ",") {
		up := strings.ToUpper(part)
		if strings.ContainsAny(up, "#L") && strings.Contains(up, "/") {
			return nil, fmt.Errorf("%q: a step applies to a number, a range or *, not to D#N or DL (list them: \"1#1,1#3\")", part)
		}
		switch {
		case strings.Contains(up, "#"):
			ds, ns, _ := strings.Cut(up, "#")
			wd, err := weekday(ds)
			if err != nil {
				return nil, err
			}
			n, err := strconv.Atoi(ns)
			if err != nil || n < 1 || n > 5 {
				return nil, fmt.Errorf("%q: the week after # must be 1 to 5 (1#2: the second Monday)", part)
			}
			ms = append(ms, func(d time.Time) bool { return int(d.Weekday()) == wd && (d.Day()-1)/7+1 == n })
		case up == "L":
			return nil, fmt.Errorf("%q: L in day of week needs a weekday before it (5L: the last Friday of the month)", part)
		case strings.HasSuffix(up, "L"):
			wd, err := weekday(strings.TrimSuffix(up, "L"))
			if err != nil {
				return nil, err
			}
			ms = append(ms, func(d time.Time) bool { return int(d.Weekday()) == wd && d.Day()+7 > lastDay(d) })
		default:
			bits, star, err := valuesOf(up, 0, 7, 6, weekdays)
			if err != nil {
				return nil, err
			}
			if star {
				return nil, nil
			}
			if bits&(1<<7) != 0 { // 7 is Sunday
				bits |= 1
			}
			days |= bits
		}
	}
	return func(d time.Time) bool {
		if days&(1<<uint(d.Weekday())) != 0 {
			return true
		}
		for _, m := range ms {
			if m(d) {
				return true
			}
		}
		return false
	}, nil
}

// weekday parses 0-7 (7 is Sunday too) or SUN-SAT.
func weekday(s string) (int, error) {
	if n, ok := weekdays[s]; ok {
		return n, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 7 {
		return 0, fmt.Errorf("%q is no weekday (0-7 or SUN-SAT)", s)
	}
	return n % 7, nil
}

// valuesOf parses one part of a list as robfig/cron does: "*" or "?", n,
// a-b, each optionally followed by /step, with numbers within [min, max]
// (names from names). "*" and "a/s" run up to top, which is max but for the
// day of week, where they stop at Saturday as in robfig/cron ("1/2" is 1,3,5)
// while 7 may be written. star reports a "*" or "?" without a step above 1:
// the part matches every value and leaves the field unrestricted.
func valuesOf(part string, min, max, top int, names map[string]int) (bits uint64, star bool, err error) {
	num := func(s string) (int, error) {
		if n, ok := names[s]; ok {
			return n, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("%q: %q is no number", part, s)
		}
		if n < min || n > max {
			return 0, fmt.Errorf("%q: %d is out of %d-%d", part, n, min, max)
		}
		return n, nil
	}
	values, stepText, hasStep := strings.Cut(part, "/")
	step := 1
	if hasStep {
		if step, err = strconv.Atoi(stepText); err != nil || step < 1 {
			return 0, false, fmt.Errorf("%q: the step after / must be a whole number of at least 1", part)
		}
	}
	lo, hi := min, top
	switch a, b, isRange := strings.Cut(values, "-"); {
	case values == "*" || values == "?":
		star = step == 1
	case isRange:
		if lo, err = num(a); err != nil {
			return 0, false, err
		}
		if hi, err = num(b); err != nil {
			return 0, false, err
		}
		if hi < lo {
			return 0, false, fmt.Errorf("%q: a range must go up", part)
		}
	default:
		if lo, err = num(values); err != nil {
			return 0, false, err
		}
		if !hasStep {
			hi = lo
		} else if hi < lo {
			hi = lo // 7/2: Sunday alone
		}
	}
	for v := lo; v <= hi; v += step {
		bits |= 1 << uint(v)
	}
	return bits, star, nil
}
