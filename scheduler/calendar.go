package scheduler

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Calendar specs: robfig/cron's parser knows no "last day of the month" or
// "nth weekday", so a spec that uses them is split in two. Its day fields
// go to a calendar filter of baton's own; the rest, with both day fields
// set to "*", goes to robfig/cron as any spec does (so times of day, DST and
// the fixed-time rules are the same as for other specs), and Next skips
// the days the filter refuses.
//
// Day of month: "L" the last day, besides numbers and ranges ("1,15,L").
// Day of week: "D#N" the Nth weekday D of the month (1#2: the second
// Monday; N 1..5), "DL" the last weekday D (5L: the last Friday), besides
// numbers 0-7 (0 and 7 Sunday), names SUN-SAT and ranges. With both day
// fields restricted a day matches either, as in every cron.

// dayMatcher tells whether a local date matches one day field.
type dayMatcher func(d time.Time) bool

// calendarSchedule is a schedule whose days a calendar filter picks.
type calendarSchedule struct {
	inner    Schedule // the spec with "*" in both day fields
	loc      *time.Location
	dom, dow dayMatcher // nil: "*"
}

// calendarSearchDays bounds how many days Next looks ahead: a spec that
// fires at all does so within 8 years (see fireHorizon).
const calendarSearchDays = 9 * 366

func (s *calendarSchedule) Next(after time.Time) time.Time {
	t := after
	for range calendarSearchDays {
		n := s.inner.Next(t)
		if n.IsZero() {
			return n
		}
		local := n.In(s.loc)
		if s.match(local) {
			return n
		}
		// not this day: go on from its last instant
		y, m, d := local.Date()
		t = time.Date(y, m, d+1, 0, 0, 0, 0, s.loc).Add(-time.Nanosecond)
		if !t.After(n) { // a day that ends where it began (a zone that skipped it)
			t = n
		}
	}
	return time.Time{}
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

// calendarSpec splits spec when a day field uses L or #: it returns the
// spec for robfig/cron (day fields "*") and the filter's matchers; ok is
// false for a spec without them.
func calendarSpec(spec string) (inner string, dom, dow dayMatcher, ok bool, err error) {
	f := strings.Fields(spec)
	if len(f) != 5 && len(f) != 6 || strings.HasPrefix(spec, "@") {
		return "", nil, nil, false, nil
	}
	di, wi := len(f)-3, len(f)-1
	if !strings.ContainsAny(strings.ToUpper(f[di]), "L") && !strings.ContainsAny(strings.ToUpper(f[wi]), "L#") {
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
// a-b and L, separated by commas.
func domMatcher(field string) (dayMatcher, error) {
	if field == "*" || field == "?" {
		return nil, nil
	}
	var ms []dayMatcher
	for part := range strings.SplitSeq(field, ",") {
		if strings.EqualFold(part, "L") {
			ms = append(ms, func(d time.Time) bool { return d.Day() == lastDay(d) })
			continue
		}
		lo, hi, err := rangeOf(part, 1, 31, nil)
		if err != nil {
			return nil, err
		}
		ms = append(ms, func(d time.Time) bool { return d.Day() >= lo && d.Day() <= hi })
	}
	return anyOf(ms), nil
}

var weekdays = map[string]int{"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}

// dowMatcher parses a day-of-week field: "*", "?", weekdays 0-7 or SUN-SAT,
// ranges, D#N and DL, separated by commas.
func dowMatcher(field string) (dayMatcher, error) {
	if field == "*" || field == "?" {
		return nil, nil
	}
	var ms []dayMatcher
	for part := range strings.SplitSeq(field, ",") {
		up := strings.ToUpper(part)
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
			lo, hi, err := rangeOf(up, 0, 7, weekdays)
			if err != nil {
				return nil, err
			}
			ms = append(ms, func(d time.Time) bool {
				w := int(d.Weekday())
				return w >= lo && w <= hi || w == 0 && lo <= 7 && hi >= 7
			})
		}
	}
	return anyOf(ms), nil
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

// rangeOf parses n or a-b within [min, max] (names from names).
func rangeOf(part string, min, max int, names map[string]int) (lo, hi int, err error) {
	num := func(s string) (int, error) {
		if n, ok := names[s]; ok {
			return n, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < min || n > max {
			return 0, fmt.Errorf("%q is out of %d-%d", part, min, max)
		}
		return n, nil
	}
	a, b, isRange := strings.Cut(part, "-")
	if lo, err = num(a); err != nil {
		return 0, 0, err
	}
	hi = lo
	if isRange {
		if hi, err = num(b); err != nil {
			return 0, 0, err
		}
		if hi < lo {
			return 0, 0, fmt.Errorf("%q: a range must go up", part)
		}
	}
	return lo, hi, nil
}

func anyOf(ms []dayMatcher) dayMatcher {
	return func(d time.Time) bool {
		for _, m := range ms {
			if m(d) {
				return true
			}
		}
		return false
	}
}
